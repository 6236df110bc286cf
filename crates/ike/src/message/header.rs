//! The IKE header (RFC 7296 3.1): a view with named field offsets and a
//! [`HeaderRepr`] with parse/emit.
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! |                       IKE SA Initiator's SPI                  |
//! |                       IKE SA Responder's SPI                  |
//! |  Next Payload | MjVer | MnVer | Exchange Type |     Flags     |
//! |                          Message ID                           |
//! |                            Length                             |
//! ```

use super::error::{Error, HeaderError, Result};
use super::types::{ExchangeType, PayloadType};

/// Length of the IKE header.
pub const HEADER_LEN: usize = 28;

/// The only major version this codec speaks.
pub const IKE_MAJOR_VERSION: u8 = 2;

mod field {
    use core::ops::Range;
    pub const SPI_I: Range<usize> = 0..8;
    pub const SPI_R: Range<usize> = 8..16;
    pub const NEXT_PAYLOAD: usize = 16;
    pub const VERSION: usize = 17;
    pub const EXCHANGE_TYPE: usize = 18;
    pub const FLAGS: usize = 19;
    pub const MESSAGE_ID: Range<usize> = 20..24;
    pub const LENGTH: Range<usize> = 24..28;
}

/// Flag bits of the header (RFC 7296 3.1). The other bits are sent as zero
/// and ignored on receipt.
pub mod flags {
    /// Response: this message answers a request with the same Message ID.
    pub const RESPONSE: u8 = 0x20;
    /// Version: the sender could speak a higher major version.
    pub const VERSION: u8 = 0x10;
    /// Initiator: sent by the original initiator of the IKE SA.
    pub const INITIATOR: u8 = 0x08;
}

/// A view of an IKE header at the start of a buffer.
/// [`Header::new_checked`] guarantees at least [`HEADER_LEN`] bytes.
#[derive(Debug, Clone, Copy)]
pub struct Header<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Header<T> {
    /// Wraps `buffer` after checking it holds a whole header.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let len = buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::Header(HeaderError::Truncated { len }));
        }
        Ok(Header { buffer })
    }

    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }
    /// IKE SA Initiator's SPI.
    pub fn spi_i(&self) -> u64 {
        u64::from_be_bytes(self.b()[field::SPI_I].try_into().expect("8 bytes"))
    }
    /// IKE SA Responder's SPI (0 in the first IKE_SA_INIT request).
    pub fn spi_r(&self) -> u64 {
        u64::from_be_bytes(self.b()[field::SPI_R].try_into().expect("8 bytes"))
    }
    /// Type of the first payload.
    pub fn next_payload(&self) -> PayloadType {
        PayloadType(self.b()[field::NEXT_PAYLOAD])
    }
    /// Major version (high nibble).
    pub fn major_version(&self) -> u8 {
        self.b()[field::VERSION] >> 4
    }
    /// Minor version (low nibble; ignored on receipt, sent as 0).
    pub fn minor_version(&self) -> u8 {
        self.b()[field::VERSION] & 0x0f
    }
    /// Exchange type.
    pub fn exchange_type(&self) -> ExchangeType {
        ExchangeType(self.b()[field::EXCHANGE_TYPE])
    }
    /// Flags byte (see [`flags`]).
    pub fn flags(&self) -> u8 {
        self.b()[field::FLAGS]
    }
    /// Message ID.
    pub fn message_id(&self) -> u32 {
        u32::from_be_bytes(self.b()[field::MESSAGE_ID].try_into().expect("4 bytes"))
    }
    /// Length of the whole message, header included.
    pub fn length(&self) -> u32 {
        u32::from_be_bytes(self.b()[field::LENGTH].try_into().expect("4 bytes"))
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Header<T> {
    fn m(&mut self) -> &mut [u8] {
        self.buffer.as_mut()
    }
    /// Sets the Length field.
    pub fn set_length(&mut self, len: u32) {
        self.m()[field::LENGTH].copy_from_slice(&len.to_be_bytes());
    }
    /// Sets the Next Payload field.
    pub fn set_next_payload(&mut self, t: PayloadType) {
        self.m()[field::NEXT_PAYLOAD] = t.0;
    }
}

/// The IKE header's meaning. Next Payload and Length are not here: they
/// follow from the payloads and are written by the message emitter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeaderRepr {
    /// IKE SA Initiator's SPI.
    pub spi_i: u64,
    /// IKE SA Responder's SPI.
    pub spi_r: u64,
    /// Exchange type.
    pub exchange: ExchangeType,
    /// I flag: sent by the original initiator.
    pub initiator: bool,
    /// R flag: a response.
    pub response: bool,
    /// V flag: the sender could speak a higher major version.
    pub version_flag: bool,
    /// Message ID.
    pub message_id: u32,
}

impl HeaderRepr {
    /// Parses a header and checks version and length against the datagram:
    /// `datagram_len` must equal the Length field exactly (no truncation, no
    /// trailing bytes).
    pub fn parse<T: AsRef<[u8]>>(
        header: &Header<T>,
        datagram_len: usize,
    ) -> Result<(HeaderRepr, PayloadType)> {
        if header.major_version() != IKE_MAJOR_VERSION {
            return Err(Error::Header(HeaderError::InvalidMajorVersion {
                major: header.major_version(),
            }));
        }
        let field = header.length();
        if usize::try_from(field).ok() != Some(datagram_len) {
            return Err(Error::Header(HeaderError::LengthMismatch {
                field,
                datagram: datagram_len,
            }));
        }
        let f = header.flags();
        Ok((
            HeaderRepr {
                spi_i: header.spi_i(),
                spi_r: header.spi_r(),
                exchange: header.exchange_type(),
                initiator: f & flags::INITIATOR != 0,
                response: f & flags::RESPONSE != 0,
                version_flag: f & flags::VERSION != 0,
                message_id: header.message_id(),
            },
            header.next_payload(),
        ))
    }

    /// Writes the header into `buf[..HEADER_LEN]` (version 2.0).
    pub fn emit(&self, buf: &mut [u8], next_payload: PayloadType, length: u32) {
        let b = &mut buf[..HEADER_LEN];
        b[field::SPI_I].copy_from_slice(&self.spi_i.to_be_bytes());
        b[field::SPI_R].copy_from_slice(&self.spi_r.to_be_bytes());
        b[field::NEXT_PAYLOAD] = next_payload.0;
        b[field::VERSION] = IKE_MAJOR_VERSION << 4;
        b[field::EXCHANGE_TYPE] = self.exchange.0;
        b[field::FLAGS] = (if self.initiator { flags::INITIATOR } else { 0 })
            | (if self.response { flags::RESPONSE } else { 0 })
            | (if self.version_flag { flags::VERSION } else { 0 });
        b[field::MESSAGE_ID].copy_from_slice(&self.message_id.to_be_bytes());
        b[field::LENGTH].copy_from_slice(&length.to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> HeaderRepr {
        HeaderRepr {
            spi_i: 0x0102030405060708,
            spi_r: 0x1112131415161718,
            exchange: ExchangeType::IKE_AUTH,
            initiator: true,
            response: false,
            version_flag: false,
            message_id: 1,
        }
    }

    #[test]
    fn emit_writes_named_fields_at_their_offsets() {
        let mut b = [0u8; HEADER_LEN];
        sample().emit(&mut b, PayloadType::SK, 0x1234);
        assert_eq!(
            b,
            [
                1, 2, 3, 4, 5, 6, 7, 8, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18, 46, 0x20,
                35, 0x08, 0, 0, 0, 1, 0, 0, 0x12, 0x34
            ]
        );
        let h = Header::new_checked(&b[..]).unwrap();
        let (r, next) = HeaderRepr::parse(&h, 0x1234).unwrap();
        assert_eq!((r, next), (sample(), PayloadType::SK));
    }

    #[test]
    fn short_buffer_is_truncated() {
        assert_eq!(
            Header::new_checked(&[0u8; 27][..]).err(),
            Some(Error::Header(HeaderError::Truncated { len: 27 }))
        );
    }

    #[test]
    fn major_version_other_than_2_is_invalid_major_version() {
        let mut b = [0u8; HEADER_LEN];
        sample().emit(&mut b, PayloadType::NONE, 28);
        b[17] = 0x30;
        let h = Header::new_checked(&b[..]).unwrap();
        let e = HeaderRepr::parse(&h, 28).unwrap_err();
        assert_eq!(
            e,
            Error::Header(HeaderError::InvalidMajorVersion { major: 3 })
        );
        assert_eq!(
            e.notify_type(),
            crate::message::NotifyType::INVALID_MAJOR_VERSION
        );
        // A higher minor version is fine (RFC 7296 2.5: ignore it).
        b[17] = 0x21;
        assert!(HeaderRepr::parse(&Header::new_checked(&b[..]).unwrap(), 28).is_ok());
    }

    #[test]
    fn length_must_equal_the_datagram() {
        let mut b = [0u8; HEADER_LEN];
        sample().emit(&mut b, PayloadType::NONE, 28);
        let h = Header::new_checked(&b[..]).unwrap();
        assert_eq!(
            HeaderRepr::parse(&h, 29).unwrap_err(),
            Error::Header(HeaderError::LengthMismatch {
                field: 28,
                datagram: 29
            })
        );
    }

    #[test]
    fn reserved_flag_bits_are_ignored() {
        let mut b = [0u8; HEADER_LEN];
        sample().emit(&mut b, PayloadType::NONE, 28);
        b[19] |= 0xc7;
        let (r, _) = HeaderRepr::parse(&Header::new_checked(&b[..]).unwrap(), 28).unwrap();
        assert_eq!(r, sample());
    }
}

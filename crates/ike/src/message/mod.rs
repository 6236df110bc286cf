//! The IKEv2 wire format (RFC 7296 section 3).
//!
//! Built the way smoltcp's `wire` module is: for each format a view over
//! bytes with named field offsets ([`Header`], [`GenericPayload`]) and a
//! parsed representation with parse and emit ([`HeaderRepr`], [`Payload`]
//! and one type per payload). [`Message`] ties them together:
//!
//! - [`Message::parse`] checks the header (major version 2, Length equal to
//!   the datagram) and walks the payload chain strictly ([`PayloadIter`]):
//!   every length consistent with its container, nothing after the last
//!   payload, SK/SKF last. Unknown payloads are kept when their critical bit
//!   is clear and rejected with the type when set (RFC 7296 2.5).
//! - [`Message::emit`] writes lengths and Next Payload chaining itself.
//! - An SK payload's inner chain is parsed after decryption with
//!   [`PayloadIter::inner`] and built with [`emit_chain`]; see
//!   [`encrypted`].
//!
//! Every malformed input is an [`Error`] naming the payload and what was
//! wrong; nothing here panics on input (fuzzed: crates/ike/fuzz). Reprs own
//! their bytes (`Vec<u8>`): IKE is control plane, and owned messages are
//! simpler for the engine to store for retransmission.

mod auth;
mod cert;
mod config;
mod delete;
pub mod encrypted;
mod error;
mod header;
mod id;
mod ke;
mod notify;
mod opaque;
mod payload;
mod sa;
mod ts;
mod types;

pub use auth::Authentication;
pub use cert::{Certificate, CertificateRequest, CA_HASH_LEN};
pub use config::{Config, ConfigAttribute};
pub use delete::Delete;
pub use encrypted::{Encrypted, EncryptedFragment, SkParts};
pub use error::{Error, HeaderError, Problem, Result, SubstructureProblem};
pub use header::{flags, Header, HeaderRepr, HEADER_LEN, IKE_MAJOR_VERSION};
pub use id::Identification;
pub use ke::{KeyExchange, Nonce, NONCE_MAX, NONCE_MIN};
pub use notify::Notify;
pub use opaque::Opaque;
pub use payload::{
    emit_chain, parse_chain, GenericPayload, Payload, PayloadIter, RawPayload, GENERIC_HEADER_LEN,
};
pub use sa::{Attribute, AttributeValue, Proposal, SecurityAssociation, Transform};
pub use ts::{TrafficSelector, TrafficSelectors, IPV4_SELECTOR_LEN, IPV6_SELECTOR_LEN};
pub use types::{
    AttributeType, AuthMethod, CertEncoding, ConfigType, ExchangeType, IdType, NotifyType,
    PayloadType, ProtocolId, TransformType, TsType,
};

/// The four zero bytes that precede IKE messages on UDP port 4500 (RFC 3948
/// 2.2), telling them from ESP (whose SPI is never 0).
pub const NON_ESP_MARKER: [u8; 4] = [0; 4];

/// On port 4500: the IKE message after the non-ESP marker, or None when the
/// datagram is not IKE (ESP, or a NAT-keepalive byte).
pub fn strip_non_esp_marker(datagram: &[u8]) -> Option<&[u8]> {
    datagram.strip_prefix(&NON_ESP_MARKER[..])
}

/// A whole IKE message: header and payloads (an encrypted message ends with
/// [`Payload::Encrypted`] or [`Payload::Fragment`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// The header (Next Payload and Length follow from `payloads`).
    pub header: HeaderRepr,
    /// The payloads, in order.
    pub payloads: Vec<Payload>,
}

impl Message {
    /// Checks the header against the datagram and returns it with the
    /// walker over its payloads, for callers that need payload bodies as
    /// received (the IDi/IDr bytes AUTH is computed over).
    pub fn parse_raw(datagram: &[u8]) -> Result<(HeaderRepr, PayloadIter<'_>)> {
        let header = Header::new_checked(datagram)?;
        let (repr, first) = HeaderRepr::parse(&header, datagram.len())?;
        Ok((repr, PayloadIter::new(first, &datagram[HEADER_LEN..])))
    }

    /// Parses a datagram (without the non-ESP marker) into a message.
    pub fn parse(datagram: &[u8]) -> Result<Message> {
        let (header, iter) = Message::parse_raw(datagram)?;
        Ok(Message {
            header,
            payloads: parse_chain(iter)?,
        })
    }

    /// Emits the message with lengths and Next Payload chaining filled in.
    pub fn emit(&self) -> Result<Vec<u8>> {
        let mut out = vec![0u8; HEADER_LEN];
        let first = payload::emit_chain_into(&self.payloads, false, &mut out)?;
        let length = u32::try_from(out.len()).map_err(|_| Error::TooLong {
            payload: PayloadType::NONE,
        })?;
        self.header.emit(&mut out, first, length);
        Ok(out)
    }

    /// The first payload of `payload_type`.
    pub fn find(&self, payload_type: PayloadType) -> Option<&Payload> {
        self.payloads
            .iter()
            .find(|p| p.payload_type() == payload_type)
    }

    /// The Notify payloads of one type.
    pub fn notifies(&self, notify_type: NotifyType) -> impl Iterator<Item = &Notify> {
        self.payloads.iter().filter_map(move |p| match p {
            Payload::Notify(n) if n.notify_type == notify_type => Some(n),
            _ => None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn init_request() -> Message {
        Message {
            header: HeaderRepr {
                spi_i: 0x1122334455667788,
                spi_r: 0,
                exchange: ExchangeType::IKE_SA_INIT,
                initiator: true,
                response: false,
                version_flag: false,
                message_id: 0,
            },
            payloads: vec![
                Payload::Sa(SecurityAssociation(vec![Proposal {
                    number: 1,
                    protocol: ProtocolId::IKE,
                    spi: vec![],
                    transforms: vec![
                        Transform::with_key_length(TransformType::ENCR, 20, 256),
                        Transform::new(TransformType::PRF, 7),
                        Transform::new(TransformType::KE, 31),
                    ],
                }])),
                Payload::Ke(KeyExchange {
                    group: 31,
                    data: vec![0x42; 32],
                }),
                Payload::Nonce(Nonce(vec![0x17; 32])),
                Payload::Notify(Notify::ike(
                    NotifyType::NAT_DETECTION_SOURCE_IP,
                    vec![1; 20],
                )),
                Payload::Notify(Notify::ike(
                    NotifyType::NAT_DETECTION_DESTINATION_IP,
                    vec![2; 20],
                )),
                Payload::Notify(Notify::ike(
                    NotifyType::IKEV2_FRAGMENTATION_SUPPORTED,
                    vec![],
                )),
            ],
        }
    }

    #[test]
    fn message_round_trips_with_computed_lengths() {
        let m = init_request();
        let bytes = m.emit().unwrap();
        let h = Header::new_checked(&bytes[..]).unwrap();
        assert_eq!(h.length() as usize, bytes.len());
        assert_eq!(h.next_payload(), PayloadType::SA);
        assert_eq!(Message::parse(&bytes), Ok(m.clone()));
        assert_eq!(m.notifies(NotifyType::NAT_DETECTION_SOURCE_IP).count(), 1);
        assert!(m.find(PayloadType::KE).is_some());
    }

    #[test]
    fn trailing_bytes_and_truncation_are_length_mismatches() {
        let mut bytes = init_request().emit().unwrap();
        bytes.push(0);
        assert!(matches!(
            Message::parse(&bytes),
            Err(Error::Header(HeaderError::LengthMismatch { .. }))
        ));
        bytes.truncate(bytes.len() - 2);
        assert!(matches!(
            Message::parse(&bytes),
            Err(Error::Header(HeaderError::LengthMismatch { .. }))
        ));
    }

    #[test]
    fn a_payload_length_past_the_message_is_an_error() {
        let mut bytes = init_request().emit().unwrap();
        // The SA's Payload Length (bytes 30..32) made one too large, with
        // the header Length still consistent with the datagram.
        let sa_len = u16::from_be_bytes([bytes[30], bytes[31]]);
        bytes[30..32].copy_from_slice(&(sa_len + 1).to_be_bytes());
        let e = Message::parse(&bytes).unwrap_err();
        // The SA body now has one more byte (the KE header's first byte),
        // which the SA parser must refuse; the chain is misaligned after.
        assert!(matches!(e, Error::Payload { .. }), "{e:?}");
    }

    #[test]
    fn encrypted_message_inner_chain_round_trips() {
        let inner = vec![
            Payload::IdI(Identification::fqdn("left.example.org")),
            Payload::Auth(Authentication {
                method: AuthMethod::SHARED_KEY_MIC,
                data: vec![9; 32],
            }),
            Payload::TsI(TrafficSelectors(vec![TrafficSelector::Ipv4 {
                ip_protocol: 0,
                start_port: 0,
                end_port: 65535,
                start: "10.0.0.0".parse().unwrap(),
                end: "10.0.0.255".parse().unwrap(),
            }])),
        ];
        let (first, plain) = emit_chain(&inner).unwrap();
        let padded = encrypted::pad(&plain, 16);
        // A stand-in "cipher": 16-byte IV, identity encryption, 16-byte ICV.
        let mut body = vec![0xaa; 16];
        body.extend_from_slice(&padded);
        body.extend_from_slice(&[0xbb; 16]);
        let m = Message {
            header: HeaderRepr {
                exchange: ExchangeType::IKE_AUTH,
                message_id: 1,
                spi_r: 9,
                ..init_request().header
            },
            payloads: vec![Payload::Encrypted(Encrypted {
                next_payload: first,
                body,
            })],
        };
        let bytes = m.emit().unwrap();
        let parsed = Message::parse(&bytes).unwrap();
        assert_eq!(parsed, m);
        let Payload::Encrypted(sk) = &parsed.payloads[0] else {
            panic!("not SK")
        };
        assert_eq!(sk.next_payload, PayloadType::IDI);
        let parts = encrypted::split(PayloadType::SK, &sk.body, 16, 16, 16).unwrap();
        let plain = encrypted::strip_padding(PayloadType::SK, parts.ciphertext).unwrap();
        let got = parse_chain(PayloadIter::inner(sk.next_payload, plain)).unwrap();
        assert_eq!(got, inner);
        // The SK body is the tail of the datagram (what the ICV covers).
        assert_eq!(&bytes[bytes.len() - sk.body.len()..], &sk.body[..]);
    }

    /// Builds a datagram by hand: header, then (type of this payload's
    /// successor, critical, body) triples; the first payload is `first`.
    fn datagram(first: PayloadType, chain: &[(u8, bool, &[u8])]) -> Vec<u8> {
        let mut out = vec![0u8; HEADER_LEN];
        for (next, critical, body) in chain {
            out.extend_from_slice(&[*next, if *critical { 0x80 } else { 0 }]);
            out.extend_from_slice(&((body.len() + 4) as u16).to_be_bytes());
            out.extend_from_slice(body);
        }
        let len = out.len() as u32;
        init_request().header.emit(&mut out, first, len);
        out
    }

    #[test]
    fn unknown_payload_in_a_message_is_skipped_unless_critical() {
        let nonce = [0x11u8; 16];
        // Unknown type 99 between two known payloads, critical bit clear.
        let bytes = datagram(
            PayloadType::VENDOR_ID,
            &[(99, false, b"v"), (40, false, b"??"), (0, false, &nonce)],
        );
        let m = Message::parse(&bytes).unwrap();
        assert_eq!(
            m.payloads,
            vec![
                Payload::VendorId(Opaque(b"v".to_vec())),
                Payload::Unrecognized {
                    payload_type: PayloadType(99),
                    body: b"??".to_vec()
                },
                Payload::Nonce(Nonce(nonce.to_vec())),
            ]
        );
        // The same with the critical bit set on the unknown payload.
        let bytes = datagram(
            PayloadType::VENDOR_ID,
            &[(99, false, b"v"), (40, true, b"??"), (0, false, &nonce)],
        );
        let e = Message::parse(&bytes).unwrap_err();
        assert_eq!(e, Error::UnsupportedCriticalPayload(PayloadType(99)));
        assert_eq!(e.notify_type(), NotifyType::UNSUPPORTED_CRITICAL_PAYLOAD);
        assert_eq!(e.notify_data(), vec![99]);
    }

    #[test]
    fn a_malformed_payload_names_itself() {
        // A Nonce of 15 bytes inside an otherwise fine message.
        let bytes = datagram(PayloadType::NONCE, &[(0, false, &[0u8; 15])]);
        assert_eq!(
            Message::parse(&bytes).unwrap_err(),
            Error::Payload {
                payload: PayloadType::NONCE,
                problem: Problem::NonceLength { len: 15 }
            }
        );
        assert_eq!(
            Message::parse(&bytes).unwrap_err().notify_type(),
            NotifyType::INVALID_SYNTAX
        );
    }

    #[test]
    fn non_esp_marker() {
        assert_eq!(strip_non_esp_marker(&[0, 0, 0, 0, 1]), Some(&[1u8][..]));
        assert_eq!(strip_non_esp_marker(&[0, 0, 0, 1, 1]), None);
        assert_eq!(strip_non_esp_marker(&[0xff]), None);
    }
}

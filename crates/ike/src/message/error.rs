//! The one error type of the message codec: which payload, what was wrong.
//!
//! Every malformed input maps to one of these; nothing in the codec panics on
//! input bytes. [`Error::notify_type`] says which error notification RFC 7296
//! prescribes in answer (the engine decides whether to send it: an
//! unauthenticated IKE_SA_INIT, for example, gets no answer at all).

use super::types::{NotifyType, PayloadType};

/// Why a message, payload or substructure could not be parsed or emitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Error {
    /// The IKE header itself is wrong.
    Header(HeaderError),
    /// A payload of this type is malformed.
    Payload {
        /// The payload's type (from the previous payload's Next Payload).
        payload: PayloadType,
        /// What was wrong with it.
        problem: Problem,
    },
    /// RFC 7296 2.5: a payload type this codec does not know, with the
    /// critical bit set. The answer is UNSUPPORTED_CRITICAL_PAYLOAD whose
    /// data is this type.
    UnsupportedCriticalPayload(PayloadType),
    /// Emit only: a payload (or substructure) longer than its 16-bit length
    /// field can say.
    TooLong {
        /// The payload that did not fit.
        payload: PayloadType,
    },
}

/// What was wrong with the IKE header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeaderError {
    /// The datagram is shorter than the 28-byte header.
    Truncated {
        /// The datagram's length.
        len: usize,
    },
    /// Major version other than 2 (RFC 7296 2.5: answer
    /// INVALID_MAJOR_VERSION, carrying 2 in the header).
    InvalidMajorVersion {
        /// The major version received.
        major: u8,
    },
    /// The header's Length field differs from the datagram's length (covers
    /// both truncation and trailing bytes).
    LengthMismatch {
        /// The Length field.
        field: u32,
        /// The datagram's length.
        datagram: usize,
    },
}

/// What was wrong inside a payload. Lengths are the values read from the
/// wire, so a log line can say exactly what the peer sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Problem {
    /// Fewer bytes remain in the container than a generic payload header (4).
    HeaderTruncated {
        /// Bytes left.
        available: usize,
    },
    /// The Payload Length field is smaller than the generic header.
    LengthTooShort {
        /// The Payload Length field.
        length: u16,
    },
    /// The Payload Length field runs past the end of its container.
    LengthOverrun {
        /// The Payload Length field.
        length: u16,
        /// Bytes left in the container (header included).
        available: usize,
    },
    /// Bytes remain after the last payload (Next Payload 0) of a chain.
    TrailingBytes {
        /// How many.
        count: usize,
    },
    /// The body is shorter than the payload's fixed fields.
    BodyTooShort {
        /// Body length.
        len: usize,
        /// The minimum for this payload.
        min: usize,
    },
    /// The body does not match what its fields say (a count, a length,
    /// leftover bytes after the last element).
    BodyLength {
        /// Body length (or the substructure's).
        len: usize,
        /// What the fields imply.
        expected: usize,
    },
    /// Nonce data outside 16..=256 bytes (RFC 7296 3.9).
    NonceLength {
        /// Nonce data length.
        len: usize,
    },
    /// An SPI Size not allowed for the protocol (Delete).
    SpiSize {
        /// The SPI Size field.
        size: u8,
    },
    /// A Protocol ID not allowed here (Delete: only IKE, AH, ESP).
    ProtocolId {
        /// The Protocol ID field.
        value: u8,
    },
    /// An IPv4 or IPv6 identity whose data is not 4 or 16 bytes.
    AddressLength {
        /// Data length.
        len: usize,
    },
    /// SA payload: a proposal substructure is malformed.
    Proposal(SubstructureProblem),
    /// SA payload: a transform substructure is malformed.
    Transform(SubstructureProblem),
    /// SA payload: a transform attribute is malformed.
    Attribute(SubstructureProblem),
    /// TS payload: a traffic selector is malformed.
    TrafficSelector(SubstructureProblem),
    /// CP payload: a configuration attribute is malformed.
    ConfigAttribute(SubstructureProblem),
    /// An SK/SKF body too short for the IV and ICV lengths of the cipher.
    EncryptedTooShort {
        /// Body length.
        len: usize,
        /// IV + ICV (+ one byte of ciphertext: the pad length).
        min: usize,
    },
    /// An SK/SKF ciphertext that is not a whole number of cipher blocks.
    CiphertextNotBlockAligned {
        /// Ciphertext length.
        len: usize,
        /// Block size.
        block: usize,
    },
    /// The decrypted Pad Length byte points before the start of the
    /// plaintext.
    PadLength {
        /// Pad Length field.
        pad: u8,
        /// Plaintext length (pad length byte included).
        len: usize,
    },
    /// SK or SKF followed by another payload (RFC 7296 3.14: it MUST be
    /// last), or an SK/SKF inside a decrypted chain.
    EncryptedNotLast,
    /// SKF: fragment number 0, total 0, or number > total (RFC 7383 2.5).
    FragmentNumber {
        /// Fragment Number field.
        number: u16,
        /// Total Fragments field.
        total: u16,
    },
}

/// What was wrong with a substructure inside a payload (proposal, transform,
/// attribute, traffic selector).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubstructureProblem {
    /// Fewer bytes remain than the substructure's fixed header.
    Truncated {
        /// Bytes left.
        available: usize,
    },
    /// Its length field is below the fixed header or past the container.
    Length {
        /// The length field.
        length: u16,
        /// Bytes left in the container.
        available: usize,
    },
    /// "Last Substruc" is neither the "more" value nor 0, or says more/last
    /// where the container says otherwise.
    LastSubstruc {
        /// The field.
        value: u8,
    },
    /// A count field (transforms in a proposal, selectors in a TS payload)
    /// differs from what the bytes hold.
    Count {
        /// The count field.
        field: usize,
        /// What was found.
        found: usize,
    },
    /// Fields inside are inconsistent with its length (an SPI larger than
    /// the proposal, a selector length that does not fit its type).
    Inconsistent {
        /// The length field.
        length: u16,
    },
}

impl Error {
    pub(crate) fn payload(payload: PayloadType, problem: Problem) -> Self {
        Error::Payload { payload, problem }
    }

    /// The error notification RFC 7296 prescribes in answer:
    /// INVALID_MAJOR_VERSION, UNSUPPORTED_CRITICAL_PAYLOAD (data: the
    /// payload type, [`Error::notify_data`]) or INVALID_SYNTAX.
    pub fn notify_type(&self) -> NotifyType {
        match self {
            Error::Header(HeaderError::InvalidMajorVersion { .. }) => {
                NotifyType::INVALID_MAJOR_VERSION
            }
            Error::UnsupportedCriticalPayload(_) => NotifyType::UNSUPPORTED_CRITICAL_PAYLOAD,
            _ => NotifyType::INVALID_SYNTAX,
        }
    }

    /// The Notification Data for [`Error::notify_type`]: the one-byte
    /// payload type for UNSUPPORTED_CRITICAL_PAYLOAD, empty otherwise.
    pub fn notify_data(&self) -> Vec<u8> {
        match self {
            Error::UnsupportedCriticalPayload(t) => vec![t.0],
            _ => Vec::new(),
        }
    }
}

impl core::fmt::Display for Error {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Error::Header(h) => write!(f, "IKE header: {h:?}"),
            Error::Payload { payload, problem } => write!(f, "{payload:?} payload: {problem:?}"),
            Error::UnsupportedCriticalPayload(t) => {
                write!(f, "unsupported critical payload type {}", t.0)
            }
            Error::TooLong { payload } => write!(f, "{payload:?} payload too long to emit"),
        }
    }
}

impl std::error::Error for Error {}

/// Result with the codec's [`Error`].
pub type Result<T> = core::result::Result<T, Error>;

//! The one error type every view, `Repr` and builder in this crate returns.

/// Why a packet could not be viewed, parsed or built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Error {
    /// The buffer is shorter than the header or a length field says.
    Truncated,
    /// A field holds a value the format does not allow (bad version, length
    /// field smaller than the header, zero-length option, ...).
    Malformed,
    /// The checksum does not verify.
    Checksum,
    /// Well formed, but a variant this crate does not handle (ARP for a
    /// non-Ethernet/IPv4 pair, an unknown ICMP type, ...).
    Unsupported,
    /// The rules forbid an answer to this packet (an ICMP error about an ICMP
    /// error, a non-first fragment, a multicast source, ...).
    Suppressed,
    /// The output buffer is too small for what must be written.
    NoRoom,
}

impl core::fmt::Display for Error {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            Error::Truncated => "truncated packet",
            Error::Malformed => "malformed packet",
            Error::Checksum => "bad checksum",
            Error::Unsupported => "unsupported packet variant",
            Error::Suppressed => "no reply allowed to this packet",
            Error::NoRoom => "output buffer too small",
        })
    }
}

impl std::error::Error for Error {}

/// Result with this crate's [`Error`].
pub type Result<T> = core::result::Result<T, Error>;

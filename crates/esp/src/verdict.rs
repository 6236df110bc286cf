//! What happened to each packet of a burst, and the counted drop reasons.

use core::fmt;

/// Why a packet was dropped. The [`DropReason::name`] strings are stable:
/// stats JSON and metrics use them as keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum DropReason {
    /// Shorter than its headers say, or an ESP payload that is not a whole
    /// number of cipher blocks.
    Truncated,
    /// Not an ESP packet this SA can take: another protocol or UDP port, an
    /// IP fragment, a NAT-T keepalive or IKE packet, outer IPv6 extension headers.
    NotEsp,
    /// The SPI is not the SA's.
    UnknownSpi,
    /// Seen before, older than the anti-replay window, or sequence number 0.
    Replayed,
    /// The integrity check value did not verify.
    IcvMismatch,
    /// Pad bytes or pad length wrong after decryption.
    BadPadding,
    /// The inner packet (encap input or decap output) is not a sane IPv4/IPv6
    /// packet matching the ESP next header.
    BadInnerPacket,
    /// The SA reached a hard lifetime or ran out of sequence numbers.
    SaExpired,
    /// The buffer lacks the headroom or tailroom for the ESP headers, or the
    /// result would exceed the outer IP length field.
    NoRoom,
    /// A dummy packet (ESP next header 59, RFC 4303 §2.6: traffic-flow
    /// confidentiality filler): discarded by design, counted apart from errors.
    Dummy,
    /// The outer header said CE (congestion experienced) over an inner
    /// packet that is not ECN-capable: RFC 6040 §4.2 drops it, since its
    /// sender could not react to the mark.
    CeOnNotEct,
    /// Outbound: the sequence numbers past the last persisted reservation
    /// are not yet written to the state directory (the control plane's
    /// sequence keeper is behind, or the state directory cannot be
    /// written). Sending would risk reusing an AEAD nonce after a restart.
    SeqNotReserved,
}

impl DropReason {
    /// Number of reasons.
    pub const COUNT: usize = 12;

    /// Every reason, in [`DropReason::index`] order.
    pub const ALL: [DropReason; DropReason::COUNT] = [
        DropReason::Truncated,
        DropReason::NotEsp,
        DropReason::UnknownSpi,
        DropReason::Replayed,
        DropReason::IcvMismatch,
        DropReason::BadPadding,
        DropReason::BadInnerPacket,
        DropReason::SaExpired,
        DropReason::NoRoom,
        DropReason::Dummy,
        DropReason::CeOnNotEct,
        DropReason::SeqNotReserved,
    ];

    /// Stable snake_case name for stats and metrics.
    pub fn name(self) -> &'static str {
        match self {
            DropReason::Truncated => "truncated",
            DropReason::NotEsp => "not_esp",
            DropReason::UnknownSpi => "unknown_spi",
            DropReason::Replayed => "replayed",
            DropReason::IcvMismatch => "icv_mismatch",
            DropReason::BadPadding => "bad_padding",
            DropReason::BadInnerPacket => "bad_inner_packet",
            DropReason::SaExpired => "sa_expired",
            DropReason::NoRoom => "no_room",
            DropReason::Dummy => "dummy",
            DropReason::CeOnNotEct => "ce_on_not_ect",
            DropReason::SeqNotReserved => "seq_not_reserved",
        }
    }

    /// Dense index in `0..COUNT`, for counter arrays.
    pub fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for DropReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The outcome for one packet of a burst.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// The packet was transformed in place and should be sent on.
    Forward,
    /// The packet must be freed; its contents are unspecified.
    Drop(DropReason),
}

impl Verdict {
    /// True for [`Verdict::Forward`].
    pub fn is_forward(self) -> bool {
        matches!(self, Verdict::Forward)
    }
}

impl Default for Verdict {
    /// `Drop(Truncated)`: a verdict array nobody wrote never forwards a packet.
    fn default() -> Self {
        Verdict::Drop(DropReason::Truncated)
    }
}

/// One counter per [`DropReason`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DropCounts([u64; DropReason::COUNT]);

impl DropCounts {
    /// Counts one drop.
    pub fn add(&mut self, reason: DropReason) {
        self.0[reason.index()] += 1;
    }
    /// Counts `n` drops.
    pub fn add_n(&mut self, reason: DropReason, n: u64) {
        self.0[reason.index()] += n;
    }
    /// Drops counted for `reason`.
    pub fn get(&self, reason: DropReason) -> u64 {
        self.0[reason.index()]
    }
    /// All drops.
    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }
    /// `(reason, count)` for every reason, zeros included.
    pub fn iter(&self) -> impl Iterator<Item = (DropReason, u64)> + '_ {
        DropReason::ALL.iter().map(|&r| (r, self.get(r)))
    }
}

/// Counters of one SA direction.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SaStats {
    /// Packets forwarded.
    pub packets: u64,
    /// Inner (plaintext) bytes of the forwarded packets: what byte lifetimes count.
    pub bytes: u64,
    /// Drops by reason.
    pub drops: DropCounts,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_distinct_snake_case_and_indexes_dense() {
        let mut seen = std::collections::HashSet::new();
        for (i, r) in DropReason::ALL.iter().enumerate() {
            assert_eq!(r.index(), i);
            assert!(r.name().chars().all(|c| c.is_ascii_lowercase() || c == '_'));
            assert!(seen.insert(r.name()));
        }
        assert_eq!(DropReason::SaExpired.to_string(), "sa_expired");
    }

    #[test]
    fn drop_counts_add_up() {
        let mut c = DropCounts::default();
        c.add(DropReason::Replayed);
        c.add(DropReason::Replayed);
        c.add(DropReason::NoRoom);
        assert_eq!(c.get(DropReason::Replayed), 2);
        assert_eq!(c.total(), 3);
        assert!(!Verdict::default().is_forward());
    }
}

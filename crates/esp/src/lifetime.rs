//! SA lifetimes: which soft and hard limits an SA has reached.
//!
//! Soft limits only raise a flag the control plane polls (to start a rekey);
//! hard limits stop the SA: every further packet is dropped as `sa_expired`.
//! Time is always the caller's `now` in whole seconds of a monotonic clock.

use crate::config::Lifetimes;

/// Set of reached limits. Flags only ever get added.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Expiry(u8);

impl Expiry {
    pub const SOFT_PACKETS: Expiry = Expiry(1 << 0);
    pub const SOFT_BYTES: Expiry = Expiry(1 << 1);
    pub const SOFT_SECONDS: Expiry = Expiry(1 << 2);
    pub const HARD_PACKETS: Expiry = Expiry(1 << 3);
    pub const HARD_BYTES: Expiry = Expiry(1 << 4);
    pub const HARD_SECONDS: Expiry = Expiry(1 << 5);
    /// The outbound sequence number space is used up (2^32 - 1 without ESN,
    /// 2^64 - 1 with): the SA must be replaced before a number could repeat.
    pub const SEQUENCE_EXHAUSTED: Expiry = Expiry(1 << 6);

    const SOFT: u8 = 0b0000_0111;
    const HARD: u8 = 0b0111_1000;

    /// No limit reached.
    pub const NONE: Expiry = Expiry(0);

    /// Raw bits, for storing in an atomic.
    pub fn bits(self) -> u8 {
        self.0
    }
    /// From [`Expiry::bits`].
    pub fn from_bits(bits: u8) -> Self {
        Expiry(bits & (Self::SOFT | Self::HARD))
    }
    /// Every flag of `other` is set.
    pub fn contains(self, other: Expiry) -> bool {
        self.0 & other.0 == other.0
    }
    /// Some soft limit was reached (time to rekey).
    pub fn is_soft(self) -> bool {
        self.0 & Self::SOFT != 0
    }
    /// Some hard limit was reached: the SA drops everything.
    pub fn is_hard(self) -> bool {
        self.0 & Self::HARD != 0
    }
}

impl core::ops::BitOr for Expiry {
    type Output = Expiry;
    fn bitor(self, rhs: Expiry) -> Expiry {
        Expiry(self.0 | rhs.0)
    }
}

impl core::ops::BitOrAssign for Expiry {
    fn bitor_assign(&mut self, rhs: Expiry) {
        self.0 |= rhs.0;
    }
}

/// `value` reached `limit`, where `u64::MAX` means no limit.
#[inline]
fn reached(value: u64, limit: u64) -> bool {
    limit != u64::MAX && value >= limit
}

/// Lifetimes turned into plain numbers once (unlimited = `u64::MAX`), so the
/// per-burst checks are compares without `Option` branches.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    soft_packets: u64,
    hard_packets: u64,
    soft_bytes: u64,
    hard_bytes: u64,
    soft_seconds: u64,
    hard_seconds: u64,
    created: u64,
}

impl Limits {
    pub(crate) fn new(l: &Lifetimes, created: u64) -> Self {
        let or_max = |v: Option<u64>| v.unwrap_or(u64::MAX);
        Limits {
            soft_packets: or_max(l.packets.soft),
            hard_packets: or_max(l.packets.hard),
            soft_bytes: or_max(l.bytes.soft),
            hard_bytes: or_max(l.bytes.hard),
            soft_seconds: or_max(l.seconds.soft),
            hard_seconds: or_max(l.seconds.hard),
            created,
        }
    }

    /// Packets the SA may carry in all.
    pub(crate) fn hard_packets(&self) -> u64 {
        self.hard_packets
    }

    /// Could one more packet of `len` inner bytes still go, given `bytes` so far?
    #[inline]
    pub(crate) fn bytes_allow(&self, bytes: u64, len: u64) -> bool {
        bytes.saturating_add(len) <= self.hard_bytes
    }

    /// Limits reached by the clock alone.
    pub(crate) fn by_time(&self, now: u64) -> Expiry {
        let age = now.saturating_sub(self.created);
        let mut e = Expiry::NONE;
        if reached(age, self.soft_seconds) {
            e |= Expiry::SOFT_SECONDS;
        }
        if reached(age, self.hard_seconds) {
            e |= Expiry::HARD_SECONDS;
        }
        e
    }

    /// Limits reached after carrying `packets` and `bytes`.
    pub(crate) fn by_volume(&self, packets: u64, bytes: u64) -> Expiry {
        let mut e = Expiry::NONE;
        if reached(packets, self.soft_packets) {
            e |= Expiry::SOFT_PACKETS;
        }
        if reached(packets, self.hard_packets) {
            e |= Expiry::HARD_PACKETS;
        }
        if reached(bytes, self.soft_bytes) {
            e |= Expiry::SOFT_BYTES;
        }
        if reached(bytes, self.hard_bytes) {
            e |= Expiry::HARD_BYTES;
        }
        e
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Limit;

    fn limits() -> Limits {
        Limits::new(
            &Lifetimes {
                packets: Limit::new(8, 10),
                bytes: Limit::new(800, 1000),
                seconds: Limit::new(30, 60),
            },
            100,
        )
    }

    #[test]
    fn time_limits_are_reached_at_their_second() {
        let l = limits();
        assert_eq!(l.by_time(129), Expiry::NONE);
        assert_eq!(l.by_time(130), Expiry::SOFT_SECONDS);
        assert!(!l.by_time(159).is_hard());
        assert!(l.by_time(160).is_hard() && l.by_time(160).is_soft());
        // A clock that reads earlier than creation is not an expiry.
        assert_eq!(l.by_time(0), Expiry::NONE);
    }

    #[test]
    fn volume_limits() {
        let l = limits();
        assert_eq!(l.by_volume(7, 799), Expiry::NONE);
        assert_eq!(l.by_volume(8, 0), Expiry::SOFT_PACKETS);
        assert_eq!(l.by_volume(0, 800), Expiry::SOFT_BYTES);
        assert!(l.by_volume(10, 0).contains(Expiry::HARD_PACKETS));
        assert!(l.by_volume(0, 1000).contains(Expiry::HARD_BYTES));
        assert!(l.bytes_allow(900, 100));
        assert!(!l.bytes_allow(900, 101));
    }

    #[test]
    fn unlimited_never_expires() {
        let l = Limits::new(&Lifetimes::default(), 0);
        assert_eq!(l.by_time(u64::MAX), Expiry::NONE);
        assert_eq!(l.by_volume(u64::MAX, u64::MAX), Expiry::NONE);
        assert!(l.bytes_allow(u64::MAX - 5, 5));
    }

    #[test]
    fn flags_accumulate() {
        let e = Expiry::SOFT_BYTES | Expiry::SEQUENCE_EXHAUSTED;
        assert!(e.is_soft() && e.is_hard());
        assert_eq!(Expiry::from_bits(e.bits()), e);
        assert!(!Expiry::SOFT_PACKETS.is_hard());
    }
}

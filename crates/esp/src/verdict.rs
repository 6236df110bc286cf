//! What happened to each packet of a burst, and the counted drop reasons.
//!
//! The reasons are kept in one list, [`foreach_esp_drop_reason!`](crate::foreach_esp_drop_reason) (after
//! VPP's `foreach_esp_decrypt_error`): each entry gives the variant, its
//! stable name and a one-line description. This crate builds
//! [`DropReason`] from it, and the data plane builds its own reason enum
//! from the same list plus its own entries, so a reason added here reaches
//! the data plane's counters, the stats JSON, the metrics and the docs
//! table (docs/drops.md, checked by a test) without a second edit.

use core::fmt;
use core::marker::PhantomData;

/// The ESP engine's drop reasons, one entry per reason:
/// `Variant => "stable_name", "one-line description";`, optionally after
/// `///` lines that say more (they become the variant's rustdoc).
///
/// The stable names are keys of the stats JSON and values of the metrics'
/// `reason` label: never rename one. Order is the counter index; append.
///
/// Invoked as `foreach_esp_drop_reason!(callback { extra tokens })`, it
/// expands to `callback! { esp { entries } extra tokens }`.
#[macro_export]
macro_rules! foreach_esp_drop_reason {
    ($callback:ident { $($extra:tt)* }) => {
        $callback! {
            esp {
                Truncated => "truncated",
                    "ESP shorter than its headers say, or a payload that is not a whole number of cipher blocks";
                NotEsp => "not_esp",
                    "Not ESP an SA takes: another protocol or UDP port, an IP fragment, a NAT-T keepalive or IKE packet, outer IPv6 extension headers";
                UnknownSpi => "unknown_spi",
                    "No inbound SA has this SPI (and destination)";
                Replayed => "replayed",
                    "Anti-replay: seen before, older than the window, or sequence number 0";
                IcvMismatch => "icv_mismatch",
                    "The integrity check value did not verify (tampered or wrong key)";
                BadPadding => "bad_padding",
                    "Pad bytes or pad length wrong after decryption";
                BadInnerPacket => "bad_inner_packet",
                    "The inner packet (encap input or decap output) is not a sane IPv4/IPv6 packet matching the ESP next header";
                SaExpired => "sa_expired",
                    "The SA reached a hard lifetime or ran out of sequence numbers";
                /// The result would also be refused if it exceeded the outer
                /// IP length field.
                NoRoom => "no_room",
                    "The buffer lacks the headroom or tailroom for the headers";
                /// RFC 4303 §2.6: traffic-flow confidentiality filler, counted
                /// apart from errors.
                Dummy => "dummy",
                    "An ESP dummy packet (next header 59), discarded by design";
                /// RFC 6040 §4.2 drops it, since its sender could not react
                /// to the mark.
                CeOnNotEct => "ce_on_not_ect",
                    "Outer CE (congestion experienced) over an inner packet that is not ECN-capable";
                /// The control plane's sequence keeper is behind, or the
                /// state directory cannot be written. Sending would risk
                /// reusing an AEAD nonce after a restart.
                SeqNotReserved => "seq_not_reserved",
                    "Outbound sequence numbers past the last persisted reservation are not yet written to the state directory";
            }
            $($extra)*
        }
    };
}

/// Builds [`DropReason`] from the list of [`foreach_esp_drop_reason!`](crate::foreach_esp_drop_reason).
macro_rules! esp_drop_reason_enum {
    (esp { $( $(#[$doc:meta])* $variant:ident => $name:literal, $description:literal; )* }) => {
        /// Why the ESP engine dropped a packet. The [`DropReason::name`]
        /// strings are stable: stats JSON and metrics use them as keys.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(u8)]
        pub enum DropReason {
            $( #[doc = $description] #[doc = ""] $(#[$doc])* $variant, )*
        }

        impl DropReason {
            /// Number of reasons.
            pub const COUNT: usize = [$($name,)*].len();

            /// Every reason, in [`DropReason::index`] order.
            pub const ALL: [DropReason; DropReason::COUNT] = [$(DropReason::$variant,)*];

            /// Stable names, by index.
            const NAMES: [&'static str; DropReason::COUNT] = [$($name,)*];

            /// One-line descriptions, by index.
            const DESCRIPTIONS: [&'static str; DropReason::COUNT] = [$($description,)*];
        }
    };
}

foreach_esp_drop_reason!(esp_drop_reason_enum {});

impl DropReason {
    /// Stable snake_case name for stats and metrics.
    pub fn name(self) -> &'static str {
        Self::NAMES[self.index()]
    }

    /// One-line description, as docs/drops.md shows it.
    pub fn description(self) -> &'static str {
        Self::DESCRIPTIONS[self.index()]
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

/// A list of drop reasons with dense indexes, as [`DropCounts`] counts
/// them: the ESP engine's [`DropReason`], and the data plane's list, which
/// is this one followed by its own reasons.
pub trait Reasons: Copy + 'static {
    /// Every reason, in index order.
    const ALL: &'static [Self];
    /// Dense index in `0..ALL.len()`.
    fn index(self) -> usize;
}

impl Reasons for DropReason {
    const ALL: &'static [DropReason] = &DropReason::ALL;
    fn index(self) -> usize {
        DropReason::index(self)
    }
}

/// One counter per reason of the list `R`, which has `N` reasons (by
/// default the ESP engine's list). The data plane counts its own list
/// with the same type (`DropCounts<dataplane::DropReason, { COUNT }>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DropCounts<R: Reasons = DropReason, const N: usize = { DropReason::COUNT }>(
    [u64; N],
    PhantomData<R>,
);

impl<R: Reasons, const N: usize> Default for DropCounts<R, N> {
    fn default() -> Self {
        const { assert!(R::ALL.len() == N, "N must be the number of reasons") };
        DropCounts([0; N], PhantomData)
    }
}

impl<R: Reasons, const N: usize> DropCounts<R, N> {
    /// Counts one drop.
    #[inline]
    pub fn add(&mut self, reason: R) {
        self.0[reason.index()] += 1;
    }
    /// Counts `n` drops.
    pub fn add_n(&mut self, reason: R, n: u64) {
        self.0[reason.index()] += n;
    }
    /// Drops counted for `reason`.
    pub fn get(&self, reason: R) -> u64 {
        self.0[reason.index()]
    }
    /// All drops.
    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }
    /// Adds every counter of `other`.
    pub fn merge(&mut self, other: &Self) {
        for (a, b) in self.0.iter_mut().zip(other.0.iter()) {
            *a += b;
        }
    }
    /// `(reason, count)` for every reason, zeros included.
    pub fn iter(&self) -> impl Iterator<Item = (R, u64)> + '_ {
        R::ALL.iter().map(|&r| (r, self.get(r)))
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
    fn descriptions_are_one_line_each() {
        let mut seen = std::collections::HashSet::new();
        for r in DropReason::ALL {
            let d = r.description();
            assert!(
                !d.is_empty() && !d.contains('\n') && !d.ends_with('.'),
                "{r}: {d:?}"
            );
            assert!(
                seen.insert(d),
                "{r}: description shared with another reason"
            );
        }
    }

    #[test]
    fn drop_counts_add_up() {
        let mut c: DropCounts = DropCounts::default();
        c.add(DropReason::Replayed);
        c.add(DropReason::Replayed);
        c.add(DropReason::NoRoom);
        assert_eq!(c.get(DropReason::Replayed), 2);
        assert_eq!(c.total(), 3);
        assert!(!Verdict::default().is_forward());
    }
}

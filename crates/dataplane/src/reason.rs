//! Why the data plane dropped a packet: one counted reason per drop.
//!
//! The ESP engine's reasons ([`espgw_esp::DropReason`]) are folded in under
//! their own names, so the stats JSON has a single flat `drops` map. The
//! [`Drop::name`] strings are stable keys (stats JSON, metrics, scripts).

use espgw_esp::DropReason as EspDrop;

macro_rules! reasons {
    ($($(#[$doc:meta])* $variant:ident => $name:literal,)*) => {
        /// A counted drop reason.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Drop {
            $($(#[$doc])* $variant,)*
        }

        impl Drop {
            /// Every reason, in [`Drop::index`] order.
            pub const ALL: &'static [Drop] = &[$(Drop::$variant,)*];
            /// Number of reasons.
            pub const COUNT: usize = Drop::ALL.len();

            /// Stable snake_case name.
            pub fn name(self) -> &'static str {
                match self {
                    $(Drop::$variant => $name,)*
                }
            }
        }
    };
}

reasons! {
    // ---- from the ESP engine (same names as espgw_esp::DropReason) ----
    /// ESP shorter than its headers say, or not whole cipher blocks.
    EspTruncated => "truncated",
    /// Not ESP an SA takes (wrong encapsulation, NAT-T keepalive, IKE, fragment).
    NotEsp => "not_esp",
    /// No inbound SA has this SPI and destination.
    UnknownSpi => "unknown_spi",
    /// Anti-replay: seen before or older than the window.
    Replayed => "replayed",
    /// The ICV did not verify (tampered or wrong key).
    IcvMismatch => "icv_mismatch",
    /// Wrong padding after decryption.
    BadPadding => "bad_padding",
    /// The inner packet is not a sane IPv4/IPv6 packet.
    BadInnerPacket => "bad_inner_packet",
    /// The SA reached a hard lifetime.
    SaExpired => "sa_expired",
    /// Not enough headroom/tailroom in the buffer.
    NoRoom => "no_room",
    /// An ESP dummy packet (next header 59), discarded by design.
    Dummy => "dummy",
    /// Outer CE over a not-ECN-capable inner packet (RFC 6040 §4.2).
    CeOnNotEct => "ce_on_not_ect",
    /// Outbound sequence numbers not yet persisted (state directory behind or unwritable).
    SeqNotReserved => "seq_not_reserved",
    // ---- the data plane's own ----
    /// Too short for its Ethernet/ARP/IP headers, or inconsistent lengths.
    Malformed => "malformed",
    /// An EtherType the gateway does not handle.
    UnsupportedEthertype => "unsupported_ethertype",
    /// 802.1Q-tagged frame (VLANs are not configured on ports).
    Vlan => "vlan",
    /// Unicast frame for another MAC address (promiscuous ports see them).
    NotOurMac => "not_our_mac",
    /// Multicast or broadcast IP packet (never routed).
    Multicast => "multicast",
    /// IPv4 header checksum wrong.
    BadChecksum => "bad_checksum",
    /// ARP for someone else, or an ARP we do not act on.
    ArpIgnored => "arp_ignored",
    /// ICMPv6 neighbor discovery for someone else or malformed.
    NdIgnored => "nd_ignored",
    /// Addressed to the gateway, but not ping, ARP/ND or ESP.
    LocalUnsupported => "local_unsupported",
    /// TTL / hop limit ran out (ICMP time exceeded sent when allowed).
    TtlExceeded => "ttl_exceeded",
    /// Too big for the path, DF set or IPv6 (ICMP frag needed / packet too big sent).
    MtuExceeded => "mtu_exceeded",
    /// Too big for the path, IPv4 without DF, and it could not be
    /// fragmented (no buffer for the fragments).
    FragmentationNeeded => "fragmentation_needed",
    /// No route to the destination.
    NoRoute => "no_route",
    /// The next hop is unresolved and its wait queue is full.
    NeighborQueueFull => "neighbor_queue_full",
    /// The next hop did not answer ARP/ND in time.
    NeighborUnresolved => "neighbor_unresolved",
    /// A discard policy matched.
    PolicyDiscard => "policy_discard",
    /// No tunnel or policy matched and the default action is discard.
    NoPolicy => "no_policy",
    /// A decrypted packet outside its SA's traffic selectors.
    PolicyMismatch => "policy_mismatch",
    /// Plaintext on an unprotected port for traffic a tunnel protects, or
    /// that no bypass policy allows.
    UnprotectedPlaintext => "unprotected_plaintext",
    /// Plaintext that would leave through an unprotected port without a
    /// bypass policy (the last guard against leaks).
    PlaintextBlocked => "plaintext_blocked",
    /// A packet the gateway made (ICMP error, echo reply) about traffic
    /// from the protected side or out of a tunnel that no tunnel protects
    /// and that would leave through an unprotected port: dropped, never
    /// sent in the clear (RFC 4301). Usually a tunnel whose `local_ts`
    /// does not cover the gateway's protected address (`espgw check`
    /// warns about it).
    LocalNotProtected => "local_not_protected",
    /// The TX queue did not take the packet.
    TxFull => "tx_full",
    /// Pipeline mode: the ring to a worker (or back) was full.
    RingFull => "ring_full",
    /// Still waiting for its next hop when the gateway stopped.
    Shutdown => "shutdown",
}

impl Drop {
    /// Dense index in `0..COUNT`, for counter arrays.
    pub fn index(self) -> usize {
        self as usize
    }

    /// The data-plane reason for an ESP engine drop.
    pub fn from_esp(r: EspDrop) -> Drop {
        match r {
            EspDrop::Truncated => Drop::EspTruncated,
            EspDrop::NotEsp => Drop::NotEsp,
            EspDrop::UnknownSpi => Drop::UnknownSpi,
            EspDrop::Replayed => Drop::Replayed,
            EspDrop::IcvMismatch => Drop::IcvMismatch,
            EspDrop::BadPadding => Drop::BadPadding,
            EspDrop::BadInnerPacket => Drop::BadInnerPacket,
            EspDrop::SaExpired => Drop::SaExpired,
            EspDrop::NoRoom => Drop::NoRoom,
            EspDrop::Dummy => Drop::Dummy,
            EspDrop::CeOnNotEct => Drop::CeOnNotEct,
            EspDrop::SeqNotReserved => Drop::SeqNotReserved,
        }
    }
}

impl core::fmt::Display for Drop {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

/// One counter per [`Drop`] reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DropCounts([u64; Drop::COUNT]);

impl Default for DropCounts {
    fn default() -> Self {
        DropCounts([0; Drop::COUNT])
    }
}

impl DropCounts {
    /// Counts one drop.
    #[inline]
    pub fn add(&mut self, r: Drop) {
        self.0[r.index()] += 1;
    }
    /// Drops counted for `r`.
    pub fn get(&self, r: Drop) -> u64 {
        self.0[r.index()]
    }
    /// All drops.
    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }
    /// Adds every counter of `other`.
    pub fn merge(&mut self, other: &DropCounts) {
        for (a, b) in self.0.iter_mut().zip(other.0.iter()) {
            *a += b;
        }
    }
    /// `(reason, count)` for every reason, zeros included.
    pub fn iter(&self) -> impl Iterator<Item = (Drop, u64)> + '_ {
        Drop::ALL.iter().map(|&r| (r, self.get(r)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_indexes_dense() {
        let mut seen = std::collections::HashSet::new();
        for (i, r) in Drop::ALL.iter().enumerate() {
            assert_eq!(r.index(), i);
            assert!(seen.insert(r.name()), "duplicate {}", r.name());
        }
    }

    #[test]
    fn esp_reasons_keep_their_names() {
        for r in EspDrop::ALL {
            assert_eq!(Drop::from_esp(r).name(), r.name());
        }
    }
}

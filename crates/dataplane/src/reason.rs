//! Why the data plane dropped a packet: one counted reason per drop.
//!
//! [`DropReason`] is built from the ESP engine's list
//! ([`espgw_esp::foreach_esp_drop_reason!`]) followed by the data plane's
//! own entries below, so every ESP reason is a data-plane reason under the
//! same variant and name, in the same order, and the stats JSON has one flat
//! `drops` map. The [`DropReason::name`] strings are stable keys (stats JSON,
//! metrics, `espgw ctl`, scripts); docs/drops.md lists every reason with its
//! description, and a test below keeps it equal to this registry.
//!
//! Not named `DropReason`: that would shadow `std::ops::Drop` in modules that
//! also free packets with `drop(pkt)`.

use espgw_esp::DropReason as EspDropReason;

/// Builds [`DropReason`] from the ESP engine's entries (`esp { .. }`,
/// supplied by `foreach_esp_drop_reason!`) and the data plane's own
/// (`dataplane { .. }`); entries are `Variant => "name", "description";`.
macro_rules! drop_reason_enum {
    (
        esp { $( $(#[$esp_doc:meta])* $esp:ident => $esp_name:literal, $esp_description:literal; )* }
        dataplane { $( $(#[$doc:meta])* $own:ident => $name:literal, $description:literal; )* }
    ) => {
        /// A counted drop reason: the ESP engine's, then the data plane's.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(u8)]
        pub enum DropReason {
            $( #[doc = $esp_description] #[doc = ""] $(#[$esp_doc])* $esp, )*
            $( #[doc = $description] #[doc = ""] $(#[$doc])* $own, )*
        }

        impl DropReason {
            /// Every reason, in [`DropReason::index`] order.
            pub const ALL: &'static [DropReason] =
                &[$(DropReason::$esp,)* $(DropReason::$own,)*];
            /// Number of reasons.
            pub const COUNT: usize = DropReason::ALL.len();

            /// Stable names, by index.
            const NAMES: [&'static str; DropReason::COUNT] = [$($esp_name,)* $($name,)*];

            /// One-line descriptions, by index.
            const DESCRIPTIONS: [&'static str; DropReason::COUNT] =
                [$($esp_description,)* $($description,)*];

            /// How many of the reasons, from index 0, are the ESP engine's.
            pub const ESP_COUNT: usize = [$($esp_name,)*].len();

            /// The data-plane reason for an ESP engine drop (the same
            /// variant: the ESP reasons come first, in the same order, so
            /// this compiles to nothing).
            pub fn from_esp(r: EspDropReason) -> DropReason {
                match r {
                    $( EspDropReason::$esp => DropReason::$esp, )*
                }
            }
        }
    };
}

espgw_esp::foreach_esp_drop_reason!(drop_reason_enum {
    dataplane {
        Malformed => "malformed",
            "Too short for its Ethernet/ARP/IP headers, or inconsistent lengths";
        UnsupportedEthertype => "unsupported_ethertype",
            "An EtherType the gateway does not handle";
        Vlan => "vlan",
            "802.1Q-tagged frame (VLANs are not configured on ports)";
        NotOurMac => "not_our_mac",
            "Unicast frame for another MAC address (promiscuous ports see them)";
        Multicast => "multicast",
            "Multicast or broadcast IP packet (never routed)";
        BadChecksum => "bad_checksum",
            "IPv4 header checksum wrong";
        ArpIgnored => "arp_ignored",
            "ARP for someone else, or an ARP the gateway does not act on";
        NdIgnored => "nd_ignored",
            "ICMPv6 neighbor discovery for someone else, or malformed";
        LocalUnsupported => "local_unsupported",
            "Addressed to the gateway, but not ping, ARP/ND or ESP";
        TtlExceeded => "ttl_exceeded",
            "TTL / hop limit ran out (ICMP time exceeded sent when allowed)";
        MtuExceeded => "mtu_exceeded",
            "Too big for the path, DF set or IPv6 (ICMP fragmentation needed / packet too big sent)";
        FragmentationNeeded => "fragmentation_needed",
            "Too big for the path, IPv4 without DF, and no buffer to fragment it";
        NoRoute => "no_route",
            "No route to the destination";
        NeighborQueueFull => "neighbor_queue_full",
            "The next hop is unresolved and its wait queue is full";
        NeighborUnresolved => "neighbor_unresolved",
            "The next hop did not answer ARP/ND in time";
        PolicyDiscard => "policy_discard",
            "A discard policy matched";
        NoPolicy => "no_policy",
            "No tunnel or policy matched and the default action is discard";
        PolicyMismatch => "policy_mismatch",
            "A decrypted packet outside its SA's traffic selectors";
        UnprotectedPlaintext => "unprotected_plaintext",
            "Plaintext on an unprotected port for traffic a tunnel protects, or that no bypass policy allows";
        /// The last guard against leaks.
        PlaintextBlocked => "plaintext_blocked",
            "Plaintext that would leave through an unprotected port without a bypass policy";
        /// Dropped, never sent in the clear (RFC 4301). Usually a tunnel
        /// whose `local_ts` does not cover the gateway's protected address
        /// (`espgw check` warns about it).
        LocalNotProtected => "local_not_protected",
            "A packet the gateway made (ICMP error, echo reply) for protected traffic that no tunnel protects and that would leave through an unprotected port";
        TxFull => "tx_full",
            "The TX queue did not take the packet";
        RingFull => "ring_full",
            "Pipeline mode: the ring to a worker (or back) was full";
        ReorderFull => "reorder_full",
            "Decrypt fan-out: the SA's reorder stage had no free slot (every one held a packet not yet released)";
        ReorderLate => "reorder_late",
            "Decrypt fan-out: decrypted after its reorder stage gave up waiting for it (the bounded wait), with `spread_late = \"drop\"` (the default; with `\"send\"` such packets leave out of order, counted in the worker's `reorder_late_sent`)";
        /// VPP's handoff drops the same way ("congestion drop"): the
        /// alternative, decrypting it here, would let it overtake the
        /// SA's packets queued at the other worker.
        SaHandoffFull => "sa_handoff_full",
            "Per-CPU SA handoff (`per_cpu_handoff`): the worker the SA's groups go to had a full handoff ring, or the receiving worker no free handoff job box, while groups of the SA were still queued there";
        Shutdown => "shutdown",
            "Still waiting for its next hop when the gateway stopped";
        /// An IKE_SA_INIT flood ends here: the workers never wait for
        /// the control thread.
        PuntFull => "punt_full",
            "IKE for the gateway (UDP 500, UDP 4500 with the non-ESP marker) while the punt ring to the control thread was full";
        PuntTooBig => "punt_too_big",
            "IKE datagram larger than a punt ring slot (2048 bytes of UDP payload)";
        PuntBadChecksum => "punt_bad_checksum",
            "IKE datagram for the gateway whose UDP checksum is wrong (or zero over IPv6)";
        NatKeepalive => "nat_keepalive",
            "NAT-T keepalive (one 0xff byte on UDP 4500, RFC 3948 2.2): counted and ignored, as the RFC says";
        /// IKE `start_action = "trap"`: never sent in the clear; the
        /// worker raised an acquire (rate-limited) for the IKE driver.
        Acquire => "acquire",
            "For a trapped tunnel whose SAs are not negotiated yet (start_action = \"trap\"): dropped, and an acquire raised to IKE";
    }
});

impl DropReason {
    /// Dense index in `0..COUNT`, for counter arrays.
    pub fn index(self) -> usize {
        self as usize
    }

    /// Stable snake_case name.
    pub fn name(self) -> &'static str {
        Self::NAMES[self.index()]
    }

    /// One-line description, as docs/drops.md shows it.
    pub fn description(self) -> &'static str {
        Self::DESCRIPTIONS[self.index()]
    }

    /// True for the reasons the ESP engine gives (the first
    /// [`DropReason::ESP_COUNT`]).
    pub fn is_esp(self) -> bool {
        self.index() < Self::ESP_COUNT
    }
}

impl core::fmt::Display for DropReason {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

impl espgw_esp::Reasons for DropReason {
    const ALL: &'static [DropReason] = DropReason::ALL;
    fn index(self) -> usize {
        DropReason::index(self)
    }
}

/// One counter per [`DropReason`]: the ESP engine's counter type over this
/// list.
pub type GatewayDropCounts = espgw_esp::DropCounts<DropReason, { DropReason::COUNT }>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::fmt::Write as _;

    #[test]
    fn names_are_unique_and_indexes_dense() {
        let mut seen = std::collections::HashSet::new();
        for (i, r) in DropReason::ALL.iter().enumerate() {
            assert_eq!(r.index(), i);
            assert!(seen.insert(r.name()), "duplicate {}", r.name());
            assert!(r.name().chars().all(|c| c.is_ascii_lowercase() || c == '_'));
        }
    }

    #[test]
    fn esp_reasons_keep_their_names() {
        assert_eq!(DropReason::ESP_COUNT, EspDropReason::COUNT);
        for r in EspDropReason::ALL {
            let d = DropReason::from_esp(r);
            assert_eq!(d.name(), r.name());
            assert_eq!(d.description(), r.description());
            assert_eq!(d.index(), r.index());
            assert!(d.is_esp());
        }
        assert!(!DropReason::Malformed.is_esp());
    }

    /// The names are stable keys of the stats JSON, the metrics' `reason`
    /// label and the e2e scripts: this list is what they were when the
    /// registry was made. A reason may be added (an ESP one lands before
    /// the data plane's: indices are not stable, names are), never renamed
    /// or removed.
    #[test]
    fn stable_names_do_not_change() {
        let names: Vec<&str> = DropReason::ALL.iter().map(|r| r.name()).collect();
        for pinned in [
            "truncated",
            "not_esp",
            "unknown_spi",
            "replayed",
            "icv_mismatch",
            "bad_padding",
            "bad_inner_packet",
            "sa_expired",
            "no_room",
            "dummy",
            "ce_on_not_ect",
            "seq_not_reserved",
            "malformed",
            "unsupported_ethertype",
            "vlan",
            "not_our_mac",
            "multicast",
            "bad_checksum",
            "arp_ignored",
            "nd_ignored",
            "local_unsupported",
            "ttl_exceeded",
            "mtu_exceeded",
            "fragmentation_needed",
            "no_route",
            "neighbor_queue_full",
            "neighbor_unresolved",
            "policy_discard",
            "no_policy",
            "policy_mismatch",
            "unprotected_plaintext",
            "plaintext_blocked",
            "local_not_protected",
            "tx_full",
            "ring_full",
            "shutdown",
        ] {
            assert!(
                names.contains(&pinned),
                "drop reason {pinned:?} renamed or removed"
            );
        }
    }

    const TABLE_BEGIN: &str =
        "<!-- drop-reasons:begin (generated: see crates/dataplane/src/reason.rs) -->\n";
    const TABLE_END: &str = "<!-- drop-reasons:end -->";

    /// The reasons table of docs/drops.md, as the registry says it.
    fn docs_table() -> String {
        let mut t = String::from("| reason | layer | what it means |\n|---|---|---|\n");
        for r in DropReason::ALL {
            assert!(
                !r.description().contains('|'),
                "{} breaks the table",
                r.name()
            );
            let layer = if r.is_esp() { "ESP" } else { "data plane" };
            writeln!(t, "| `{}` | {} | {} |", r.name(), layer, r.description()).unwrap();
        }
        t
    }

    /// docs/drops.md cannot drift from the registry: its table must be
    /// exactly [`docs_table`]. On failure the expected table is printed,
    /// to paste between the markers.
    #[test]
    fn docs_list_every_reason_as_the_registry_says() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/drops.md");
        let doc = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let table = doc
            .split_once(TABLE_BEGIN)
            .and_then(|(_, rest)| rest.split_once(TABLE_END))
            .map(|(table, _)| table)
            .unwrap_or_else(|| panic!("{path}: no {TABLE_BEGIN:?} ... {TABLE_END:?} markers"));
        let expected = docs_table();
        assert!(
            table == expected,
            "{path}: the reasons table differs from the registry; it should read:\n\n{expected}"
        );
    }
}

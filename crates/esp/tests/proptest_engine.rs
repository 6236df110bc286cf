//! Property tests of the engine with the real cipher backends.

mod common;

use common::*;
use espgw_esp::{locate_esp, DropReason, Expiry, OutboundSa, Suite, Verdict};
use espgw_wire::{PacketBuf, VecBuf};
use proptest::prelude::*;
use std::collections::HashSet;

fn suite() -> impl Strategy<Value = Suite> {
    proptest::sample::select(Suite::ALL.to_vec())
}

fn inner() -> impl Strategy<Value = Vec<u8>> {
    (
        any::<bool>(),
        proptest::collection::vec(any::<u8>(), 0..1600),
    )
        .prop_map(|(v6, payload)| inner_packet(v6, &payload))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// encap then decap gives back every inner packet, for every suite and framing.
    #[test]
    fn encap_decap_round_trip(
        suite in suite(),
        esn in any::<bool>(),
        outer_v6 in any::<bool>(),
        udp in any::<bool>(),
        start in prop_oneof![Just(0u64), 0u64..1 << 40],
        packets in proptest::collection::vec(inner(), 1..8),
        seed in any::<u64>(),
    ) {
        let start = if esn { start } else { start & 0xFFFF };
        let cfg = config(suite, esn, outer_v6, udp, &mut Rng(seed | 1));
        let out = outbound(&cfg).starting_after(start);
        let inb = inbound(&peer_view(&cfg)).starting_after(start);
        let mut bufs: Vec<VecBuf> = packets.iter().map(|p| VecBuf::from_packet(p)).collect();
        let mut verdicts = vec![Verdict::default(); bufs.len()];
        prop_assert_eq!(out.encap_burst(&mut bufs, &mut verdicts, 0), bufs.len());
        prop_assert_eq!(inb.decap_burst(&mut bufs, &mut verdicts, 0), bufs.len());
        for (b, p) in bufs.iter().zip(&packets) {
            prop_assert_eq!(b.data(), &p[..]);
        }
    }

    /// Flipping any bit from the SPI to the end of the ICV makes decap drop
    /// the packet; flipping any bit at all never forwards different bytes.
    #[test]
    fn any_flipped_bit_in_esp_is_dropped(
        suite in suite(),
        esn in any::<bool>(),
        outer_v6 in any::<bool>(),
        udp in any::<bool>(),
        packet in inner(),
        bit in any::<proptest::sample::Index>(),
        seed in any::<u64>(),
    ) {
        let cfg = config(suite, esn, outer_v6, udp, &mut Rng(seed | 1));
        let out = outbound(&cfg);
        let inb = inbound(&peer_view(&cfg));
        let mut bufs = [VecBuf::from_packet(&packet)];
        let mut verdicts = [Verdict::default()];
        out.encap_burst(&mut bufs, &mut verdicts, 0);
        let esp_at = locate_esp(bufs[0].data(), cfg.encap).unwrap().offset;
        let bit = bit.index(bufs[0].len() * 8);
        bufs[0].data_mut()[bit / 8] ^= 1 << (bit % 8);
        inb.decap_burst(&mut bufs, &mut verdicts, 0);
        if bit / 8 >= esp_at {
            prop_assert!(!verdicts[0].is_forward(), "flip at byte {} forwarded", bit / 8);
        } else if verdicts[0].is_forward() {
            prop_assert_eq!(bufs[0].data(), &packet[..]);
        }
    }

    /// Near the end of the sequence space, bursts of any size never reuse a
    /// sequence number (and, for AEAD suites, never an IV = nonce), never go
    /// past 2^32-1 (2^64-1 with ESN), and the SA hard-expires instead.
    #[test]
    fn sequence_exhaustion_never_reuses_a_nonce(
        suite in suite(),
        esn in any::<bool>(),
        left in 0u64..64,
        bursts in proptest::collection::vec(0usize..20, 1..12),
    ) {
        let cfg = config(suite, esn, false, false, &mut Rng(7));
        let end = if esn { u64::MAX } else { u64::from(u32::MAX) };
        let out = OutboundSa::new(&cfg, 0).unwrap().starting_after(end - left);
        let packet = inner_packet(false, &[1, 2, 3]);
        let mut seen_seq = HashSet::new();
        let mut seen_iv = HashSet::new();
        let mut sent = 0u64;
        for n in bursts {
            let mut bufs = vec![VecBuf::from_packet(&packet); n];
            let mut verdicts = vec![Verdict::default(); n];
            sent += out.encap_burst(&mut bufs, &mut verdicts, 0) as u64;
            for (b, v) in bufs.iter().zip(&verdicts) {
                match v {
                    Verdict::Forward => {
                        let esp = &b.data()[20..];
                        let lo = u32::from_be_bytes(esp[4..8].try_into().unwrap());
                        prop_assert!(seen_seq.insert(lo), "sequence {:#x} reused", lo);
                        let iv = esp[8..8 + suite.iv_len()].to_vec();
                        if suite.is_aead() {
                            let full = u64::from_be_bytes(iv[..8].try_into().unwrap());
                            prop_assert!(full > end - left && full <= end);
                            prop_assert_eq!(full as u32, lo);
                        }
                        prop_assert!(seen_iv.insert(iv), "IV reused");
                    }
                    Verdict::Drop(r) => prop_assert_eq!(*r, DropReason::SaExpired),
                }
            }
        }
        prop_assert_eq!(sent, (seen_seq.len()) as u64);
        prop_assert!(sent <= left);
        prop_assert!(out.last_sequence() <= end);
        if out.last_sequence() == end {
            prop_assert!(out.expiry(0).contains(Expiry::SEQUENCE_EXHAUSTED));
        }
    }
}

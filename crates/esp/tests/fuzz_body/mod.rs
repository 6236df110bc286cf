//! The decap fuzz body, shared by the cargo-fuzz target (fuzz/fuzz_targets/
//! decap.rs, nightly) and the stable test tests/fuzz_decap.rs.
//!
//! Input: one selector byte, then the bytes to feed. The selector picks the
//! SA (suite, ESN, UDP encapsulation, window size, where the sequence starts)
//! and the mode:
//! * raw: the rest is an outer packet handed to decap as is (seed corpus
//!   entries are real packets encapped with [`config`]'s keys, so mutations
//!   of them reach the ICV check);
//! * sealed: the rest is an arbitrary ESP *plaintext* (payload, padding, pad
//!   length, next header) that is sealed with the real cipher first, so the
//!   fuzzer also reaches everything after the ICV check (trailer and inner
//!   packet parsing).
//!
//! Invariants checked: no panic; a forwarded packet is a sane IPv4/IPv6
//! packet no longer than the input and stats count every packet once.
#![allow(dead_code)]

use std::net::{IpAddr, Ipv4Addr};

use espgw_esp::crypto::new_cipher;
use espgw_esp::{Encap, InboundSa, Lifetimes, SaConfig, Suite, Verdict};
use espgw_wire::{PacketBuf, VecBuf};

pub const SPI: u32 = 0x0000_1234;
const SEALED_MODE: u8 = 0x80;
const NEAR_WRAP: u8 = 0x40;

/// The SA a selector byte stands for; keys are fixed so corpus packets verify.
pub fn config(selector: u8) -> SaConfig {
    let suite = Suite::ALL[usize::from(selector & 0x07) % Suite::ALL.len()];
    SaConfig {
        suite,
        spi: SPI,
        key: vec![0x11; suite.key_len()].into(),
        auth_key: vec![0x22; suite.auth_key_len()].into(),
        esn: selector & 0x08 != 0,
        replay_window: [0, 64, 4096][usize::from(selector >> 4 & 0x03) % 3],
        encap: if selector & 0x10 != 0 {
            Encap::udp_4500()
        } else {
            Encap::None
        },
        local: IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1)),
        remote: IpAddr::V4(Ipv4Addr::new(192, 0, 2, 2)),
        lifetimes: Lifetimes::default(),
    }
}

/// Where the receiver's window starts for a selector.
pub fn start(selector: u8) -> u64 {
    if selector & NEAR_WRAP != 0 {
        u64::from(u32::MAX) - 16
    } else {
        0
    }
}

/// One fuzz input.
pub fn run(data: &[u8]) {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let cfg = config(selector);
    let sa = InboundSa::new(&cfg, 0)
        .unwrap()
        .starting_after(start(selector));
    let packet = if selector & SEALED_MODE != 0 {
        sealed_packet(&cfg, start(selector) + 1, rest)
    } else {
        rest.to_vec()
    };
    // Twice in one burst: the second copy must never be forwarded when the
    // window is on (replay), and neither copy may panic.
    let mut bufs = [VecBuf::from_packet(&packet), VecBuf::from_packet(&packet)];
    let mut verdicts = [Verdict::default(); 2];
    let forwarded = sa.decap_burst(&mut bufs, &mut verdicts, 0);
    assert_eq!(
        forwarded,
        verdicts.iter().filter(|v| v.is_forward()).count()
    );
    let stats = sa.stats();
    assert_eq!(stats.packets + stats.drops.total(), 2);
    if cfg.replay_window != 0 {
        assert!(!verdicts[1].is_forward(), "replay forwarded");
    }
    for (b, v) in bufs.iter().zip(verdicts) {
        if v.is_forward() {
            let d = b.data();
            assert!(d.len() <= packet.len());
            assert!(matches!(d[0] >> 4, 4 | 6));
        }
    }
}

/// An IPv4 ESP packet (UDP-encapsulated if the SA says so) whose encrypted
/// part is `plaintext`, zero-extended to the suite's alignment, sealed with
/// the SA's keys under sequence number `seq`.
pub fn sealed_packet(cfg: &SaConfig, seq: u64, plaintext: &[u8]) -> Vec<u8> {
    let suite = cfg.suite;
    let cipher = new_cipher(suite, cfg.key.expose(), cfg.auth_key.expose()).unwrap();
    let mut body = plaintext.to_vec();
    body.resize(
        plaintext.len().max(2).next_multiple_of(suite.block_align()),
        0,
    );
    let mut esp = Vec::new();
    esp.extend_from_slice(&SPI.to_be_bytes());
    esp.extend_from_slice(&(seq as u32).to_be_bytes());
    esp.resize(8 + suite.iv_len(), 0);
    esp.extend_from_slice(&body);
    esp.resize(esp.len() + suite.icv_len(), 0);
    cipher.seal(&mut esp, seq, cfg.esn);
    let udp = matches!(cfg.encap, Encap::Udp { .. });
    let total = 20 + if udp { 8 } else { 0 } + esp.len();
    let mut p = vec![
        0x45,
        0,
        0,
        0,
        0,
        0,
        0x40,
        0,
        64,
        if udp { 17 } else { 50 },
        0,
        0,
    ];
    p[2..4].copy_from_slice(&(total as u16).to_be_bytes());
    p.extend_from_slice(&[192, 0, 2, 2, 192, 0, 2, 1]);
    if udp {
        p.extend_from_slice(&[0x11, 0x94, 0x11, 0x94]);
        p.extend_from_slice(&((8 + esp.len()) as u16).to_be_bytes());
        p.extend_from_slice(&[0, 0]);
    }
    p.extend_from_slice(&esp);
    p
}

//! Shared helpers for the integration tests: inner packets, SA configs,
//! a tiny deterministic PRNG and hex.
#![allow(dead_code)] // each test binary uses a different subset

use std::net::IpAddr;

use espgw_esp::{Encap, InboundSa, Lifetimes, OutboundSa, SaConfig, Suite};

pub const SPI: u32 = 0x0102_0304;

/// xorshift64*: reproducible keys and payloads without a rand dependency.
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next_u64() as u8).collect()
    }
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

/// An inner IPv4 (proto 253, experimental) or IPv6 packet with `payload` bytes.
pub fn inner_packet(v6: bool, payload: &[u8]) -> Vec<u8> {
    if v6 {
        let mut p = vec![0u8; 40];
        p[0] = 0x60;
        p[4..6].copy_from_slice(&(payload.len() as u16).to_be_bytes());
        p[6] = 253;
        p[7] = 64;
        p[8..24].copy_from_slice(&"fd00::1".parse::<std::net::Ipv6Addr>().unwrap().octets());
        p[24..40].copy_from_slice(&"fd00:1::1".parse::<std::net::Ipv6Addr>().unwrap().octets());
        p.extend_from_slice(payload);
        p
    } else {
        let mut p = vec![0u8; 20];
        p[0] = 0x45;
        p[2..4].copy_from_slice(&((20 + payload.len()) as u16).to_be_bytes());
        p[8] = 64;
        p[9] = 253;
        p[12..16].copy_from_slice(&[10, 0, 0, 1]);
        p[16..20].copy_from_slice(&[10, 0, 1, 1]);
        let mut sum: u32 = p
            .chunks(2)
            .map(|c| u32::from(u16::from_be_bytes([c[0], c[1]])))
            .sum();
        while sum >> 16 != 0 {
            sum = (sum & 0xFFFF) + (sum >> 16);
        }
        p[10..12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
        p.extend_from_slice(payload);
        p
    }
}

pub fn outer_addrs(v6: bool) -> (IpAddr, IpAddr) {
    if v6 {
        (
            "2001:db8::1".parse().unwrap(),
            "2001:db8::2".parse().unwrap(),
        )
    } else {
        ("192.0.2.1".parse().unwrap(), "192.0.2.2".parse().unwrap())
    }
}

/// The config of the gateway's side; `local`/`remote` as seen from it.
pub fn config(suite: Suite, esn: bool, outer_v6: bool, udp: bool, rng: &mut Rng) -> SaConfig {
    let (local, remote) = outer_addrs(outer_v6);
    SaConfig {
        suite,
        spi: SPI,
        key: rng.bytes(suite.key_len()).into(),
        auth_key: rng.bytes(suite.auth_key_len()).into(),
        esn,
        replay_window: 128,
        encap: if udp { Encap::udp_4500() } else { Encap::None },
        local,
        remote,
        lifetimes: Lifetimes::default(),
    }
}

/// The same SA as the peer configures it (addresses swapped).
pub fn peer_view(cfg: &SaConfig) -> SaConfig {
    let mut peer = cfg.clone();
    std::mem::swap(&mut peer.local, &mut peer.remote);
    peer
}

pub fn outbound(cfg: &SaConfig) -> OutboundSa {
    OutboundSa::new(cfg, 0).expect("outbound SA")
}

pub fn inbound(cfg: &SaConfig) -> InboundSa {
    InboundSa::new(cfg, 0).expect("inbound SA")
}

/// The AEAD suites: those whose backend the process-wide cipher settings
/// (`set_max_simd_width`, `set_ipsec_mb_allowed`) change.
pub const AEAD: [Suite; 3] = [
    Suite::Aes128Gcm16,
    Suite::Aes256Gcm16,
    Suite::Chacha20Poly1305,
];

/// Payload lengths on both sides of espgw-aesgcm's splits (its 512-bit
/// window, 112 B, ring's 384 B).
pub const SEAL_LENS: [usize; 6] = [49, 64, 100, 112, 400, 1420];

/// Every [`AEAD`] suite sealing one ESP packet of each of [`SEAL_LENS`]
/// with a cipher `new_cipher` builds now: what a change of backend must
/// leave byte for byte the same.
pub fn sealed_samples() -> Vec<Vec<u8>> {
    let sealed = |suite: Suite, len: usize| {
        let key: Vec<u8> = (0..suite.key_len() as u8).collect();
        let cipher = espgw_esp::crypto::new_cipher(suite, &key, &[]).unwrap();
        let mut esp = vec![0u8; 16 + len + 16];
        esp[..4].copy_from_slice(&SPI.to_be_bytes());
        for (i, b) in esp[16..16 + len].iter_mut().enumerate() {
            *b = (i * 7) as u8;
        }
        cipher.seal(&mut esp, 42, true);
        esp
    };
    AEAD.iter()
        .flat_map(|&s| SEAL_LENS.iter().map(move |&l| sealed(s, l)))
        .collect()
}

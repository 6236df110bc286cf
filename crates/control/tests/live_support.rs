//! Shared helpers of the live_* tests (included with `#[path]`; as a test
//! target of its own it holds no tests).
#![allow(dead_code)]

use std::net::IpAddr;
use std::path::Path;
use std::sync::{Mutex, OnceLock};

use espgw_control::config::{Config, HostFacts, SaKeys, SecretBytes};
use espgw_control::fixtures::GatewayToml;
use espgw_control::{parse_str, tables::FlowKey};
use espgw_esp::Encap;
use espgw_wire::{PacketBuf, VecBuf};

pub const KEY_A: &str = "0x1111111111111111111111111111111122222222";
pub const KEY_B: &str = "0x3333333333333333333333333333333344444444";

/// A config for gateway `me` (1 or 2) of the demo pair
/// ([`GatewayToml::demo`]): gateway 1 is 192.0.2.1 protecting
/// 10.1.0.0/24, gateway 2 is 192.0.2.2 protecting 10.2.0.0/24; one tunnel
/// "t" between them, keyed with [`KEY_A`] (SPI 0xa001) and [`KEY_B`]
/// (0xb001). `lifetime` is a line of the tunnel; `extra` is appended.
pub fn gateway_toml(me: u8, lifetime: &str, default_action: &str, extra: &str) -> String {
    let (out_key, in_key) = if me == 1 {
        (KEY_A, KEY_B)
    } else {
        (KEY_B, KEY_A)
    };
    GatewayToml::demo(me)
        .default_action(default_action)
        .map_tunnels(|t| t.replay_window(64).line(lifetime).keys(out_key, in_key))
        .extra(extra)
        .render()
}

pub fn config(text: String) -> Config {
    let host = HostFacts::assumed(2);
    match parse_str(Path::new("test.toml"), text, &host) {
        Ok((c, _)) => c,
        Err(d) => panic!(
            "{}",
            d.iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join("\n")
        ),
    }
}

pub fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// 20 bytes of AES-128-GCM keying material (key + salt) derived from `n`:
/// every byte of `n` shows in every fourth key byte, so two `n` never give
/// one key (a gateway refuses a key used twice).
pub fn key_hex(n: u32) -> String {
    let n = n.to_be_bytes();
    let mut s = String::new();
    for i in 0..20usize {
        s.push_str(&format!(
            "{:02x}",
            n[i % 4] ^ (i as u8).wrapping_mul(7) ^ 0x5a
        ));
    }
    s
}

pub fn sa_keys(spi: u32, n: u32) -> SaKeys {
    SaKeys {
        spi,
        key: SecretBytes::from_hex(&key_hex(n)).unwrap(),
        auth_key: None,
    }
}

/// An inner IPv4/UDP packet from `src` to `dst` whose payload starts
/// with `counter`, in a buffer with room for ESP.
pub fn inner_packet(src: [u8; 4], dst: [u8; 4], counter: u64) -> VecBuf {
    let payload = 32;
    let mut p = vec![0u8; 20 + 8 + payload];
    p[0] = 0x45;
    let total = p.len() as u16;
    p[2..4].copy_from_slice(&total.to_be_bytes());
    p[8] = 64;
    p[9] = 17;
    p[12..16].copy_from_slice(&src);
    p[16..20].copy_from_slice(&dst);
    p[20..22].copy_from_slice(&4000u16.to_be_bytes());
    p[22..24].copy_from_slice(&5000u16.to_be_bytes());
    p[24..26].copy_from_slice(&((8 + payload) as u16).to_be_bytes());
    p[28..36].copy_from_slice(&counter.to_be_bytes());
    VecBuf::with_room(&p, 128, 64)
}

/// The counter an inner packet made by [`inner_packet`] carries.
pub fn counter_of(pkt: &VecBuf) -> Option<u64> {
    let d = pkt.data();
    d.get(28..36)
        .map(|b| u64::from_be_bytes(b.try_into().unwrap()))
}

/// The SPI and outer destination of an ESP packet (plain ESP over IPv4).
pub fn esp_spi_dst(pkt: &VecBuf) -> Option<(u32, IpAddr)> {
    let loc = espgw_esp::locate_esp(pkt.data(), Encap::None).ok()?;
    let d = pkt.data();
    let dst = IpAddr::from(<[u8; 4]>::try_from(d.get(16..20)?).ok()?);
    Some((loc.spi, dst))
}

pub fn flow(src: &str, dst: &str) -> FlowKey {
    FlowKey {
        src: ip(src),
        dst: ip(dst),
        proto: 17,
        sport: 4000,
        dport: 5000,
    }
}

/// Every tracing event of the test binary, rendered with all its fields.
pub fn logs() -> &'static Mutex<Vec<String>> {
    static LOGS: OnceLock<Mutex<Vec<String>>> = OnceLock::new();
    LOGS.get_or_init(|| {
        let _ = tracing::subscriber::set_global_default(Recorder);
        Mutex::new(Vec::new())
    })
}

struct Recorder;

struct Line(String);

impl tracing::field::Visit for Line {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0.push_str(&format!(" {}={:?}", field.name(), value));
    }
}

impl tracing::Subscriber for Recorder {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        let mut line = Line(format!("{}", event.metadata().level()));
        event.record(&mut line);
        if let Ok(mut l) = logs().lock() {
            l.push(line.0);
        }
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

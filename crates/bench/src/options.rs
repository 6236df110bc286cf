//! What to measure: suites, packet sizes, directions, workers, duration.
//! Parsed from the `espgw bench` command-line strings (the CLI contract).

use std::path::PathBuf;
use std::str::FromStr;

use espgw_control::config::SpreadLate;
use espgw_esp::crypto::provider::SimdWidth;
use espgw_esp::Suite;

use crate::flows::{DEFAULT_FLOWS, MAX_FLOWS};
use crate::imix;

/// The standard sizes when `--sizes` is not given (inner IP packet bytes);
/// IMIX comes after them.
pub const DEFAULT_SIZES: [usize; 7] = [64, 128, 256, 512, 1024, 1420, 1500];

/// Smallest inner packet the generator builds: IPv4 (20) + UDP (8) headers
/// plus room for a payload pattern the sink can check.
pub const MIN_SIZE: usize = 46;
/// Smallest inner packet with `--inner ipv6`: IPv6 (40) + UDP (8) headers
/// and 16 bytes of payload pattern.
pub const MIN_SIZE_V6: usize = 64;
/// Largest inner packet: it must fit a 2 KiB mbuf after ESP and Ethernet
/// are added (the bench gateway runs with MTU 9000, but the mbufs are the
/// standard 2048-byte data room).
pub const MAX_SIZE: usize = 1900;

/// Packet size of a case: one fixed inner IP packet size or the IMIX mix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Size {
    Fixed(usize),
    Imix,
}

impl Size {
    /// Inner IP packet sizes in the order the generator sends them
    /// (repeated cyclically).
    pub fn pattern(self) -> Vec<usize> {
        match self {
            Size::Fixed(n) => vec![n],
            Size::Imix => imix::PATTERN.to_vec(),
        }
    }

    /// The label in tables and reports ("64", "imix").
    pub fn label(self) -> String {
        match self {
            Size::Fixed(n) => n.to_string(),
            Size::Imix => "imix".into(),
        }
    }

    /// Mean inner packet size (for the x axis of the charts).
    pub fn mean(self) -> f64 {
        let p = self.pattern();
        p.iter().sum::<usize>() as f64 / p.len() as f64
    }
}

/// Which way packets go through the gateway.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Protected side to unprotected: plaintext in, ESP out.
    Encrypt,
    /// Unprotected side to protected: ESP in, plaintext out.
    Decrypt,
}

impl Direction {
    pub fn name(self) -> &'static str {
        match self {
            Direction::Encrypt => "encrypt",
            Direction::Decrypt => "decrypt",
        }
    }
}

/// How the tunnels' ESP travels between the gateways (`--outer`): the
/// tunnel's `encap` and the family of its `local`/`remote` addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Outer {
    /// ESP over IPv4 (protocol 50): what the bench always measured.
    #[default]
    Esp4,
    /// ESP in UDP 4500 over IPv4 (RFC 3948, `encap = "udp"`).
    Udp4,
    /// ESP over IPv6 (next header 50).
    Esp6,
    /// ESP in UDP 4500 over IPv6 (UDP checksum computed, RFC 8200 §8.1).
    Udp6,
}

impl Outer {
    pub const ALL: [Outer; 4] = [Outer::Esp4, Outer::Udp4, Outer::Esp6, Outer::Udp6];

    /// The `--outer` value and the report's label.
    pub fn name(self) -> &'static str {
        match self {
            Outer::Esp4 => "esp4",
            Outer::Udp4 => "udp4",
            Outer::Esp6 => "esp6",
            Outer::Udp6 => "udp6",
        }
    }

    /// In words, for the table header.
    pub fn describe(self) -> &'static str {
        match self {
            Outer::Esp4 => "ESP over IPv4 (protocol 50)",
            Outer::Udp4 => "ESP in UDP 4500 over IPv4 (RFC 3948, UDP checksum 0)",
            Outer::Esp6 => "ESP over IPv6 (next header 50)",
            Outer::Udp6 => "ESP in UDP 4500 over IPv6 (RFC 3948, UDP checksum computed)",
        }
    }

    pub fn ipv6(self) -> bool {
        matches!(self, Outer::Esp6 | Outer::Udp6)
    }

    pub fn udp(self) -> bool {
        matches!(self, Outer::Udp4 | Outer::Udp6)
    }

    /// Outer header bytes before the SPI: IPv4 20 or IPv6 40, plus 8 of UDP.
    pub fn header_len(self) -> usize {
        let ip = if self.ipv6() { 40 } else { 20 };
        ip + if self.udp() { 8 } else { 0 }
    }
}

/// The family of the inner packets the hosts send through the tunnels
/// (`--inner`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Inner {
    /// IPv4 + UDP (the default).
    Ipv4,
    /// IPv6 + UDP: the hosts' addresses are their IPv4 ones mapped into
    /// fd00:ee::/96 ([`crate::packets::v6_of`]), the tunnels' selectors
    /// too; the UDP checksum computed (RFC 8200 section 8.1).
    Ipv6,
}

impl Inner {
    pub const ALL: [Inner; 2] = [Inner::Ipv4, Inner::Ipv6];

    /// The `--inner` value and the report's label.
    pub fn name(self) -> &'static str {
        match self {
            Inner::Ipv4 => "ipv4",
            Inner::Ipv6 => "ipv6",
        }
    }

    pub fn ipv6(self) -> bool {
        self == Inner::Ipv6
    }

    /// The smallest `--sizes` value: the IP and UDP headers and room for
    /// the payload pattern (16 bytes over IPv6, so that 64 stays a size).
    pub fn min_size(self) -> usize {
        match self {
            Inner::Ipv4 => MIN_SIZE,
            Inner::Ipv6 => MIN_SIZE_V6,
        }
    }
}

/// `--inner`: ipv4 or ipv6.
pub fn parse_inner(s: &str) -> Result<Inner, OptionError> {
    Inner::ALL
        .into_iter()
        .find(|i| i.name() == s)
        .ok_or_else(|| OptionError(format!("--inner: {s:?} (ipv4 or ipv6)")))
}

/// `--outer`: esp4, udp4, esp6 or udp6.
pub fn parse_outer(s: &str) -> Result<Outer, OptionError> {
    Outer::ALL
        .into_iter()
        .find(|o| o.name() == s)
        .ok_or_else(|| OptionError(format!("--outer: {s:?} (esp4, udp4, esp6 or udp6)")))
}

/// `--spread-wait-us`: within `[dataplane] spread_wait_us`'s range.
pub fn check_spread_wait_us(us: u32) -> Result<u32, OptionError> {
    use espgw_control::config::{MAX_SPREAD_WAIT_US, MIN_SPREAD_WAIT_US};
    if (MIN_SPREAD_WAIT_US..=MAX_SPREAD_WAIT_US).contains(&us) {
        Ok(us)
    } else {
        Err(OptionError(format!(
            "--spread-wait-us {us}: from {MIN_SPREAD_WAIT_US} to {MAX_SPREAD_WAIT_US} (as `[dataplane] spread_wait_us`)"
        )))
    }
}

/// `--spread-recheck-ms`: 0 (no check) or within `[dataplane]
/// spread_recheck_ms`'s range.
pub fn check_spread_recheck_ms(ms: u32) -> Result<u32, OptionError> {
    espgw_control::config::check_spread_recheck_ms(i128::from(ms)).map_err(|e| {
        OptionError(format!(
            "--spread-recheck-ms: {e} (as `[dataplane] spread_recheck_ms`)"
        ))
    })
}

/// `--spread-parts`: 1 to 256 parts.
pub fn check_spread_parts(n: usize) -> Result<usize, OptionError> {
    if (1..=256).contains(&n) {
        Ok(n)
    } else {
        Err(OptionError(format!("--spread-parts {n}: from 1 to 256")))
    }
}

/// `--spread-late`: "drop" or "send", as `[dataplane] spread_late`.
pub fn parse_spread_late(s: &str) -> Result<SpreadLate, OptionError> {
    SpreadLate::ALL
        .into_iter()
        .find(|l| l.name() == s)
        .ok_or_else(|| OptionError(format!("--spread-late: {s:?} (drop or send)")))
}

/// `--max-simd-bitwidth`: 256 or 512, as `[dataplane] max_simd_bitwidth`.
pub fn parse_simd_width(bits: u16) -> Result<SimdWidth, OptionError> {
    SimdWidth::from_bits(bits).ok_or_else(|| {
        OptionError(format!(
            "--max-simd-bitwidth: {bits} (256: no AVX-512 code, or 512: whatever the CPU has)"
        ))
    })
}

/// Everything `espgw bench` was asked for.
#[derive(Debug, Clone)]
pub struct Options {
    pub suites: Vec<Suite>,
    pub sizes: Vec<Size>,
    pub directions: Vec<Direction>,
    /// Workers of the scaled run; 1 means no scaling run.
    pub workers: usize,
    /// Tunnels the workers carry: `None`, one per worker (each worker its
    /// own SA pair); `Some(k)`, worker `w` carries tunnel `w % k`, so with
    /// `Some(1)` every worker shares one SA pair (docs/multicore.md).
    pub tunnels: Option<usize>,
    /// Measuring time per layer of each case.
    pub seconds: f64,
    /// Distinct flows (UDP 5-tuples) each worker's packets cycle over.
    pub flows: usize,
    /// Admit the SAs through a state directory and run the sequence keeper
    /// (persisted reservations, as `espgw run` does).
    pub persist_seq: bool,
    /// The decrypt fan-out between the workers (the worker layer;
    /// docs/multicore.md): the first `tunnels` workers each receive their
    /// tunnel's ESP (worker 0 alone with one tunnel) and spread its
    /// decryption; the others only decrypt parts.
    pub spread_decrypt: bool,
    /// With the fan-out: what the receiving worker does with a part back
    /// after its reorder stage gave up on it (`[dataplane] spread_late`).
    pub spread_late: SpreadLate,
    /// With the fan-out: how long the receiving worker waits for a part
    /// (`[dataplane] spread_wait_us`), in microseconds.
    pub spread_wait_us: u32,
    /// The most parts the fan-out cuts a group into (`--spread-parts`;
    /// None: the data plane's default, no limit).
    pub spread_parts: Option<usize>,
    /// With the fan-out: how often each receiving worker checks whether
    /// it pays (`--spread-recheck-ms`, `[dataplane] spread_recheck_ms`),
    /// in ms of its loop time; 0 (the default here): never, so that the
    /// rows measure the fan-out itself.
    pub spread_recheck_ms: u32,
    /// RFC 9611 per-CPU SAs: one tunnel (implies `tunnels = Some(1)`)
    /// whose every worker encrypts with its own outbound SA and receives
    /// the peer's ESP on its own inbound SA, as `per_cpu_sas` negotiates
    /// them (docs/multicore.md). With `spread_decrypt` (decrypt rows of the
    /// worker layer): worker 0 receives every SA's ESP and hands each SA's
    /// groups to the SA's worker (the per-CPU SA handoff).
    pub per_cpu_sas: bool,
    /// The tunnels' outer form (ESP or ESP in UDP, over IPv4 or IPv6).
    pub outer: Outer,
    /// The inner packets' family.
    pub inner: Inner,
    /// The ciphers' widest vector registers (`--max-simd-bitwidth`):
    /// 256 measures, on a CPU with AVX-512, the code an AVX2-only CPU runs.
    pub simd_width: SimdWidth,
    /// The generator writes packets with streaming stores
    /// (`--streaming-rx`): they start in memory, as after a NIC's DMA, not
    /// in the receiving worker's cache.
    pub streaming_rx: bool,
    /// The ciphers use no intel-ipsec-mb (`--no-ipsec-mb`): ring for
    /// AES-GCM from the split on and for ChaCha20-Poly1305.
    pub no_ipsec_mb: bool,
    /// The bench gateway's unprotected port computes UDP checksums on
    /// transmit (`--tx-checksum-offload`): ESP in UDP over IPv6 gets only
    /// its seed from the engine, the sink completes it as the NIC would.
    pub tx_checksum_offload: bool,
    pub json: Option<PathBuf>,
    pub svg: Option<PathBuf>,
    /// The command line as typed, for the JSON report.
    pub command: String,
    /// Print progress on stderr.
    pub progress: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            suites: Suite::ALL.to_vec(),
            sizes: DEFAULT_SIZES
                .iter()
                .map(|&n| Size::Fixed(n))
                .chain([Size::Imix])
                .collect(),
            directions: vec![Direction::Encrypt, Direction::Decrypt],
            workers: 1,
            tunnels: None,
            seconds: 0.5,
            flows: DEFAULT_FLOWS,
            persist_seq: false,
            spread_decrypt: false,
            spread_late: SpreadLate::Drop,
            spread_wait_us: espgw_control::config::DEFAULT_SPREAD_WAIT_US,
            spread_parts: None,
            spread_recheck_ms: 0,
            per_cpu_sas: false,
            outer: Outer::Esp4,
            inner: Inner::Ipv4,
            simd_width: SimdWidth::Bits512,
            streaming_rx: false,
            no_ipsec_mb: false,
            tx_checksum_offload: false,
            json: None,
            svg: None,
            command: String::new(),
            progress: true,
        }
    }
}

impl Options {
    /// Every fixed size at least the smallest packet of `inner`'s family
    /// (the CLI checks it, and `runner::run` again for options built in
    /// code).
    pub fn check_sizes(&self) -> Result<(), OptionError> {
        let min = self.inner.min_size();
        match self.sizes.iter().find_map(|s| match s {
            Size::Fixed(n) if *n < min => Some(*n),
            _ => None,
        }) {
            Some(n) => Err(OptionError(format!(
                "--sizes: {n} is below {min}, the smallest --inner {} packet",
                self.inner.name()
            ))),
            None => Ok(()),
        }
    }
}

/// A command-line value that could not be understood.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OptionError(pub String);

impl std::fmt::Display for OptionError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for OptionError {}

/// `--suite`: comma-separated suite names, or "all".
pub fn parse_suites(list: &str) -> Result<Vec<Suite>, OptionError> {
    if list.trim() == "all" {
        return Ok(Suite::ALL.to_vec());
    }
    let mut out = Vec::new();
    for name in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let suite = Suite::from_str(name).map_err(|_| {
            let known: Vec<&str> = Suite::ALL.iter().map(|s| s.name()).collect();
            OptionError(format!(
                "--suite: unknown suite {name:?} (known: {})",
                known.join(", ")
            ))
        })?;
        if !out.contains(&suite) {
            out.push(suite);
        }
    }
    if out.is_empty() {
        return Err(OptionError("--suite: empty list".into()));
    }
    Ok(out)
}

/// `--sizes`: comma-separated inner IP packet sizes and/or "imix".
pub fn parse_sizes(list: &str) -> Result<Vec<Size>, OptionError> {
    let mut out = Vec::new();
    for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let size = if item.eq_ignore_ascii_case("imix") {
            Size::Imix
        } else {
            let n: usize = item.parse().map_err(|_| {
                OptionError(format!(
                    "--sizes: {item:?} is neither a number nor \"imix\""
                ))
            })?;
            if !(MIN_SIZE..=MAX_SIZE).contains(&n) {
                return Err(OptionError(format!(
                    "--sizes: {n} is outside {MIN_SIZE}..={MAX_SIZE} (inner IP packet bytes)"
                )));
            }
            Size::Fixed(n)
        };
        if !out.contains(&size) {
            out.push(size);
        }
    }
    if out.is_empty() {
        return Err(OptionError("--sizes: empty list".into()));
    }
    Ok(out)
}

/// `--direction`: encrypt, decrypt or both.
pub fn parse_direction(s: &str) -> Result<Vec<Direction>, OptionError> {
    match s {
        "encrypt" => Ok(vec![Direction::Encrypt]),
        "decrypt" => Ok(vec![Direction::Decrypt]),
        "both" => Ok(vec![Direction::Encrypt, Direction::Decrypt]),
        _ => Err(OptionError(format!(
            "--direction: {s:?} (encrypt, decrypt or both)"
        ))),
    }
}

/// `--seconds`: positive and finite.
pub fn check_seconds(s: f64) -> Result<f64, OptionError> {
    if s.is_finite() && s > 0.0 && s <= 3600.0 {
        Ok(s)
    } else {
        Err(OptionError(format!("--seconds: {s} (0 < S <= 3600)")))
    }
}

/// `--flows`: 1..=[`MAX_FLOWS`].
pub fn check_flows(n: usize) -> Result<usize, OptionError> {
    if (1..=MAX_FLOWS).contains(&n) {
        Ok(n)
    } else {
        Err(OptionError(format!("--flows: {n} (1..={MAX_FLOWS})")))
    }
}

/// `--tunnels`: at least one.
pub fn check_tunnels(n: usize) -> Result<usize, OptionError> {
    if n >= 1 {
        Ok(n)
    } else {
        Err(OptionError("--tunnels: at least 1".into()))
    }
}

/// Tunnels a case with `workers` workers carries: one per worker unless
/// `--tunnels` says fewer.
pub fn tunnels_for(tunnels: Option<usize>, workers: usize) -> usize {
    tunnels.map_or(workers, |t| t.min(workers)).max(1)
}

/// `--workers`: at least one.
pub fn check_workers(n: usize) -> Result<usize, OptionError> {
    if n >= 1 {
        Ok(n)
    } else {
        Err(OptionError("--workers: at least 1".into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suites_parse_in_order_without_duplicates() {
        let s = parse_suites("aes256gcm16, aes128gcm16,aes256gcm16").unwrap();
        assert_eq!(s, vec![Suite::Aes256Gcm16, Suite::Aes128Gcm16]);
        assert_eq!(parse_suites("all").unwrap().len(), 6);
        assert!(parse_suites("rot13").unwrap_err().0.contains("rot13"));
        assert!(parse_suites(",").is_err());
    }

    #[test]
    fn sizes_accept_numbers_and_imix_and_reject_the_rest() {
        assert_eq!(
            parse_sizes("64,1420,imix").unwrap(),
            vec![Size::Fixed(64), Size::Fixed(1420), Size::Imix]
        );
        assert_eq!(parse_sizes("IMIX").unwrap(), vec![Size::Imix]);
        assert!(parse_sizes("20").is_err(), "below IPv4+UDP+pattern");
        assert!(parse_sizes("9000").is_err(), "above the mbuf");
        assert!(parse_sizes("big").is_err());
    }

    #[test]
    fn direction_both_means_encrypt_then_decrypt() {
        assert_eq!(
            parse_direction("both").unwrap(),
            vec![Direction::Encrypt, Direction::Decrypt]
        );
        assert!(parse_direction("sideways").is_err());
    }

    #[test]
    fn seconds_and_workers_are_bounded() {
        assert!(check_seconds(0.0).is_err());
        assert!(check_seconds(f64::NAN).is_err());
        assert_eq!(check_seconds(0.5).unwrap(), 0.5);
        assert!(check_workers(0).is_err());
        assert!(check_tunnels(0).is_err());
        assert_eq!(
            [
                tunnels_for(None, 4),
                tunnels_for(Some(1), 4),
                tunnels_for(Some(9), 2)
            ],
            [4, 1, 2]
        );
        assert!(check_flows(0).is_err());
        assert!(check_flows(MAX_FLOWS + 1).is_err());
        assert_eq!(check_flows(1), Ok(1));
        assert_eq!(Options::default().flows, 64);
    }

    #[test]
    fn outer_parses_the_four_forms_and_nothing_else() {
        for o in Outer::ALL {
            assert_eq!(parse_outer(o.name()), Ok(o));
        }
        assert_eq!(Options::default().outer, Outer::Esp4);
        assert_eq!(
            Outer::ALL.map(Outer::header_len),
            [20, 28, 40, 48],
            "IPv4, +UDP, IPv6, +UDP"
        );
        assert!(parse_outer("esp").is_err());
        assert!(parse_outer("ESP4").is_err());
    }

    #[test]
    fn imix_label_and_mean() {
        assert_eq!(Size::Imix.label(), "imix");
        let mean = (7.0 * 64.0 + 4.0 * 570.0 + 1500.0) / 12.0;
        assert!((Size::Imix.mean() - mean).abs() < 1e-9);
        assert_eq!(Size::Fixed(64).pattern(), vec![64]);
    }
}

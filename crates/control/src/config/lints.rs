//! Warnings about configs that are valid but do not do what their author
//! probably meant.
//!
//! **A tunnel's `local_ts` does not cover the gateway's protected address.**
//! ICMP errors the gateway sends about a tunnel's traffic (time exceeded,
//! fragmentation needed / packet too big) and its echo replies come from the
//! first address (of the packet's family) of the protected port that faces
//! the tunnel's protected networks. The data plane sends them through the
//! SPD like any other packet (RFC 4301): when no tunnel protects that
//! source, they are dropped (`local_not_protected`), never sent in the
//! clear. The config is still valid, but traceroute and path MTU discovery
//! through the tunnel then get no answer from this gateway.

use super::connection::Connection;
use super::model::{Dataplane, Port, Route, Side, Tunnel};
use super::net::Prefix;
use super::reader::Ctx;
use super::sections::dataplane::DEFAULT_SPREAD_WAIT_US;
use super::sections::Located;
use super::HostFacts;
use crate::tables::{Family, IpPrefix};

/// Warns at `tunnel[i].local_ts` for every protected port facing the
/// tunnel's `local_ts` (on-link or by a route) whose source address for
/// ICMP is outside it.
pub(crate) fn warn_local_ts_without_own_address(
    ctx: &mut Ctx,
    ports: &[Port],
    routes: &[Route],
    tunnels: &[Located<Tunnel>],
) {
    for t in tunnels {
        let ts = &t.item.local_ts;
        for (i, port) in ports.iter().enumerate() {
            if port.side != Side::Protected || !faces(i, port, routes, ts) {
                continue;
            }
            for family in [Family::V4, Family::V6] {
                if !ts.iter().any(|p| p.family() == family) {
                    continue;
                }
                // The data plane's ICMP source: the port's first address
                // of the family (PortInfo::first_v4 / first_v6).
                let Some(src) = port
                    .addresses
                    .iter()
                    .map(|a| a.addr)
                    .find(|a| Family::of(*a) == family)
                else {
                    continue;
                };
                if ts.iter().any(|p| p.contains(src)) {
                    continue;
                }
                let host = IpPrefix::host(src);
                ctx.warn(
                    &format!("{}.local_ts", t.path),
                    format!(
                        "tunnel {:?}: local_ts does not cover {src}, the address of protected port \
                         {:?} that ICMP errors (time exceeded, fragmentation needed / packet too \
                         big) and echo replies about this tunnel's traffic come from; no tunnel \
                         protects them, so they are dropped (local_not_protected), never sent in \
                         the clear, and traceroute and path MTU discovery through the tunnel get \
                         no answer from this gateway. Add {host} to local_ts (and to the peer's \
                         remote_ts) to send them through the tunnel",
                        t.item.name, port.name
                    ),
                );
            }
        }
    }
}

/// True when port `index` leads to some of `ts`: one of its subnets or
/// one of the routes through it overlaps a prefix of `ts`.
fn faces(index: usize, port: &Port, routes: &[Route], ts: &[Prefix]) -> bool {
    ts.iter().any(|p| {
        port.addresses.iter().any(|a| a.subnet().overlaps(p))
            || routes
                .iter()
                .any(|r| r.port.0 == index && r.dest.overlaps(p))
    })
}

/// Job boxes the decrypt fan-out gives a receiving worker per worker of
/// the run and per 100 µs (the default) of its bound.
pub const FAN_OUT_JOBS_PER_WORKER: usize = 16;

/// The job boxes (parts of up to a burst) one receiving worker of the
/// decrypt fan-out may have out with `workers` workers and a bound of
/// `wait_us` (`spread_wait_us`): the data plane's `SpreadRings` are built
/// with this many, and the lints below and the bench size by it. A longer
/// bound needs more, or the boxes run out first (the worker keeps cutting
/// parts while one waits, and with every box in use gives up the oldest).
pub fn fan_out_jobs(workers: usize, wait_us: u32) -> usize {
    let per_100us = wait_us.div_ceil(DEFAULT_SPREAD_WAIT_US).max(1) as usize;
    FAN_OUT_JOBS_PER_WORKER
        .saturating_mul(workers.max(1))
        .saturating_mul(per_100us)
}

/// The packets the decrypt fan-out's receiving worker may have out for
/// one SA with `dp` ([`fan_out_jobs`] x a burst), capped at the largest
/// replay window; 0 when the fan-out does not run.
pub fn fan_out_reach(dp: &Dataplane) -> u64 {
    if !dp.spreads_decrypt() {
        return 0;
    }
    let packets = fan_out_jobs(dp.workers, dp.spread_wait_us).saturating_mul(usize::from(dp.burst));
    (packets as u64).min(u64::from(espgw_esp::MAX_REPLAY_WINDOW))
}

/// How [`fan_out_reach`] comes about, for the warnings that name it.
pub(crate) fn reach_explained(dp: &Dataplane, reach: u64) -> String {
    format!(
        "{reach} packets: {FAN_OUT_JOBS_PER_WORKER} job boxes x {} workers x burst {} per 100 us \
         of spread_wait_us",
        dp.workers, dp.burst
    )
}

/// Warns at every tunnel's and IKE child's `replay_window` (anti-replay
/// on) narrower than [`fan_out_reach`].
pub(crate) fn warn_replay_window_under_fan_out(
    ctx: &mut Ctx,
    dp: &Dataplane,
    tunnels: &[Located<Tunnel>],
    connections: &[Located<Connection>],
) {
    let reach = fan_out_reach(dp);
    if reach == 0 {
        return;
    }
    let windows = tunnels
        .iter()
        .map(|t| (t.path.clone(), t.item.replay_window))
        .chain(connections.iter().flat_map(|c| {
            c.item
                .children
                .iter()
                .enumerate()
                .map(|(i, ch)| (format!("{}.child[{i}]", c.path), ch.replay_window))
        }));
    for (path, window) in windows {
        if window == 0 || u64::from(window) >= reach {
            continue;
        }
        ctx.warn(
            &format!("{path}.replay_window"),
            format!(
                "{window} is narrower than what the decrypt fan-out may have out for one SA \
                 ({}): a part another worker decrypts late can be dropped as a replay \
                 (replayed); {reach} or more",
                reach_explained(dp, reach)
            ),
        );
    }
}

/// With the decrypt fan-out, a part whose worker is held off its CPU
/// longer than `spread_wait_us` comes back late (dropped, or sent out of
/// order): on cores the kernel also schedules other tasks and its own
/// threads on, that happens every few seconds (docs/multicore.md, "Who
/// makes parts late"). Warned when this host's isolated CPUs are known and
/// the workers are not pinned (`lcores`) or not all on isolated ones.
pub(crate) fn warn_fan_out_on_shared_cores(ctx: &mut Ctx, dp: &Dataplane, host: &HostFacts) {
    let Some(isolated) = &host.isolated_cpus else {
        return;
    };
    if dp.workers < 2 || dp.spread_when().is_none() {
        return;
    }
    let remedy = format!(
        "another task or kernel thread holding a worker's CPU longer than spread_wait_us ({} us) \
         makes that worker's fan-out parts late; isolate the workers' cores (isolcpus=, \
         nohz_full=, rcu_nocbs= on the kernel command line; docs/config.md)",
        dp.spread_wait_us
    );
    match &dp.lcores {
        None => ctx.warn(
            "dataplane.spread_decrypt",
            format!("the workers are not pinned to cores (`lcores`): {remedy}"),
        ),
        Some(lcores) => {
            let shared: Vec<String> = lcores
                .iter()
                .take(dp.workers)
                .filter(|c| !isolated.contains(c))
                .map(u32::to_string)
                .collect();
            if !shared.is_empty() {
                ctx.warn(
                    "dataplane.lcores",
                    format!(
                        "with spread_decrypt, worker cores {} are not isolated from the scheduler \
                         on this host: {remedy}",
                        shared.join(",")
                    ),
                );
            }
        }
    }
}

/// Workers from which the default 512-bit AES-GCM on an Intel CPU with
/// AVX-512 is worth comparing with 256-bit: on a 16-core Xeon guest
/// (session 18, docs/crypto.md "Wide vectors on many Intel cores"), 4
/// workers ran 1420-byte packets faster with 512-bit vectors, 8 about as
/// fast with either, 16 far faster with 256-bit.
pub const WIDE_VECTOR_WORKERS: usize = 8;

/// Warns at `dataplane.workers` when this host is an Intel CPU with
/// AVX-512, the workers are [`WIDE_VECTOR_WORKERS`] or more and the config
/// leaves `max_simd_bitwidth` at its default (512): which width is faster
/// there depends on the packet sizes, so the operator measures and says;
/// setting the key either way silences it.
pub(crate) fn warn_wide_vectors_on_many_intel_cores(
    ctx: &mut Ctx,
    dp: &Dataplane,
    host: &HostFacts,
) {
    if !host.intel_avx512
        || dp.workers < WIDE_VECTOR_WORKERS
        || ctx.has_key("dataplane.max_simd_bitwidth")
    {
        return;
    }
    ctx.warn(
        "dataplane.workers",
        format!(
            "{} workers on an Intel CPU with AVX-512: with {WIDE_VECTOR_WORKERS} or more cores \
             running the default 512-bit AES-GCM code (intel-ipsec-mb) at once, a Xeon guest ran \
             1420-byte packets faster with max_simd_bitwidth = 256 (ring's 256-bit code; 2.3x on \
             16 workers) and 64-byte ones slower (docs/crypto.md, \"Wide vectors on many Intel \
             cores\"); compare `espgw bench --workers {} --max-simd-bitwidth 256` with the \
             default and set max_simd_bitwidth (either value silences this)",
            dp.workers, dp.workers
        ),
    );
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::config::{parse_str, Diagnostic, HostFacts};

    /// A protected port with `prot` as its addresses, a route to
    /// 10.9.0.0/16 behind it, and one tunnel protecting `local_ts`.
    fn config(prot: &str, local_ts: &str) -> String {
        format!(
            r#"
[gateway]
name = "gw"
[[port]]
name = "prot"
side = "protected"
device = "net_ring0"
address = {prot}
[[port]]
name = "unprot"
side = "unprotected"
device = "net_ring1"
address = "192.0.2.1/24"
[[route]]
dest = "10.9.0.0/16"
via = "10.1.0.254"
port = "prot"
[[tunnel]]
name = "t"
local = "192.0.2.1"
remote = "192.0.2.2"
local_ts = {local_ts}
remote_ts = ["10.2.0.0/24", "fd00:2::/64"]
esp = "aes128gcm16"
out = {{ spi = 0x1001, key = "00112233445566778899aabbccddeeff01020304" }}
in = {{ spi = 0x2001, key = "ffeeddccbbaa99887766554433221100a1a2a3a4" }}
"#
        )
    }

    fn warnings(text: String) -> Vec<Diagnostic> {
        let host = HostFacts::assumed(4);
        match parse_str(Path::new("test.toml"), text, &host) {
            Ok((_, w)) => w
                .into_iter()
                .filter(|d| d.message.contains("local_not_protected"))
                .collect(),
            Err(d) => panic!("config rejected: {d:?}"),
        }
    }

    #[test]
    fn warns_when_local_ts_leaves_out_the_protected_address() {
        // The protected hosts are behind a router; the port's own address
        // 10.1.0.1 is in no tunnel.
        let w = warnings(config(r#""10.1.0.1/24""#, r#"["10.9.0.0/16"]"#));
        assert_eq!(w.len(), 1, "{w:?}");
        let text = w[0].to_string();
        assert_eq!(w[0].key, "tunnel[0].local_ts");
        assert!(text.starts_with("warning: test.toml:"), "{text}");
        for words in ["tunnel \"t\"", "10.1.0.1", "\"prot\"", "10.1.0.1/32"] {
            assert!(text.contains(words), "{text:?} lacks {words:?}");
        }
    }

    #[test]
    fn no_warning_when_the_address_is_covered() {
        assert!(warnings(config(r#""10.1.0.1/24""#, r#"["10.1.0.0/24"]"#)).is_empty());
        assert!(warnings(config(
            r#""10.1.0.1/24""#,
            r#"["10.9.0.0/16", "10.1.0.1/32"]"#
        ))
        .is_empty());
    }

    #[test]
    fn each_family_is_checked_with_its_first_address() {
        // IPv4 covered, IPv6 not: one warning, naming the IPv6 address
        // the data plane would use (the port's first IPv6 one).
        let w = warnings(config(
            r#"["10.1.0.1/24", "fd00:1::1/64", "fd00:1::2/64"]"#,
            r#"["10.1.0.0/24", "fd00:1::2/128"]"#,
        ));
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].message.contains("fd00:1::1/128"), "{}", w[0]);
    }

    #[test]
    fn a_port_that_does_not_face_the_tunnel_is_not_blamed() {
        // local_ts is neither on the port's subnet nor behind its route.
        assert!(warnings(config(r#""10.1.0.1/24""#, r#"["10.7.0.0/24"]"#)).is_empty());
    }
}

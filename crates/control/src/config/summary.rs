//! The one-screen summary `espgw check` prints for a valid config. It
//! names SPIs and suites but never keys.

use core::fmt;

use espgw_esp::crypto::provider::SimdWidth;

use super::model::{Config, Mode, PolicyAction, Poll, Side, SpdEntry, SpreadLate, SpreadWhen};

/// The queue and core plan (issue 15): which queues each port gets, which
/// cores poll them, and where one tunnel's ESP is decrypted. It restates
/// what the data plane's runtime does (`queues_per_port`, `lcore_map` in
/// crates/dataplane/src/runtime/eal_args.rs, `spreads_decrypt`), so an
/// operator sees before `espgw run` that one peer's ESP lands on one queue.
fn queue_plan(f: &mut fmt::Formatter<'_>, c: &Config) -> fmt::Result {
    let dp = &c.dataplane;
    let n = dp.workers;
    writeln!(f, "queues and cores:")?;
    let cores = match &dp.lcores {
        Some(l) => format!(
            "pinned to cores {}",
            l.iter()
                .take(n)
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(",")
        ),
        None => "not pinned: the kernel places them, `lcores` pins them".to_string(),
    };
    match dp.mode {
        Mode::RunToCompletion => {
            writeln!(
                f,
                "  {} ({cores}); every port gets {n} RX + {n} TX queues, one pair per worker",
                plural(n, "worker"),
            )?;
            if n > 1 {
                writeln!(
                    f,
                    "  received packets spread over the RX queues by RSS on IP addresses and TCP/UDP \
                     ports (PCI ports) or af_packet's fanout hash (qpairs={n})"
                )?;
                let one = if let Some(when) = dp.spread_when() {
                    let late = match dp.spread_late {
                        SpreadLate::Drop => "dropped, spread_late = \"drop\"",
                        SpreadLate::Send => "sent out of order, spread_late = \"send\"",
                    };
                    let (when, value) = match when {
                        SpreadWhen::Always => ("each SA group of 16 or more packets", "always"),
                        SpreadWhen::Behind => (
                            "each SA group of 16 or more packets, while it is behind (a receive \
                             filled a whole burst),",
                            "auto",
                        ),
                    };
                    format!(
                        "the worker that receives it splits {when} over all {n} workers and \
                         puts the packets back in arrival order (spread_decrypt = \"{value}\"; a part \
                         back after the {wait} us bound is {late})",
                        wait = dp.spread_wait_us
                    )
                } else {
                    "the worker polling that queue decrypts all of it (spread_decrypt = \"off\")"
                        .to_string()
                };
                if dp.steers_esp() {
                    writeln!(
                        f,
                        "  where the NIC takes flow rules on the ESP header, each inbound SA gets one \
                         (steer_esp = \"auto\"): a per-CPU SA's ESP goes to its lane's worker \
                         (lane % {n}), any other SA's to its tunnel's worker or the one with the fewest; where \
                         the driver refuses them (every virtual device) RSS decides and `espgw run` says so once"
                    )?;
                }
                let arrives = if dp.steers_esp() {
                    "where the NIC takes none, and for a tunnel of one SA, one peer's ESP (same \
                     outer addresses, no ports to hash) arrives on one queue"
                } else {
                    "one peer's ESP (same outer addresses, no ports to hash) arrives on one queue \
                     (steer_esp = \"off\")"
                };
                writeln!(f, "  {arrives}: {one}")?;
                if dp.spread_when() == Some(SpreadWhen::Behind) {
                    let probe = if dp.spread_max_round_trip_ns == 0 {
                        "not probed (spread_max_round_trip_ns = 0): the fan-out runs".to_string()
                    } else {
                        format!(
                            "`espgw run` first measures a cache line's round trip from the first worker's \
                             core to the others' and {} the fan-out off above {} ns \
                             (spread_max_round_trip_ns; `espgw check --probe-cores` measures it here)",
                            if dp.spread_recheck_ms == 0 { "leaves" } else { "starts" },
                            dp.spread_max_round_trip_ns
                        )
                    };
                    writeln!(f, "  spread_decrypt = \"auto\": {probe}")?;
                    let recheck = if dp.spread_recheck_ms == 0 {
                        "not checked while it runs (spread_recheck_ms = 0)".to_string()
                    } else {
                        format!(
                            "while it runs, a receiving worker that is behind checks every {} ms \
                             (spread_recheck_ms) whether the fan-out makes it deliver more than \
                             alone, in a {} ms trial, and keeps it off until the next check when not",
                            dp.spread_recheck_ms,
                            crate::config::SPREAD_TRIAL_MS
                        )
                    };
                    writeln!(f, "  spread_decrypt = \"auto\": {recheck}")?;
                }
                if dp.per_cpu_handoff && dp.spread_when().is_some() {
                    writeln!(
                        f,
                        "  a per-CPU tunnel's SAs (RFC 9611) are not split: each SA's packets go whole to \
                         worker (its pair's index % {n}), which decrypts and sends them (per_cpu_handoff = true)"
                    )?;
                }
            }
        }
        Mode::Pipeline => {
            writeln!(
                f,
                "  1 I/O lcore (not pinned) polls queue 0 of every port and steers each flow to one of \
                 {} ({cores}) by hash (ESP by outer addresses and SPI)",
                plural(n, "worker"),
            )?;
        }
    }
    // RFC 9611 per-CPU CHILD_SAs: each worker encrypts on an SA of its own
    // (worker w on SA w % count) once the peer takes part.
    for conn in &c.connections {
        for ch in conn.children.iter().filter(|ch| ch.per_cpu_sas > 1) {
            let k = ch.per_cpu_sas as usize;
            let share = if k >= n {
                "no two workers share an outbound SA".to_string()
            } else {
                format!("{k} outbound SAs for {n} workers: some share one")
            };
            writeln!(
                f,
                "  {}: up to {} with the same selectors (per_cpu_sas{}) when the peer takes part \
                 (RFC 9611); worker w encrypts on SA w % {k}: {share}",
                conn.tunnel_name(ch),
                plural(k, "CHILD_SA"),
                if ch.per_cpu_auto { " = \"auto\"" } else { "" },
            )?;
        }
    }
    tx_checksum_plan(f, c)
}

/// Which ports `espgw run` asks for TX UDP checksum offload
/// (`tx_checksum_offload`; `Config::may_send_esp_in_udp_v6`).
fn tx_checksum_plan(f: &mut fmt::Formatter<'_>, c: &Config) -> fmt::Result {
    if !c.dataplane.tx_checksum_offload {
        return writeln!(
            f,
            "  UDP checksums of ESP in UDP over IPv6 computed in software (tx_checksum_offload = \"off\")"
        );
    }
    let asked: Vec<&str> = (c.ports.iter().enumerate())
        .filter(|&(i, _)| c.may_send_esp_in_udp_v6(crate::config::PortId(i)))
        .map(|(_, p)| p.name.as_str())
        .collect();
    if asked.is_empty() {
        writeln!(
            f,
            "  TX UDP checksum offload asked of no port: no ESP in UDP over IPv6 leaves this gateway \
             (tx_checksum_offload = \"auto\")"
        )
    } else {
        writeln!(
            f,
            "  TX UDP checksum offload asked of port(s) {} where the NIC offers it (ESP in UDP over \
             IPv6 may leave by them; tx_checksum_offload = \"auto\"), not of the others",
            asked.join(", ")
        )
    }
}

/// Displays a config summary: `println!("{}", Summary(&config))`.
pub struct Summary<'a>(pub &'a Config);

fn plural(n: usize, word: &str) -> String {
    format!("{n} {word}{}", if n == 1 { "" } else { "s" })
}

impl fmt::Display for Summary<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let c = self.0;
        let dp = &c.dataplane;
        writeln!(
            f,
            "{}: OK. gateway {:?}: {}, {}, {}, {}",
            c.source.display(),
            c.gateway.name,
            plural(c.ports.len(), "port"),
            plural(c.tunnels.len(), "tunnel"),
            plural(c.connections.len(), "connection"),
            plural(c.policies.len(), "policy").replace("policys", "policies"),
        )?;
        let lcores = dp.lcores.as_ref().map_or("any".to_string(), |l| {
            l.iter().map(u32::to_string).collect::<Vec<_>>().join(",")
        });
        writeln!(
            f,
            "dataplane: {} on lcores {lcores}, {}, {}, burst {}, {} mbufs{}, mtu {}{}",
            plural(dp.workers, "worker"),
            match dp.mode {
                Mode::RunToCompletion => "run-to-completion",
                Mode::Pipeline => "pipeline",
            },
            match dp.poll {
                Poll::Busy => "busy polling".to_string(),
                Poll::Adaptive => format!(
                    "adaptive polling (idle sleeps up to {} µs)",
                    dp.idle_sleep_us
                ),
            },
            dp.burst,
            dp.mbufs,
            if dp.mbufs_set {
                ""
            } else {
                " (sized to the rings, caches and bursts)"
            },
            dp.mtu,
            if dp.max_simd_bitwidth != SimdWidth::Bits512 {
                format!(", vectors up to {} bits", dp.max_simd_bitwidth.bits())
            } else {
                String::new()
            }
        )?;
        queue_plan(f, c)?;
        if let Some(sock) = &c.gateway.control_socket {
            writeln!(f, "control socket: {}", sock.display())?;
        }
        if let Some(m) = &c.gateway.metrics {
            writeln!(f, "metrics: http://{m}/metrics")?;
        }
        if !c.tunnels.is_empty() {
            let aead = c.tunnels.iter().filter(|t| t.suite.is_aead()).count();
            writeln!(
                f,
                "state_dir: {} (0700): every manual SA continues its sequence numbers there after a \
                 restart, and a key used before is refused; {} its AEAD nonces could repeat)",
                c.gateway.state_dir.display(),
                if aead == 0 {
                    "without it, no tunnel is refused (none is AEAD, but".to_string()
                } else {
                    format!(
                        "`espgw run` refuses the {} if it cannot write there (else",
                        plural(aead, "AEAD tunnel")
                    )
                }
            )?;
        }
        writeln!(f, "ports:")?;
        for p in &c.ports {
            let addrs: Vec<String> = p.addresses.iter().map(|a| a.to_string()).collect();
            let side = match p.side {
                Side::Protected => "protected",
                Side::Unprotected => "unprotected",
            };
            let mac = p.mac.map_or(String::new(), |m| format!(" mac {m}"));
            writeln!(
                f,
                "  {:<10} {side:<11} {} {}{mac}",
                p.name,
                addrs.join(","),
                p.device
            )?;
        }
        if !c.neighbors.is_empty() || !c.routes.is_empty() {
            writeln!(
                f,
                "{}, {}",
                plural(c.neighbors.len(), "static neighbor"),
                plural(c.routes.len(), "route")
            )?;
        }
        writeln!(f, "security policy (first match wins):")?;
        for (i, e) in c.spd.iter().enumerate() {
            match *e {
                SpdEntry::Tunnel(t) => {
                    let t = &c.tunnels[t];
                    let ts = |v: &[crate::config::net::Prefix]| {
                        v.iter()
                            .map(|p| p.to_string())
                            .collect::<Vec<_>>()
                            .join(",")
                    };
                    writeln!(
                        f,
                        "  {:>2}. protect {} <-> {} via tunnel {:?}: {} -> {} {} out spi {:#010x} in spi {:#010x}{}{} replay {}",
                        i + 1,
                        ts(&t.local_ts),
                        ts(&t.remote_ts),
                        t.name,
                        t.local,
                        t.remote,
                        t.suite,
                        t.outbound.spi,
                        t.inbound.spi,
                        if t.esn { " esn" } else { "" },
                        if t.encap.is_udp() { " udp-encap" } else { "" },
                        t.replay_window,
                    )?;
                }
                SpdEntry::Policy(p) => {
                    let p = &c.policies[p];
                    let any = |x: Option<String>| x.unwrap_or_else(|| "any".into());
                    writeln!(
                        f,
                        "  {:>2}. {} src {} dst {} proto {} sport {} dport {}",
                        i + 1,
                        action(p.action),
                        any(p.src.map(|v| v.to_string())),
                        any(p.dst.map(|v| v.to_string())),
                        any(p.proto.map(|v| v.to_string())),
                        any(p.sport.map(|v| v.to_string())),
                        any(p.dport.map(|v| v.to_string())),
                    )?;
                }
            }
        }
        writeln!(f, "  everything else: {}", action(c.default_action))?;
        for conn in &c.connections {
            // Names, addresses, identities and proposals; never the key.
            writeln!(
                f,
                "connection {:?}: {} -> {} id {} -> {}, auth psk, proposals {}, dpd {}, rekey {}{}",
                conn.name,
                conn.local,
                conn.remote.map_or("%any".to_string(), |r| r.to_string()),
                conn.local_id,
                conn.remote_id
                    .as_ref()
                    .map_or("%any".to_string(), |r| r.to_string()),
                conn.proposals.join(","),
                seconds(conn.dpd_delay),
                seconds(conn.rekey_time),
                if conn.fragmentation {
                    ""
                } else {
                    ", no fragmentation"
                },
            )?;
            for ch in &conn.children {
                let ts = |v: &[crate::config::net::Prefix]| {
                    v.iter()
                        .map(|p| p.to_string())
                        .collect::<Vec<_>>()
                        .join(",")
                };
                writeln!(
                    f,
                    "  child {:?}: protect {} <-> {} (tunnel {:?}, start {}), esp {}, rekey {}, life {}, rekey_bytes {}, rekey_packets {}, replay {}",
                    ch.name,
                    ts(&ch.local_ts),
                    ts(&ch.remote_ts),
                    conn.tunnel_name(ch),
                    ch.start_action.name(),
                    ch.esp_proposals.join(","),
                    seconds(ch.rekey_time),
                    seconds(ch.life_time),
                    off_if_zero(ch.rekey_bytes),
                    off_if_zero(ch.rekey_packets),
                    ch.replay_window,
                )?;
            }
        }
        Ok(())
    }
}

fn seconds(s: u64) -> String {
    if s == 0 {
        "off".into()
    } else {
        format!("{s}s")
    }
}

fn off_if_zero(n: u64) -> String {
    if n == 0 {
        "off".into()
    } else {
        n.to_string()
    }
}

fn action(a: PolicyAction) -> &'static str {
    match a {
        PolicyAction::Bypass => "bypass",
        PolicyAction::Discard => "discard",
    }
}

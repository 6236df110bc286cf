//! The JSON report: every number of the table plus the raw counts, the
//! machine and the exact command.

use serde_json::{json, Value};

use crate::runner::{Report, Row};

fn row(r: &Row) -> Value {
    let h = &r.measured.latency_ns;
    json!({
        "suite": r.suite.name(),
        "size": r.size.label(),
        "size_mean_bytes": r.size.mean(),
        "direction": r.direction.name(),
        "workers": r.workers,
        "tunnels": r.tunnels,
        "outer": r.outer.name(),
        "inner": r.inner.name(),
        "replay_window": r.replay_window,
        "flows": r.flows,
        "layer": r.layer.name(),
        "mpps": r.rates.mpps,
        "gbps_inner": r.rates.gbps_inner,
        "gbps_wire": r.rates.gbps_wire,
        "cycles_per_packet": r.rates.cycles_per_packet,
        "cycles_per_packet_mean": r.rates.cycles_per_packet_mean,
        "cycles_per_packet_p50": r.rates.cycles_per_packet_p50,
        "preempted_burst_share": r.rates.preempted,
        "ratio_to_ceiling": r.ratio_to_ceiling,
        "efficiency": r.efficiency,
        "loop_mpps": r.rates.loop_mpps,
        "io_mpps": r.rates.io_mpps,
        "io_cycles_per_packet": r.rates.io_cycles_per_packet,
        "latency_ns": {
            "p50": h.value_at_quantile(0.5),
            "p99": h.value_at_quantile(0.99),
            "p999": h.value_at_quantile(0.999),
            "max": h.max(),
            "samples": h.len(),
        },
        "packets": r.measured.packets,
        "inner_bytes": r.measured.inner_bytes,
        "wire_bytes": r.measured.wire_bytes,
        "cycles": r.measured.cycles,
        "io_cycles": r.measured.io_cycles,
        "loop_ns": r.measured.loop_ns,
        "valid": r.measured.tally.valid,
        "invalid": r.measured.tally.invalid,
        "first_invalid": r.measured.tally.first_invalid,
        "lost": r.measured.lost(),
        "spread_out": r.measured.spread_out,
        "spread_solo": r.measured.spread_solo,
        "spread_trials": espgw_dataplane::stats::spread_trials_json(&r.measured.spread_trials),
        "spread_trial_pps": r.measured.spread_trial_pps,
        "drops": r.measured.drops,
        "untimed_ns": r.measured.untimed_ns,
    })
}

pub fn render(report: &Report) -> Value {
    let m = &report.machine;
    let o = &report.options;
    json!({
        "tool": "espgw bench",
        "command": o.command,
        "machine": {
            "cpu_model": m.cpu_model,
            "logical_cpus": m.logical_cpus,
            "cpu_features": m.cpu_features,
            "kernel": m.kernel,
            "tsc_hz": m.tsc_hz,
            "hugepages": m.hugepages,
            "core_round_trips": m.core_round_trips.iter()
                .map(|p| json!({"cpus": [p.a, p.b], "round_trip_ns": p.ns}))
                .collect::<Vec<_>>(),
            "git_commit": m.git_commit,
            "build_commit": m.build_commit,
            "git_dirty": m.git_dirty,
        },
        "cipher_backends": o.suites.iter()
            .map(|s| (s.name().to_string(), Value::from(espgw_esp::crypto::provider::describe(*s))))
            .collect::<serde_json::Map<String, Value>>(),
        "eal_args": report.eal_args,
        "options": {
            "suites": o.suites.iter().map(|s| s.name()).collect::<Vec<_>>(),
            "sizes": o.sizes.iter().map(|s| s.label()).collect::<Vec<_>>(),
            "directions": o.directions.iter().map(|d| d.name()).collect::<Vec<_>>(),
            "workers": o.workers,
            "tunnels": o.tunnels,
            "outer": o.outer.name(),
            "inner": o.inner.name(),
            "seconds_per_layer": o.seconds,
            "flows": o.flows,
            "persist_seq": o.persist_seq,
            "spread_decrypt": o.spread_decrypt,
            "spread_late": o.spread_late.name(),
            "spread_wait_us": o.spread_wait_us,
            "spread_parts": o.spread_parts,
            "spread_recheck_ms": o.spread_recheck_ms,
            "per_cpu_sas": o.per_cpu_sas,
            "max_simd_bitwidth": o.simd_width.bits(),
            "streaming_rx": o.streaming_rx,
            "no_ipsec_mb": o.no_ipsec_mb,
            "tx_checksum_offload": o.tx_checksum_offload,
            "burst": crate::generator::BURST,
        },
        "units": {
            "size": "inner IP packet bytes; imix = 7:4:1 of 64/570/1500",
            "mpps": "TSC Hz / cycles_per_packet, summed over workers",
            "gbps_inner": "inner IP bytes",
            "gbps_wire": "ESP Ethernet frames on the encrypted link + 24 bytes preamble/FCS/inter-frame gap",
            "cycles_per_packet": "TSC cycles (constant rate) inside the stage call per packet, bursts slower than 20x the median (preempted) left out",
            "cycles_per_packet_mean": "the same over every burst: all cycles / all packets",
            "preempted_burst_share": "share of bursts left out of cycles_per_packet",
            "cycles_per_packet_p50": "median over bursts of the stage cycles per packet (robust to preemption)",
            "ratio_to_ceiling": "cipher-layer cycles per packet / this layer's, same case",
            "latency_ns": "from a burst's generation to the sink, recorded once per packet of the burst",
            "loop_mpps": "packets / wall time of generator + stage + sink on the same core, summed over workers",
            "efficiency": "loop_mpps with N workers / (N * loop_mpps with 1), rows with workers > 1",
            "tunnels": "tunnels the workers carried: worker w carries tunnel w % tunnels (1: every worker shares one SA pair)",
            "outer": "the tunnels' outer form (--outer): esp4 = ESP over IPv4, udp4 = ESP in UDP 4500 over IPv4 (checksum 0), esp6 = ESP over IPv6, udp6 = ESP in UDP 4500 over IPv6 (checksum computed)",
            "inner": "the inner packets' family (--inner): ipv4 = IPv4 + UDP, ipv6 = IPv6 + UDP between the IPv4 addresses mapped into fd00:ee::/96 (UDP checksum computed)",
            "replay_window": "the tunnels' anti-replay window; 0 (off) when workers share a tunnel: each worker replays its own pre-encrypted packets pass after pass",
            "flows": "distinct flows (UDP source port, and past 50000 source address) each worker's packets cycle over",
            "io_cycles_per_packet": "TSC cycles per packet of generator fill (RX copy into fresh mbufs) + stage + worker tick + draining and bulk-freeing the output (TX), sink checks left out, preempted bursts left out",
            "io_mpps": "TSC Hz / io_cycles_per_packet, summed over workers: compare with espgw run over net_pcap -> net_null",
        },
        "all_valid": report.all_valid(),
        "results": report.rows.iter().map(row).collect::<Vec<_>>(),
        "failed_cases": report.failures.iter().map(|f| json!({
            "suite": f.suite.name(),
            "size": f.size.label(),
            "direction": f.direction.name(),
            "workers": f.workers,
            "error": f.error,
        })).collect::<Vec<_>>(),
    })
}

//! The text table `espgw bench` prints.

use std::fmt::Write;

use espgw_esp::Suite;

use crate::options::{Direction, Size};
use crate::runner::{Report, Row};

fn opt(v: Option<f64>, width: usize, prec: usize) -> String {
    match v {
        Some(x) => format!("{x:>width$.prec$}"),
        None => format!("{:>width$}", "-"),
    }
}

fn us(row: &Row, q: f64) -> f64 {
    row.measured.latency_ns.value_at_quantile(q) as f64 / 1000.0
}

fn check(row: &Row) -> String {
    let t = &row.measured.tally;
    if row.valid() {
        "ok".into()
    } else if t.invalid > 0 {
        format!("BAD {} ({})", t.invalid, t.first_invalid.unwrap_or("?"))
    } else if row.measured.lost() > 0 {
        let why: Vec<String> = row
            .measured
            .drops
            .iter()
            .map(|(reason, n)| format!("{reason} {n}"))
            .collect();
        if why.is_empty() {
            format!("LOST {}", row.measured.lost())
        } else {
            format!("LOST {} ({})", row.measured.lost(), why.join(", "))
        }
    } else {
        "NO PACKETS".into()
    }
}

/// The columns that name a case (suite, size, direction, workers), as
/// its rows and a failed case's line start.
fn case_columns(suite: Suite, size: Size, direction: Direction, workers: usize) -> String {
    format!(
        "{:<16} {:>5} {:<7} {:>3}",
        suite.name(),
        size.label(),
        direction.name(),
        workers
    )
}

/// The whole table, with a legend.
pub fn render(report: &Report) -> String {
    let mut s = String::new();
    if report.options.workers > report.machine.logical_cpus {
        let _ = writeln!(
            s,
            "NOTE: {} workers on {} CPUs share cores: the stage rates assume a core each; eff and loop Mp show the sharing.\n",
            report.options.workers, report.machine.logical_cpus
        );
    }
    let _ = writeln!(
        s,
        "{} flow{} per worker (UDP source ports from {}, destination port {})\n",
        report.options.flows,
        if report.options.flows == 1 { "" } else { "s" },
        crate::flows::FIRST_PORT,
        crate::flows::DST_PORT,
    );
    let _ = writeln!(
        s,
        "outer form {}: {}; inner packets {}\n",
        report.options.outer.name(),
        report.options.outer.describe(),
        if report.options.inner.ipv6() {
            "IPv6 + UDP (hosts and selectors in fd00:ee::/96, UDP checksum computed)"
        } else {
            "IPv4 + UDP"
        }
    );
    if report.options.per_cpu_sas {
        let _ = writeln!(
            s,
            "1 tunnel on per-CPU SA pairs (RFC 9611): worker w encrypts with its own outbound SA \
             and {}; anti-replay window {}\n",
            if report.options.spread_decrypt {
                "decrypts the peer's ESP on its own inbound SA, all of which worker 0 receives \
                 (one packet of each SA in turn) and hands to the SA's worker (the per-CPU SA \
                 handoff; worker layer: the generator paced to what the workers take; each \
                 worker counts what it forwards, latency only worker 0's own)"
            } else {
                "receives the peer's ESP on its own inbound SA"
            },
            crate::runner::replay_window(&report.options)
        );
    } else if let Some(t) = report.options.tunnels {
        let _ = writeln!(
            s,
            "{t} tunnel{} shared by the workers (worker w carries tunnel w % {t}); anti-replay window {}\n",
            if t == 1 { "" } else { "s" },
            match crate::runner::replay_window(&report.options) {
                0 => "off (shared inbound SAs; see docs/multicore.md)".to_string(),
                n => n.to_string(),
            },
        );
    }
    if let Some(note) = espgw_esp::crypto::provider::simd_width_note() {
        let _ = writeln!(s, "{note}");
    }
    for suite in &report.options.suites {
        let _ = writeln!(
            s,
            "cipher {suite}: {}",
            espgw_esp::crypto::provider::describe(*suite)
        );
    }
    let _ = writeln!(s);
    if report.options.persist_seq {
        let _ = writeln!(
            s,
            "SAs admitted through a state directory, sequence keeper running (--persist-seq)\n"
        );
    }
    let _ = writeln!(
        s,
        "{:<16} {:>5} {:<7} {:>3} {:<6} | {:>7} {:>7} {:>7} {:>8} {:>6} | {:>7} {:>5} | {:>7} {:>7} {:>7} | {:>5} {:>7} {:>7} | check",
        "suite", "size", "dir", "W", "layer", "Mpps", "Gb/s in", "Gb/s wr", "cyc/pkt", "x ceil", "mean", "pre%", "p50 us", "p99 us",
        "p99.9us", "eff", "loop Mp", "io Mp"
    );
    let _ = writeln!(s, "{}", "-".repeat(162));
    let mut last_case = None;
    for row in &report.rows {
        let case = (row.suite, row.size, row.direction, row.workers);
        if last_case.is_some()
            && last_case != Some(case)
            && row.layer == crate::layers::Layer::Cipher
        {
            s.push('\n');
        }
        last_case = Some(case);
        let r = &row.rates;
        let _ = writeln!(
            s,
            "{} {:<6} | {:>7.2} {:>7.2} {:>7.2} {:>8.0} {} | {:>7.0} {:>5.1} | {:>7.2} {:>7.2} {:>7.2} | {} {:>7.2} {:>7.2} | {}",
            case_columns(row.suite, row.size, row.direction, row.workers),
            row.layer.name(),
            r.mpps,
            r.gbps_inner,
            r.gbps_wire,
            r.cycles_per_packet,
            opt(row.ratio_to_ceiling, 6, 3),
            r.cycles_per_packet_mean,
            r.preempted * 100.0,
            us(row, 0.5),
            us(row, 0.99),
            us(row, 0.999),
            opt(row.efficiency, 5, 2),
            r.loop_mpps,
            r.io_mpps,
            check(row),
        );
    }
    for f in &report.failures {
        let case = case_columns(f.suite, f.size, f.direction, f.workers);
        let _ = writeln!(s, "\n{case} FAILED: {}", f.error);
    }
    let _ = write!(
        s,
        "\nsize: inner IP packet bytes (imix = 7:4:1 of 64/570/1500). layer: cipher = raw EspCipher seal/open (the ceiling),\n\
         engine = encap_burst/decap_burst, worker = Worker::process_burst (the espgw run path), all on the same mbufs.\n\
         Mpps, Gb/s, cyc/pkt: TSC cycles ({:.3} GHz) inside the stage call only, summed over W workers, bursts preempted\n\
         by other processes (> 20x the median burst, share in pre%) left out; mean: over every burst, preempted included.\n\
         Gb/s in: inner IP bytes; Gb/s wr: ESP frames on the encrypted link incl. 24 B preamble/FCS/gap.\n\
         x ceil: cipher cycles / layer cycles (1.0 = no overhead over the raw cipher). Latency: burst of 32 handed to the\n\
         stage until the sink takes it (every packet of a burst waits for the whole burst). eff: loop rate(W) / (W x loop rate(1)).\n\
         loop Mp: generator + stage + sink on the same core, wall clock. check: every output checked by the sink.\n\
         io Mp: the stage plus the I/O a copying PMD costs the core around it (generator fill = RX copy into fresh mbufs,\n\
         worker tick, draining and bulk-freeing the output = TX), sink checks left out, TSC like Mpps: compare this with\n\
         `espgw run` over net_pcap -> net_null (bench/run-vs-bench.sh). Packets cycle over {} flow{} (UDP 5-tuples) per worker.\n",
        report.machine.tsc_hz as f64 / 1e9,
        report.options.flows,
        if report.options.flows == 1 { "" } else { "s" },
    );
    if !report.machine.core_round_trips.is_empty() {
        let pairs: Vec<String> = report
            .machine
            .core_round_trips
            .iter()
            .map(|p| {
                let ns =
                    p.ns.map_or("no answer".to_string(), |v| format!("{v:.0} ns"));
                format!("{}<->{} {ns}", p.a, p.b)
            })
            .collect();
        let _ = writeln!(
            s,
            "Cache line round trip between the workers' CPUs (measured before the run): {}.",
            pairs.join(", ")
        );
    }
    s
}

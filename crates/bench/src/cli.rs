//! `espgw bench` as the binary calls it: options from the contract flags,
//! progress and table on the terminal, JSON and SVG files.

use std::path::PathBuf;

use crate::options::{self, Options};
use crate::report;
use crate::runner;

/// The contract flags, as strings (clap lives in the binary).
#[derive(Debug, Clone, Default)]
pub struct Args {
    pub suite: Option<String>,
    pub sizes: Option<String>,
    /// "encrypt", "decrypt" or "both" (default).
    pub direction: Option<String>,
    pub workers: Option<usize>,
    /// Tunnels the workers carry (default: one per worker).
    pub tunnels: Option<usize>,
    pub seconds: Option<f64>,
    /// Distinct flows per worker (default 64).
    pub flows: Option<usize>,
    /// Persisted sequence reservations, as `espgw run` (default off).
    pub persist_seq: bool,
    /// The decrypt fan-out: worker 0 receives, all decrypt (default off).
    pub spread_decrypt: bool,
    /// With the fan-out: "drop" (default) or "send" for late parts.
    pub spread_late: Option<String>,
    /// With the fan-out: its reorder bound in microseconds (default 100).
    pub spread_wait_us: Option<u32>,
    /// With the fan-out: the most parts a group is cut into.
    pub spread_parts: Option<usize>,
    /// With the fan-out: the live check's interval in ms (default 0: off).
    pub spread_recheck_ms: Option<u32>,
    /// One tunnel on per-CPU SA pairs, one per worker (default off).
    pub per_cpu_sas: bool,
    /// The tunnels' outer form: "esp4" (default), "udp4", "esp6", "udp6".
    pub outer: Option<String>,
    /// The inner packets' family: "ipv4" (default) or "ipv6".
    pub inner: Option<String>,
    /// 256 or 512 (default): the ciphers' widest vector registers, as
    /// `[dataplane] max_simd_bitwidth`.
    pub max_simd_bitwidth: Option<u16>,
    /// Streaming stores in the generator (as a NIC's DMA; default off).
    pub streaming_rx: bool,
    /// No intel-ipsec-mb in the ciphers (default off).
    pub no_ipsec_mb: bool,
    /// The unprotected port computes UDP checksums (default off).
    pub tx_checksum_offload: bool,
    pub json: Option<PathBuf>,
    pub svg: Option<PathBuf>,
}

impl Args {
    /// Validated options; `command` is the command line as typed.
    pub fn options(&self, command: String) -> Result<Options, options::OptionError> {
        let mut o = Options {
            command,
            ..Options::default()
        };
        if let Some(s) = &self.suite {
            o.suites = options::parse_suites(s)?;
        }
        if let Some(s) = &self.sizes {
            o.sizes = options::parse_sizes(s)?;
        }
        if let Some(d) = &self.direction {
            o.directions = options::parse_direction(d)?;
        }
        if let Some(n) = self.workers {
            o.workers = options::check_workers(n)?;
        }
        if let Some(n) = self.tunnels {
            o.tunnels = Some(options::check_tunnels(n)?);
        }
        if let Some(s) = self.seconds {
            o.seconds = options::check_seconds(s)?;
        }
        if let Some(n) = self.flows {
            o.flows = options::check_flows(n)?;
        }
        o.persist_seq = self.persist_seq;
        o.spread_decrypt = self.spread_decrypt;
        if let Some(late) = &self.spread_late {
            if !self.spread_decrypt {
                return Err(options::OptionError(
                    "--spread-late: only with --spread-decrypt (it is what the fan-out does with a \
                     late part)"
                        .into(),
                ));
            }
            o.spread_late = options::parse_spread_late(late)?;
        }
        if let Some(us) = self.spread_wait_us {
            if !self.spread_decrypt {
                return Err(options::OptionError(
                    "--spread-wait-us: only with --spread-decrypt (it is the fan-out's reorder \
                     bound)"
                        .into(),
                ));
            }
            o.spread_wait_us = options::check_spread_wait_us(us)?;
        }
        if let Some(n) = self.spread_parts {
            if !self.spread_decrypt {
                return Err(options::OptionError(
                    "--spread-parts: only with --spread-decrypt (it cuts the fan-out's groups)"
                        .into(),
                ));
            }
            o.spread_parts = Some(options::check_spread_parts(n)?);
        }
        if let Some(ms) = self.spread_recheck_ms {
            if !self.spread_decrypt {
                return Err(options::OptionError(
                    "--spread-recheck-ms: only with --spread-decrypt (it checks whether the \
                     fan-out pays)"
                        .into(),
                ));
            }
            o.spread_recheck_ms = options::check_spread_recheck_ms(ms)?;
        }
        if self.per_cpu_sas {
            // With --spread-decrypt: the per-CPU SA handoff (worker 0
            // receives every SA's ESP and hands each to its worker).
            if self.persist_seq {
                return Err(options::OptionError(
                    "--per-cpu-sas with --persist-seq: not supported (the extra SA pairs are \
                     admitted live, without the state directory)"
                        .into(),
                ));
            }
            if self.tunnels.is_some_and(|t| t != 1) {
                return Err(options::OptionError(
                    "--per-cpu-sas: the workers carry one tunnel (--tunnels 1 or none)".into(),
                ));
            }
            o.per_cpu_sas = true;
            o.tunnels = Some(1);
        }
        if let Some(s) = &self.outer {
            o.outer = options::parse_outer(s)?;
        }
        if let Some(s) = &self.inner {
            o.inner = options::parse_inner(s)?;
            o.check_sizes()?;
        }
        if let Some(bits) = self.max_simd_bitwidth {
            o.simd_width = options::parse_simd_width(bits)?;
        }
        o.streaming_rx = self.streaming_rx;
        o.no_ipsec_mb = self.no_ipsec_mb;
        o.tx_checksum_offload = self.tx_checksum_offload;
        o.json = self.json.clone();
        o.svg = self.svg.clone();
        Ok(o)
    }
}

/// The command line of this process, shell-quoted where needed.
pub fn command_line() -> String {
    std::env::args()
        .map(|a| {
            if a.is_empty() || a.contains(|c: char| c.is_whitespace() || "\"'$\\".contains(c)) {
                format!("'{}'", a.replace('\'', r"'\''"))
            } else {
                a
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Runs the bench, prints the table, writes the files. Ok(true) when every
/// packet of every case passed the sink.
pub fn run(args: &Args) -> Result<bool, String> {
    let opts = args.options(command_line()).map_err(|e| e.to_string())?;
    let rep = runner::run(&opts)?;
    print!("{}", report::table::render(&rep));
    if let Some(path) = &opts.json {
        let text =
            serde_json::to_string_pretty(&report::json::render(&rep)).map_err(|e| e.to_string())?;
        std::fs::write(path, text + "\n").map_err(|e| format!("{}: {e}", path.display()))?;
        eprintln!("wrote {}", path.display());
    }
    if let Some(path) = &opts.svg {
        std::fs::write(path, report::svg::render(&rep))
            .map_err(|e| format!("{}: {e}", path.display()))?;
        eprintln!("wrote {}", path.display());
    }
    let ok = rep.all_valid();
    if !ok {
        if rep.rows.iter().all(crate::runner::Row::valid) {
            eprintln!("espgw bench: some cases could not be measured (see the FAILED lines)");
        } else {
            eprintln!("espgw bench: some packets failed the sink's checks or were lost (see the check column{})",
                if rep.failures.is_empty() { "" } else { " and the FAILED lines" });
        }
    }
    Ok(ok)
}

/// [`run`] as a process exit status: success only when the run completed
/// and every packet passed the sink. Errors go to stderr.
pub fn exit_code(args: &Args) -> std::process::ExitCode {
    match run(args) {
        Ok(true) => std::process::ExitCode::SUCCESS,
        Ok(false) => std::process::ExitCode::FAILURE,
        Err(e) => {
            eprintln!("espgw bench: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::{Direction, Size};

    #[test]
    fn per_cpu_sas_means_one_tunnel_and_refuses_what_contradicts_it() {
        // (--spread-decrypt with it: the per-CPU SA handoff, not refused.)
        let per_cpu = |tunnels, spread, persist| Args {
            workers: Some(2),
            tunnels,
            per_cpu_sas: true,
            spread_decrypt: spread,
            persist_seq: persist,
            ..Args::default()
        };
        let o = per_cpu(None, false, false).options(String::new()).unwrap();
        assert!(o.per_cpu_sas);
        assert_eq!(o.tunnels, Some(1));
        assert!(per_cpu(Some(1), false, false)
            .options(String::new())
            .is_ok());
        // With the fan-out: the per-CPU SA handoff, the window on too.
        let handoff = per_cpu(None, true, false).options(String::new()).unwrap();
        assert!(handoff.per_cpu_sas && handoff.spread_decrypt);
        assert_eq!(
            crate::runner::replay_window(&handoff),
            crate::gateway::REPLAY_WINDOW
        );
        for (tunnels, spread, persist) in [(Some(2), false, false), (None, false, true)] {
            let refused = per_cpu(tunnels, spread, persist).options(String::new());
            assert!(
                refused.is_err(),
                "{tunnels:?} spread {spread} persist {persist}"
            );
        }
        // The window stays on: every worker has its own inbound SA.
        assert_eq!(
            crate::runner::replay_window(&o),
            crate::gateway::REPLAY_WINDOW
        );
        assert!(!Args::default().options(String::new()).unwrap().per_cpu_sas);
    }

    /// The window is off only where several workers receive one tunnel's
    /// ESP (their resets would refuse each other's numbers); with the
    /// fan-out one worker receives each tunnel, so it stays on.
    #[test]
    fn the_window_is_off_only_where_workers_receive_one_tunnel() {
        let window = |workers, tunnels, spread| {
            let o = Args {
                workers: Some(workers),
                tunnels,
                spread_decrypt: spread,
                ..Args::default()
            }
            .options(String::new())
            .unwrap();
            crate::runner::replay_window(&o)
        };
        let on = crate::gateway::REPLAY_WINDOW;
        assert_eq!(window(2, None, false), on, "a tunnel per worker");
        assert_eq!(window(2, Some(1), false), 0, "both receive one tunnel");
        assert_eq!(window(2, Some(1), true), on, "the fan-out: one receives");
        assert_eq!(window(4, Some(2), true), 2 * on, "spans 4 workers' boxes");
        assert_eq!(window(1, Some(1), false), on);
    }

    #[test]
    fn spread_wait_needs_the_fan_out_and_its_range() {
        let wait = |spread, us| Args {
            workers: Some(2),
            tunnels: Some(1),
            spread_decrypt: spread,
            spread_wait_us: Some(us),
            ..Args::default()
        };
        assert_eq!(
            Args::default()
                .options(String::new())
                .unwrap()
                .spread_wait_us,
            100
        );
        let longer = wait(true, 400).options(String::new()).unwrap();
        assert_eq!(longer.spread_wait_us, 400);
        assert_eq!(
            crate::runner::replay_window(&longer),
            4 * crate::gateway::REPLAY_WINDOW,
            "the window spans the boxes of a 4 x longer wait"
        );
        for (spread, us) in [(false, 400), (true, 49), (true, 1_001)] {
            let e = wait(spread, us).options(String::new()).unwrap_err();
            assert!(e.0.contains("--spread-wait-us"), "{}", e.0);
        }
    }

    #[test]
    fn spread_recheck_needs_the_fan_out_and_its_range() {
        let recheck = |spread, ms| Args {
            workers: Some(2),
            tunnels: Some(1),
            spread_decrypt: spread,
            spread_recheck_ms: Some(ms),
            ..Args::default()
        };
        let off = Args::default().options(String::new()).unwrap();
        assert_eq!(
            off.spread_recheck_ms, 0,
            "the rows measure the fan-out itself"
        );
        for ms in [0, 100, 200, 3_600_000] {
            let o = recheck(true, ms).options(String::new()).unwrap();
            assert_eq!(o.spread_recheck_ms, ms);
        }
        for (spread, ms) in [(false, 200), (true, 1), (true, 99), (true, 3_600_001)] {
            let e = recheck(spread, ms).options(String::new()).unwrap_err();
            assert!(e.0.contains("--spread-recheck-ms"), "{}", e.0);
        }
    }

    #[test]
    fn spread_parts_needs_the_fan_out_and_its_range() {
        let parts = |spread, n| Args {
            workers: Some(4),
            tunnels: Some(1),
            spread_decrypt: spread,
            spread_parts: Some(n),
            ..Args::default()
        };
        assert_eq!(
            Args::default().options(String::new()).unwrap().spread_parts,
            None
        );
        assert_eq!(
            parts(true, 1).options(String::new()).unwrap().spread_parts,
            Some(1)
        );
        for (spread, n) in [(false, 1), (true, 0), (true, 257)] {
            let e = parts(spread, n).options(String::new()).unwrap_err();
            assert!(e.0.contains("--spread-parts"), "{}", e.0);
        }
    }

    #[test]
    fn streaming_rx_and_no_ipsec_mb_are_off_unless_asked() {
        assert!(!Args::default().options(String::new()).unwrap().streaming_rx);
        let on = Args {
            streaming_rx: true,
            ..Args::default()
        };
        assert!(on.options(String::new()).unwrap().streaming_rx);
        assert!(!Args::default().options(String::new()).unwrap().no_ipsec_mb);
        let off = Args {
            no_ipsec_mb: true,
            ..Args::default()
        };
        assert!(off.options(String::new()).unwrap().no_ipsec_mb);
    }

    #[test]
    fn spread_late_needs_the_fan_out_and_takes_drop_or_send() {
        use espgw_control::config::SpreadLate;
        let late = |spread, value: &str| Args {
            workers: Some(2),
            tunnels: Some(1),
            spread_decrypt: spread,
            spread_late: Some(value.into()),
            ..Args::default()
        };
        assert_eq!(
            Args::default().options(String::new()).unwrap().spread_late,
            SpreadLate::Drop
        );
        assert_eq!(
            late(true, "send")
                .options(String::new())
                .unwrap()
                .spread_late,
            SpreadLate::Send
        );
        assert_eq!(
            late(true, "drop")
                .options(String::new())
                .unwrap()
                .spread_late,
            SpreadLate::Drop
        );
        assert!(late(false, "send").options(String::new()).is_err());
        let e = late(true, "reorder").options(String::new()).unwrap_err();
        assert!(e.0.contains("drop or send"), "{}", e.0);
    }

    #[test]
    fn defaults_and_overrides() {
        let o = Args::default().options("x".into()).unwrap();
        assert_eq!(
            (o.suites.len(), o.sizes.len(), o.directions.len(), o.workers),
            (6, 8, 2, 1)
        );
        assert_eq!(o.seconds, 0.5);
        let a = Args {
            suite: Some("aes128gcm16".into()),
            sizes: Some("64,imix".into()),
            direction: Some("decrypt".into()),
            workers: Some(2),
            seconds: Some(0.1),
            flows: Some(1),
            ..Args::default()
        };
        let o = a.options("espgw bench".into()).unwrap();
        assert_eq!(o.sizes, vec![Size::Fixed(64), Size::Imix]);
        assert_eq!(o.directions, vec![Direction::Decrypt]);
        assert_eq!(
            (o.workers, o.seconds, o.command.as_str()),
            (2, 0.1, "espgw bench")
        );
        assert_eq!(o.flows, 1);
        assert_eq!(o.outer, crate::options::Outer::Esp4, "the default");
        let udp6 = Args {
            outer: Some("udp6".into()),
            ..Args::default()
        };
        assert_eq!(
            udp6.options(String::new()).unwrap().outer,
            crate::options::Outer::Udp6
        );
        let no_outer = Args {
            outer: Some("gre".into()),
            ..Args::default()
        };
        assert!(no_outer.options(String::new()).is_err());
        use espgw_esp::crypto::provider::SimdWidth;
        assert_eq!(o.simd_width, SimdWidth::Bits512, "the default");
        let width = |bits| {
            Args {
                max_simd_bitwidth: Some(bits),
                ..Args::default()
            }
            .options(String::new())
            .map(|o| o.simd_width)
        };
        assert_eq!(width(256), Ok(SimdWidth::Bits256));
        assert_eq!(width(512), Ok(SimdWidth::Bits512));
        assert!(width(128).is_err_and(|e| e.0.contains("--max-simd-bitwidth")));
        let bad = Args {
            workers: Some(0),
            ..Args::default()
        };
        assert!(bad.options(String::new()).is_err());
        let no_flows = Args {
            flows: Some(0),
            ..Args::default()
        };
        assert!(no_flows.options(String::new()).is_err());
    }
}

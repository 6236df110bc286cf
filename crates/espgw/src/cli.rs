//! The command-line grammar (clap derive).

use clap::{Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

#[derive(Parser, Debug)]
#[command(
    name = "espgw",
    version,
    about = "Kernel-bypass IPsec ESP tunnel gateway"
)]
pub struct Cli {
    /// Log level or filter (e.g. "info", "espgw_control=debug"); RUST_LOG
    /// is used when this is not given, and "info" when neither is ("warn"
    /// for `bench`, whose per-case SAs would bury its report).
    #[arg(long, global = true, value_name = "FILTER")]
    pub log: Option<String>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run the gateway until SIGINT/SIGTERM or --duration.
    Run {
        #[arg(long, value_name = "FILE")]
        config: PathBuf,
        /// Stop after this many seconds.
        #[arg(long, value_name = "SECS")]
        duration: Option<f64>,
        /// Write the final counters here as JSON on exit.
        #[arg(long, value_name = "FILE")]
        stats_json: Option<PathBuf>,
    },
    /// Validate a config; every error names file:line:col and the key.
    Check {
        #[arg(long, value_name = "FILE")]
        config: PathBuf,
        /// Also measure, on this machine, how long a cache line takes from
        /// the first worker's core to each other worker's and back, and say
        /// what `spread_decrypt = "auto"` would do with it (a few ms per
        /// pair, up to about 1.2 s when cores do not answer; the cores
        /// should be idle).
        #[arg(long)]
        probe_cores: bool,
    },
    /// Measure ESP throughput with the built-in harness.
    Bench {
        /// Comma-separated suite names (default: all).
        #[arg(long, value_name = "LIST")]
        suite: Option<String>,
        /// Comma-separated packet sizes, or "imix".
        #[arg(long, value_name = "LIST|imix")]
        sizes: Option<String>,
        /// Encrypt (protected -> unprotected), decrypt, or both as separate rows.
        #[arg(long, value_enum, default_value_t = Direction::Both)]
        direction: Direction,
        /// With N > 1, every case runs with 1 and with N pinned workers and
        /// the N rows show the scaling efficiency (default 1).
        #[arg(long, value_name = "N")]
        workers: Option<usize>,
        /// Tunnels the workers carry: worker w carries tunnel w % N; with 1,
        /// all workers share one SA pair (default: one tunnel per worker).
        #[arg(long, value_name = "N")]
        tunnels: Option<usize>,
        /// Measuring time per layer of each case (default 0.5).
        #[arg(long, value_name = "S")]
        seconds: Option<f64>,
        /// Distinct flows (UDP 5-tuples) per worker (default 64).
        #[arg(long, value_name = "N")]
        flows: Option<usize>,
        /// Admit the SAs through a fresh state directory and run the
        /// sequence keeper while measuring, as `espgw run` does: the cost of
        /// persisted sequence reservations (docs/operations.md).
        #[arg(long)]
        persist_seq: bool,
        /// With --workers N > 1: the decrypt fan-out (`spread_decrypt`). With
        /// --tunnels 1 worker 0 alone receives the tunnel's ESP and spreads
        /// its decryption over all workers, which receive nothing; with
        /// --tunnels K > 1 each of the first K workers receives its own
        /// tunnel's ESP and spreads it to workers not busy with their own
        /// (the worker layer's decrypt rows; docs/multicore.md).
        #[arg(long)]
        spread_decrypt: bool,
        /// With --spread-decrypt: what the receiving worker does with a part
        /// back after its reorder stage's bound, "drop" (default) or "send"
        /// (`[dataplane] spread_late`).
        #[arg(long, value_name = "drop|send")]
        spread_late: Option<String>,
        /// With --spread-decrypt: how long the receiving worker waits for a
        /// part before it gives up on it, in microseconds (default 100;
        /// `[dataplane] spread_wait_us`).
        #[arg(long, value_name = "US")]
        spread_wait_us: Option<u32>,
        /// With --spread-decrypt: the most parts the receiving worker cuts
        /// a burst of one SA into (default: a part per 8 packets and other
        /// worker; 1: each burst whole to one helper; docs/multicore.md).
        #[arg(long, value_name = "N")]
        spread_parts: Option<usize>,
        /// With --spread-decrypt: each receiving worker checks this often
        /// (ms of its loop time) whether the fan-out makes it deliver more
        /// than alone, and leaves it off until the next check when not
        /// (`[dataplane] spread_recheck_ms`; default 0 here: the rows
        /// measure the fan-out itself).
        #[arg(long, value_name = "MS")]
        spread_recheck_ms: Option<u32>,
        /// One tunnel on RFC 9611 per-CPU SAs (`per_cpu_sas`): with
        /// --workers N, N SA pairs of the same selectors, worker w
        /// encrypting with its own outbound SA and receiving the peer's
        /// ESP on its own inbound SA (implies --tunnels 1; docs/multicore.md).
        /// With --spread-decrypt: the per-CPU SA handoff, worker 0 receiving
        /// every SA's ESP (one packet of each in turn) and handing each SA's
        /// groups to its worker, which decrypts and forwards them.
        #[arg(long)]
        per_cpu_sas: bool,
        /// The tunnels' outer form: ESP over IPv4 (esp4), ESP in UDP 4500
        /// over IPv4 (udp4), ESP over IPv6 (esp6), ESP in UDP 4500 over
        /// IPv6 (udp6); every case and layer runs with it.
        #[arg(long, value_enum, default_value_t = Outer::Esp4)]
        outer: Outer,
        /// The inner packets' family: IPv4 + UDP (ipv4) or IPv6 + UDP
        /// (ipv6: the hosts' and the selectors' addresses mapped into
        /// fd00:ee::/96, sizes from 64); every case and layer runs with it.
        #[arg(long, value_enum, default_value_t = Inner::Ipv4)]
        inner: Inner,
        /// The ciphers' widest vector registers, as `[dataplane]
        /// max_simd_bitwidth`: 512 (default, whatever the CPU has) or 256
        /// (no AVX-512 code: what an AVX2-only CPU runs; docs/crypto.md)
        #[arg(long, value_name = "256|512")]
        max_simd_bitwidth: Option<u16>,
        /// The generator writes each packet with streaming (non-temporal)
        /// stores, as a NIC's DMA would: it starts in memory, not in the
        /// receiving worker's cache (default: plain stores). What the
        /// decrypt fan-out and the handoff move between cores then costs
        /// what it costs after a real RX (docs/multicore.md).
        #[arg(long)]
        streaming_rx: bool,
        /// The ciphers use no intel-ipsec-mb: AES-GCM from the split on and
        /// ChaCha20-Poly1305 run ring, espgw-aesgcm's short path keeps its
        /// width (docs/crypto.md, "Wide vectors on many Intel cores").
        #[arg(long)]
        no_ipsec_mb: bool,
        /// The bench gateway's unprotected port computes UDP checksums on
        /// transmit, as a NIC with TX checksum offload does under `espgw
        /// run` (`[dataplane] tx_checksum_offload`): with `--outer udp6`
        /// the engine only seeds the outer UDP checksum and the sink
        /// completes it, as the NIC would, outside the measured time
        /// (docs/dataplane.md, "TX checksum offload"). Other forms: no
        /// effect.
        #[arg(long)]
        tx_checksum_offload: bool,
        /// Write every number, the raw counts, the machine and the command as JSON.
        #[arg(long, value_name = "FILE")]
        json: Option<PathBuf>,
        /// Write throughput and cycles per packet against size as an SVG chart.
        #[arg(long, value_name = "FILE")]
        svg: Option<PathBuf>,
    },
    /// Talk to a running gateway over its control socket.
    Ctl {
        #[arg(long, value_name = "PATH")]
        socket: PathBuf,
        /// status | sa list | sa add ... | sa del ... | sa rekey ... | stats |
        /// ike list | ike initiate NAME | ike terminate NAME | ike rekey NAME [--child NAME]
        #[arg(
            required = true,
            trailing_var_arg = true,
            allow_hyphen_values = true,
            value_name = "COMMAND"
        )]
        command: Vec<String>,
    },
    /// Export key material for other tools.
    Keys {
        #[command(subcommand)]
        what: Keys,
    },
    /// Prepare this machine for a config: NICs and hugepages.
    ///
    /// Checks the CPU flags, the IOMMU and vfio-pci; binds the PCI devices of
    /// the config's ports to vfio-pci and lists them in /etc/dpdk/interfaces
    /// (Debian's dpdk.service binds them at boot); reserves 2 MiB hugepages
    /// now and in /etc/dpdk/dpdk.conf. Prints every finding and change;
    /// changes nothing while a check fails. Exit status 0 when ready, 1 on a
    /// problem. Details: /usr/share/doc/espgw/install.md.
    Setup {
        /// The gateway config whose ports and memory to set up.
        #[arg(long, value_name = "FILE")]
        config: PathBuf,
        /// Print what would change; change nothing.
        #[arg(long)]
        dry_run: bool,
        /// 2 MiB hugepages to reserve (default: from the config's mbufs and
        /// mtu, at least 512).
        #[arg(long, value_name = "N")]
        hugepages: Option<u64>,
        /// Read and write /sys, /proc and /etc under this directory (tests).
        #[arg(long, value_name = "DIR", default_value = "/", hide = true)]
        root: PathBuf,
    },
    /// Write the man pages or a shell completion script (packaging).
    Generate {
        #[command(subcommand)]
        what: Generate,
    },
}

#[derive(Subcommand, Debug)]
pub enum Generate {
    /// Write espgw.1 and one page per subcommand into a directory.
    Man {
        #[arg(long, value_name = "DIR")]
        out_dir: PathBuf,
    },
    /// Print the completion script for a shell.
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

#[derive(Subcommand, Debug)]
pub enum Keys {
    /// Print Wireshark esp_sa lines for every SA of a config, or
    /// ikev2_decryption_table and esp_sa lines of a running gateway's IKE
    /// SAs and SAs (CHILD_SAs included).
    ///
    /// With --socket, the esp_sa lines go to stdout (or --esp-sa FILE) and
    /// the ikev2_decryption_table lines to --ikev2 FILE (default: after the
    /// esp_sa lines on stdout, under a comment). Only root and the
    /// gateway's own user may read keys from the socket.
    Wireshark {
        /// A config file: its [[tunnel]] SAs.
        #[arg(
            long,
            value_name = "FILE",
            required_unless_present = "socket",
            conflicts_with = "socket"
        )]
        config: Option<PathBuf>,
        /// A running gateway's control socket.
        #[arg(long, value_name = "PATH")]
        socket: Option<PathBuf>,
        /// With --socket: write the ikev2_decryption_table records here
        /// (mode 0600; Wireshark's file is ~/.config/wireshark/ikev2_decryption_table).
        #[arg(long, value_name = "FILE", requires = "socket")]
        ikev2: Option<PathBuf>,
        /// With --socket: write the esp_sa records here (mode 0600)
        /// instead of stdout.
        #[arg(long, value_name = "FILE", requires = "socket")]
        esp_sa: Option<PathBuf>,
    },
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    Encrypt,
    Decrypt,
    Both,
}

/// `espgw bench --outer`: the names crates/bench parses.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outer {
    Esp4,
    Udp4,
    Esp6,
    Udp6,
}

/// `espgw bench --inner`: the names crates/bench parses.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Inner {
    Ipv4,
    Ipv6,
}

impl Command {
    /// The log filter when neither `--log` nor RUST_LOG gives one: "warn"
    /// for `bench`, which builds and drops SAs for every case (and, with
    /// --per-cpu-sas, a pair per worker) whose state-change lines would
    /// bury its report; "info" for everything else.
    pub fn default_log_filter(&self) -> &'static str {
        match self {
            Command::Bench { .. } => "warn",
            _ => "info",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn grammar_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn contract_command_lines_parse() {
        for line in [
            "espgw run --config gw.toml --duration 10 --stats-json s.json",
            "espgw check --config gw.toml",
            "espgw bench --suite aes128gcm16,aes256gcm16 --sizes imix --direction encrypt --workers 2 --seconds 3 --json r.json --svg r.svg",
            "espgw ctl --socket /run/espgw.sock sa list",
            "espgw ctl --socket /run/espgw.sock sa del --spi 0x1001",
            "espgw keys wireshark --config gw.toml",
            "espgw keys wireshark --socket /run/espgw.sock",
            "espgw keys wireshark --socket /run/espgw.sock --ikev2 ike.txt --esp-sa esp.txt",
            "espgw setup --config gw.toml --dry-run --hugepages 1024",
            "espgw generate man --out-dir man",
            "espgw generate completions bash",
        ] {
            let args = line.split_whitespace();
            if let Err(e) = Cli::try_parse_from(args) {
                panic!("{line}: {e}");
            }
        }
        assert!(Cli::try_parse_from(["espgw", "check"]).is_err());
        assert!(Cli::try_parse_from(["espgw", "bench", "--direction", "sideways"]).is_err());
        assert!(Cli::try_parse_from(["espgw", "bench", "--outer", "gre"]).is_err());
    }

    #[test]
    fn bench_outer_names_are_the_ones_the_bench_parses() {
        for v in Outer::value_variants() {
            let name = v.to_possible_value().unwrap().get_name().to_string();
            let parsed = espgw_bench::options::parse_outer(&name)
                .unwrap_or_else(|e| panic!("--outer {name}: {e}"));
            assert_eq!(parsed.name(), name);
            let line = ["espgw", "bench", "--outer", name.as_str()];
            assert!(Cli::try_parse_from(line).is_ok(), "{line:?}");
        }
        assert_eq!(
            Outer::value_variants().len(),
            espgw_bench::options::Outer::ALL.len()
        );
        let Command::Bench { outer, .. } = Cli::try_parse_from(["espgw", "bench"]).unwrap().command
        else {
            panic!("not bench");
        };
        assert_eq!(outer, Outer::Esp4, "the default");
    }

    #[test]
    fn bench_inner_names_are_the_ones_the_bench_parses() {
        for v in Inner::value_variants() {
            let name = v.to_possible_value().unwrap().get_name().to_string();
            let parsed = espgw_bench::options::parse_inner(&name)
                .unwrap_or_else(|e| panic!("--inner {name}: {e}"));
            assert_eq!(parsed.name(), name);
        }
        assert_eq!(
            Inner::value_variants().len(),
            espgw_bench::options::Inner::ALL.len()
        );
        assert!(Cli::try_parse_from(["espgw", "bench", "--inner", "ipx"]).is_err());
        let Command::Bench { inner, .. } = Cli::try_parse_from(["espgw", "bench"]).unwrap().command
        else {
            panic!("not bench");
        };
        assert_eq!(inner, Inner::Ipv4, "the default");
    }

    #[test]
    fn bench_logs_warnings_only_by_default_and_the_rest_info() {
        let filter = |args: &[&str]| {
            Cli::try_parse_from(args)
                .unwrap()
                .command
                .default_log_filter()
        };
        assert_eq!(filter(&["espgw", "bench"]), "warn");
        assert_eq!(filter(&["espgw", "check", "--config", "x.toml"]), "info");
        assert_eq!(filter(&["espgw", "run", "--config", "x.toml"]), "info");
    }
}

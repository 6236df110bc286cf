//! `espgw`: the command line over the espgw crates. The subcommands and
//! their options are a contract (docs/ARCHITECTURE.md, "command line").

mod cli;
mod cmd;
mod ctl;
mod host;

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    init_logging(cli.log.as_deref(), cli.command.default_log_filter());
    match cli.command {
        cli::Command::Check {
            config,
            probe_cores,
        } => cmd::check::run(&config, probe_cores),
        cli::Command::Keys {
            what:
                cli::Keys::Wireshark {
                    config,
                    socket,
                    ikev2,
                    esp_sa,
                },
        } => match (config, socket) {
            (Some(config), _) => cmd::keys::wireshark(&config),
            (None, Some(socket)) => {
                cmd::keys::wireshark_socket(&socket, ikev2.as_deref(), esp_sa.as_deref())
            }
            // clap requires one of the two.
            (None, None) => ExitCode::from(2),
        },
        cli::Command::Run {
            config,
            duration,
            stats_json,
        } => cmd::run::run(config, duration, stats_json),
        cli::Command::Bench {
            suite,
            sizes,
            direction,
            workers,
            tunnels,
            seconds,
            flows,
            persist_seq,
            spread_decrypt,
            spread_late,
            spread_wait_us,
            spread_parts,
            spread_recheck_ms,
            per_cpu_sas,
            outer,
            inner,
            max_simd_bitwidth,
            streaming_rx,
            no_ipsec_mb,
            tx_checksum_offload,
            json,
            svg,
        } => espgw_bench::cli::exit_code(&espgw_bench::cli::Args {
            suite,
            sizes,
            direction: clap::ValueEnum::to_possible_value(&direction)
                .map(|v| v.get_name().to_string()),
            workers,
            tunnels,
            seconds,
            flows,
            persist_seq,
            spread_decrypt,
            spread_late,
            spread_wait_us,
            spread_parts,
            spread_recheck_ms,
            per_cpu_sas,
            outer: clap::ValueEnum::to_possible_value(&outer).map(|v| v.get_name().to_string()),
            inner: clap::ValueEnum::to_possible_value(&inner).map(|v| v.get_name().to_string()),
            max_simd_bitwidth,
            streaming_rx,
            no_ipsec_mb,
            tx_checksum_offload,
            json,
            svg,
        }),
        cli::Command::Ctl { socket, command } => ctl::run(&socket, &command),
        cli::Command::Setup {
            config,
            dry_run,
            hugepages,
            root,
        } => cmd::setup::run(&config, dry_run, hugepages, root),
        cli::Command::Generate { what } => match what {
            cli::Generate::Man { out_dir } => cmd::generate::man(&out_dir),
            cli::Generate::Completions { shell } => cmd::generate::completions(shell),
        },
    }
}

/// Logs go to stderr: one line per state change (SA up, expiry, rekey,
/// link), never per packet and never a key.
fn init_logging(filter: Option<&str>, default_filter: &str) {
    use tracing_subscriber::EnvFilter;
    let filter = match filter {
        Some(f) => EnvFilter::new(f),
        None => {
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_filter))
        }
    };
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .init();
}

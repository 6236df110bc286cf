//! `espgw`: the command line over the espgw crates. The subcommands and
//! their options are a contract (docs/ARCHITECTURE.md, "command line").

mod cli;
mod cmd;
mod ctl;

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    match cli.command {
        cli::Command::Check { config } => cmd::check::run(&config),
        cli::Command::Keys {
            what: cli::Keys::Wireshark { config },
        } => cmd::keys::wireshark(&config),
        cli::Command::Run { .. } => cmd::not_implemented("run"),
        cli::Command::Bench { .. } => cmd::not_implemented("bench"),
        cli::Command::Ctl { socket, command } => ctl::run(&socket, &command),
    }
}

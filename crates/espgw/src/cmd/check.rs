//! `espgw check --config FILE`: report every problem, or summarize.

use std::path::Path;
use std::process::ExitCode;

use espgw_control::config::Summary;

use super::{print_diagnostics, EXIT_INVALID};

pub fn run(config: &Path) -> ExitCode {
    match espgw_control::load(config) {
        Ok((config, warnings)) => {
            print_diagnostics(&warnings);
            print!("{}", Summary(&config));
            ExitCode::SUCCESS
        }
        Err(diags) => {
            print_diagnostics(&diags);
            ExitCode::from(EXIT_INVALID)
        }
    }
}

//! `espgw run`: the data plane until SIGINT/SIGTERM or --duration.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use super::{print_diagnostics, EXIT_INVALID};

pub fn run(config: PathBuf, duration: Option<f64>, stats_json: Option<PathBuf>) -> ExitCode {
    let duration = match duration {
        Some(s) if !(s.is_finite() && s > 0.0) => {
            eprintln!("espgw run: --duration must be a positive number of seconds, got {s}");
            return ExitCode::from(EXIT_INVALID);
        }
        other => other.map(Duration::from_secs_f64),
    };
    let opts = espgw_dataplane::RunOptions {
        config,
        duration,
        stats_json,
    };
    match espgw_dataplane::run(&opts) {
        Ok(_) => ExitCode::SUCCESS,
        Err(espgw_dataplane::RunError::Config(diags)) => {
            print_diagnostics(&diags);
            ExitCode::from(EXIT_INVALID)
        }
        Err(e) => {
            eprintln!("espgw run: {e}");
            ExitCode::from(EXIT_INVALID)
        }
    }
}

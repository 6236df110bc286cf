//! `espgw run`: the data plane until SIGINT/SIGTERM or --duration.
//!
//! Exit status (docs/operations.md): 0 stopped by a signal or at the end of
//! `--duration`; 1 the config was rejected or the gateway could not start
//! (or stop cleanly); 70 (EX_SOFTWARE) a worker panicked and the gateway
//! stopped itself, so that its supervisor restarts it.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use espgw_dataplane::RunError;

use super::{print_diagnostics, EXIT_INVALID};

/// Exit status when a worker panicked (sysexits.h EX_SOFTWARE: an internal
/// software error): a bug, never the config's fault.
pub const EXIT_WORKER_PANIC: u8 = 70;

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
        Err(RunError::Config(diags)) => {
            print_diagnostics(&diags);
            ExitCode::from(EXIT_INVALID)
        }
        Err(e) => {
            eprintln!("espgw run: {e}");
            ExitCode::from(exit_status(&e))
        }
    }
}

/// The exit status for a run that failed with `e`.
fn exit_status(e: &RunError) -> u8 {
    match e {
        RunError::WorkerPanicked(_) => EXIT_WORKER_PANIC,
        _ => EXIT_INVALID,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use espgw_dataplane::WorkerPanic;

    #[test]
    fn a_worker_panic_exits_70_other_failures_1() {
        let panicked = RunError::WorkerPanicked(WorkerPanic {
            worker: 1,
            lcore: Some(2),
            message: "boom".into(),
        });
        assert_eq!(exit_status(&panicked), 70);
        assert_eq!(
            panicked.to_string(),
            "worker 1 (lcore 2) panicked: boom; the gateway stopped"
        );
        assert_eq!(exit_status(&RunError::Setup("no lcores".into())), 1);
    }
}

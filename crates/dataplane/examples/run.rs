//! `cargo run -p espgw-dataplane --example run -- CONFIG [SECS] [STATS.json]`:
//! the data plane without the CLI, for trying the runtime on its own.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let Some(config) = args.next() else {
        eprintln!("usage: run CONFIG [SECS] [STATS.json]");
        return ExitCode::from(2);
    };
    let duration = args
        .next()
        .and_then(|s| s.parse::<f64>().ok())
        .map(Duration::from_secs_f64);
    let stats_json = args.next().map(PathBuf::from);
    let opts = espgw_dataplane::RunOptions {
        config: config.into(),
        duration,
        stats_json,
    };
    match espgw_dataplane::run(&opts) {
        Ok(_) => ExitCode::SUCCESS,
        Err(espgw_dataplane::RunError::Config(diags)) => {
            for d in diags {
                eprintln!("{d}");
            }
            ExitCode::from(1)
        }
        Err(e) => {
            eprintln!("espgw run: {e}");
            ExitCode::from(1)
        }
    }
}

//! `espgw bench` without the espgw binary, same flags:
//!
//!     cargo run --release -p espgw-bench --example bench -- --suite aes128gcm16 --sizes 64,1420

use std::process::ExitCode;

fn main() -> ExitCode {
    let mut args = espgw_bench::cli::Args::default();
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let Some(value) = it.next() else {
            eprintln!("{flag}: missing value");
            return ExitCode::from(2);
        };
        let parsed: Result<(), String> = match flag.as_str() {
            "--suite" => {
                args.suite = Some(value);
                Ok(())
            }
            "--sizes" => {
                args.sizes = Some(value);
                Ok(())
            }
            "--direction" => {
                args.direction = Some(value);
                Ok(())
            }
            "--workers" => value
                .parse()
                .map(|n| args.workers = Some(n))
                .map_err(|e| format!("{e}")),
            "--seconds" => value
                .parse()
                .map(|s| args.seconds = Some(s))
                .map_err(|e| format!("{e}")),
            "--json" => {
                args.json = Some(value.into());
                Ok(())
            }
            "--svg" => {
                args.svg = Some(value.into());
                Ok(())
            }
            _ => Err("unknown flag".to_string()),
        };
        if let Err(e) = parsed {
            eprintln!("{flag}: {e}");
            return ExitCode::from(2);
        }
    }
    espgw_bench::cli::exit_code(&args)
}

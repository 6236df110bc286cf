//! `espgw keys wireshark --config FILE`: Wireshark esp_sa records.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use espgw_control::wireshark::esp_sa_lines;

use super::{print_diagnostics, EXIT_INVALID};

pub fn wireshark(path: &Path) -> ExitCode {
    let config = match espgw_control::load(path) {
        Ok((config, warnings)) => {
            print_diagnostics(&warnings);
            config
        }
        Err(diags) => {
            print_diagnostics(&diags);
            return ExitCode::from(EXIT_INVALID);
        }
    };
    let mut out = std::io::stdout().lock();
    let header = format!(
        "# Wireshark esp_sa records for {} (holds keys: keep it private).\n\
         # Save as ~/.config/wireshark/esp_sa and enable ESP decryption:\n\
         #   tshark -o esp.enable_encryption_decode:TRUE ...\n",
        path.display()
    );
    let mut result = out.write_all(header.as_bytes());
    for line in esp_sa_lines(&config) {
        result = result.and_then(|_| writeln!(out, "{}", line.as_str()));
    }
    match result.and_then(|_| out.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("espgw keys wireshark: {e}");
            ExitCode::FAILURE
        }
    }
}

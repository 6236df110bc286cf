//! `espgw check --config FILE`: report every problem, or summarize.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use espgw_control::config::Summary;

use super::{print_diagnostics, EXIT_INVALID};

pub fn run(config: &Path) -> ExitCode {
    match espgw_control::load(config) {
        Ok((config, warnings)) => {
            print_diagnostics(&warnings);
            // This machine against the config (PCI ports' drivers,
            // hugepages): warnings, since the config may be meant for
            // another machine.
            for w in crate::host::check_warnings(&config, &crate::host::Host::new("/")) {
                eprintln!("{w}");
            }
            // Through `write!`, not `print!`: a reader that stops early
            // (`espgw check ... | head`) is not a reason to panic.
            let _ = write!(std::io::stdout(), "{}", Summary(&config));
            // Which code each suite's ESP runs on this machine, at the
            // config's vector width.
            config.dataplane.apply_simd_width();
            let mut out = std::io::stdout().lock();
            if let Some(note) = espgw_esp::crypto::provider::simd_width_note() {
                let _ = writeln!(out, "{note}");
            }
            for suite in espgw_esp::Suite::ALL {
                let described = espgw_esp::crypto::provider::describe(suite);
                let _ = writeln!(out, "cipher {suite}: {described}");
            }
            ExitCode::SUCCESS
        }
        Err(diags) => {
            print_diagnostics(&diags);
            ExitCode::from(EXIT_INVALID)
        }
    }
}

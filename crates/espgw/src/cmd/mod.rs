//! One module per implemented subcommand.

pub mod check;
pub mod generate;
pub mod keys;
pub mod run;
pub mod setup;

use espgw_control::Diagnostic;

/// Exit status for a rejected config.
pub const EXIT_INVALID: u8 = 1;
/// Prints diagnostics to stderr, one per line, and a count.
pub fn print_diagnostics(diags: &[Diagnostic]) {
    for d in diags {
        eprintln!("{d}");
    }
    let errors = diags.iter().filter(|d| d.is_error()).count();
    if errors > 0 {
        let warnings = diags.len() - errors;
        eprintln!(
            "{errors} error{}, {warnings} warning{}",
            if errors == 1 { "" } else { "s" },
            if warnings == 1 { "" } else { "s" }
        );
    }
}

//! `espgw generate man --out-dir DIR` and `espgw generate completions
//! SHELL`: the man pages and shell completions, generated from the clap
//! definitions in cli.rs so that they never drift from the parser.
//! scripts/package.sh installs their output.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use clap::CommandFactory;
use clap_complete::Shell;

use crate::cli::Cli;

/// Writes espgw.1 and one page per subcommand (espgw-run.1, ...) into `dir`.
pub fn man(dir: &Path) -> ExitCode {
    let result =
        std::fs::create_dir_all(dir).and_then(|()| clap_mangen::generate_to(Cli::command(), dir));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("espgw generate man: {}: {e}", dir.display());
            ExitCode::FAILURE
        }
    }
}

/// Prints the completion script for `shell` to stdout.
pub fn completions(shell: Shell) -> ExitCode {
    let mut buf = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "espgw", &mut buf);
    match std::io::stdout().write_all(&buf) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("espgw generate completions: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn man_pages_cover_every_subcommand() {
        let dir = std::env::temp_dir().join(format!("espgw-man-{}", std::process::id()));
        assert_eq!(man(&dir), ExitCode::SUCCESS);
        for page in [
            "espgw.1",
            "espgw-run.1",
            "espgw-check.1",
            "espgw-setup.1",
            "espgw-ctl.1",
        ] {
            let text =
                std::fs::read_to_string(dir.join(page)).unwrap_or_else(|e| panic!("{page}: {e}"));
            assert!(
                text.starts_with(".ie") || text.contains(".TH"),
                "{page}: {text}"
            );
        }
        let run = std::fs::read_to_string(dir.join("espgw-run.1")).unwrap();
        assert!(run.contains("stats\\-json"), "{run}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn bash_completion_knows_the_subcommands() {
        let mut buf = Vec::new();
        clap_complete::generate(Shell::Bash, &mut Cli::command(), "espgw", &mut buf);
        let text = String::from_utf8(buf).unwrap();
        for word in ["run", "check", "setup", "--config", "--dry-run"] {
            assert!(text.contains(word), "{word}");
        }
    }
}

//! Diagnostics: what `espgw check` prints, one line per problem.
//!
//! Errors print as `FILE:LINE:COL: key.path: message (expected ...)` so
//! editors can jump to them; warnings carry a `warning: ` prefix. No
//! diagnostic ever quotes a key value: messages about keys state lengths only.

use core::fmt;
use std::path::PathBuf;

/// How bad a diagnostic is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    /// The config is rejected.
    Error,
    /// The config is accepted, but something looks wrong or unsafe.
    Warning,
}

/// One problem found in a config file (or in a key file it names).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    pub severity: Severity,
    /// The file the problem is in.
    pub file: PathBuf,
    /// 1-based line and column (in characters), when the problem has a place.
    pub position: Option<(usize, usize)>,
    /// Dotted key path, e.g. `tunnel[0].out.spi`; empty for whole-file problems.
    pub key: String,
    pub message: String,
    /// What would have been accepted, e.g. `20 bytes` or `one of: busy, adaptive`.
    pub expected: Option<String>,
    /// Byte offset in the file, used to sort diagnostics in file order.
    pub(crate) offset: usize,
}

impl Diagnostic {
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }

    /// The 1-based line, if the diagnostic has a position.
    pub fn line(&self) -> Option<usize> {
        self.position.map(|(line, _)| line)
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.severity == Severity::Warning {
            f.write_str("warning: ")?;
        }
        write!(f, "{}", self.file.display())?;
        if let Some((line, col)) = self.position {
            write!(f, ":{line}:{col}")?;
        }
        // A whole-file message reads as a sentence about the file:
        // "gateway.toml holds keys and is readable by group/others ...".
        let whole_file = self.position.is_none() && self.key.is_empty();
        f.write_str(if whole_file { " " } else { ": " })?;
        if !self.key.is_empty() {
            write!(f, "{}: ", self.key)?;
        }
        f.write_str(&self.message)?;
        if let Some(expected) = &self.expected {
            write!(f, " (expected {expected})")?;
        }
        Ok(())
    }
}

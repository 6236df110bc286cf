//! A config file's text and the mapping from byte offsets to line:column.

use std::path::{Path, PathBuf};
use zeroize::Zeroizing;

/// The text of one file. Zeroized on drop because config and key files
/// hold key material in hex.
pub(crate) struct SourceText {
    pub path: PathBuf,
    pub text: Zeroizing<String>,
    line_starts: Vec<usize>,
}

impl SourceText {
    pub fn new(path: &Path, text: String) -> Self {
        let line_starts = std::iter::once(0)
            .chain(text.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        SourceText {
            path: path.to_path_buf(),
            text: Zeroizing::new(text),
            line_starts,
        }
    }

    /// 1-based line and character column of a byte offset.
    pub fn line_col(&self, offset: usize) -> (usize, usize) {
        let offset = offset.min(self.text.len());
        let line = match self.line_starts.binary_search(&offset) {
            Ok(i) => i,
            Err(i) => i - 1,
        };
        let start = self.line_starts[line];
        let col = self
            .text
            .get(start..offset)
            .map_or(offset - start, |s| s.chars().count());
        (line + 1, col + 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_map_to_lines_and_char_columns() {
        let src = SourceText::new(Path::new("x"), "ab\nçd = 1\n\nz".into());
        assert_eq!(src.line_col(0), (1, 1));
        assert_eq!(src.line_col(1), (1, 2));
        assert_eq!(src.line_col(3), (2, 1));
        // 'ç' is two bytes but one column.
        assert_eq!(src.line_col(5), (2, 2));
        assert_eq!(src.line_col(11), (3, 1));
        assert_eq!(src.line_col(12), (4, 1));
        assert_eq!(src.line_col(999), (4, 2));
    }
}

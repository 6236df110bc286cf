//! A checked walk over toml's spanned document tree.
//!
//! serde's derive stops at the first error; `espgw check` must report every
//! error in a file. So sections are read field by field from the spanned
//! tree (`toml::de::DeTable`), and each wrong type, bad value, missing or
//! unknown key becomes one diagnostic while the walk goes on.

use std::collections::HashMap;
use std::ops::Range;
use std::str::FromStr;

use toml::de::{DeTable, DeValue};
use toml::Spanned;

use super::diag::{Diagnostic, Severity};
use super::source::SourceText;

pub(crate) type Node<'i> = Spanned<DeValue<'i>>;

/// Collects diagnostics for one file and remembers where each key path was
/// read, so later cross-checks can point at it.
pub(crate) struct Ctx<'s> {
    pub src: &'s SourceText,
    pub diags: Vec<Diagnostic>,
    spans: HashMap<String, Range<usize>>,
}

impl<'s> Ctx<'s> {
    pub fn new(src: &'s SourceText) -> Self {
        Ctx {
            src,
            diags: Vec::new(),
            spans: HashMap::new(),
        }
    }

    fn push(
        &mut self,
        severity: Severity,
        offset: Option<usize>,
        key: &str,
        message: String,
        expected: Option<String>,
    ) {
        self.diags.push(Diagnostic {
            severity,
            file: self.src.path.clone(),
            position: offset.map(|o| self.src.line_col(o)),
            key: key.to_string(),
            message,
            expected,
            offset: offset.unwrap_or(0),
        });
    }

    /// An error at a byte span.
    pub fn error_at(
        &mut self,
        span: &Range<usize>,
        key: &str,
        msg: impl Into<String>,
        expected: Option<&str>,
    ) {
        self.push(
            Severity::Error,
            Some(span.start),
            key,
            msg.into(),
            expected.map(str::to_string),
        );
    }

    /// An error at wherever `key` (or, failing that, its nearest parent) was read.
    pub fn error(&mut self, key: &str, msg: impl Into<String>, expected: Option<&str>) {
        let offset = self.offset_of(key);
        self.push(
            Severity::Error,
            offset,
            key,
            msg.into(),
            expected.map(str::to_string),
        );
    }

    /// A warning at wherever `key` was read.
    pub fn warn(&mut self, key: &str, msg: impl Into<String>) {
        let offset = self.offset_of(key);
        self.push(Severity::Warning, offset, key, msg.into(), None);
    }

    /// A whole-file warning with no position.
    pub fn warn_file(&mut self, msg: impl Into<String>) {
        self.push(Severity::Warning, None, "", msg.into(), None);
    }

    /// The 1-based line where `key` was read, for messages that point at
    /// another place ("shadowed by tunnel at line 12").
    pub fn line_of(&self, key: &str) -> Option<usize> {
        self.offset_of(key).map(|o| self.src.line_col(o).0)
    }

    /// Whether the file says `key` itself (not only a section above it).
    pub fn has_key(&self, key: &str) -> bool {
        self.spans.contains_key(key)
    }

    pub fn offset_of(&self, key: &str) -> Option<usize> {
        let mut k = key;
        loop {
            if let Some(span) = self.spans.get(k) {
                return Some(span.start);
            }
            // Walk up: `tunnel[0].out.spi` -> `tunnel[0].out` -> `tunnel[0]` -> `tunnel`.
            let cut = k.rfind(['.', '['])?;
            k = &k[..cut];
        }
    }

    fn remember(&mut self, key: &str, span: Range<usize>) {
        self.spans.entry(key.to_string()).or_insert(span);
    }
}

/// Joins a key path: `join("tunnel[0]", "out")` is `tunnel[0].out`.
pub(crate) fn join(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        key.to_string()
    } else {
        format!("{parent}.{key}")
    }
}

/// One table being read. Every key read is checked off; [`Table::finish`]
/// reports the rest as unknown keys.
pub(crate) struct Table<'n, 'i> {
    pub path: String,
    pub span: Range<usize>,
    map: &'n DeTable<'i>,
    allowed: &'static [&'static str],
}

impl<'n, 'i> Table<'n, 'i> {
    /// The document root.
    pub fn root(
        ctx: &mut Ctx,
        path: &str,
        doc: &'n Spanned<DeTable<'i>>,
        allowed: &'static [&'static str],
    ) -> Self {
        ctx.remember(path, doc.span());
        Table {
            path: path.to_string(),
            span: doc.span(),
            map: doc.get_ref(),
            allowed,
        }
    }

    /// Looks up a key allowed in this table.
    pub fn get(&self, ctx: &mut Ctx, key: &'static str) -> Option<Field<'n, 'i>> {
        debug_assert!(
            self.allowed.contains(&key),
            "{key} not declared for {}",
            self.path
        );
        let node = self.map.get(key)?;
        let path = join(&self.path, key);
        ctx.remember(&path, node.span());
        Some(Field { path, node })
    }

    /// Like [`Table::get`], but a missing key is an error at the table.
    pub fn require(
        &self,
        ctx: &mut Ctx,
        key: &'static str,
        expected: &str,
    ) -> Option<Field<'n, 'i>> {
        let field = self.get(ctx, key);
        if field.is_none() {
            ctx.error_at(
                &self.span,
                &join(&self.path, key),
                "missing required key",
                Some(expected),
            );
        }
        field
    }

    /// Reports every key not declared for this table.
    pub fn finish(self, ctx: &mut Ctx) {
        for (key, _) in self.map.iter() {
            let name = key.get_ref().as_ref();
            if !self.allowed.contains(&name) {
                let expected = format!("one of: {}", self.allowed.join(", "));
                ctx.error_at(
                    &key.span(),
                    &join(&self.path, name),
                    "unknown key",
                    Some(&expected),
                );
            }
        }
    }
}

/// One value in the document, with its key path.
#[derive(Clone)]
pub(crate) struct Field<'n, 'i> {
    pub path: String,
    pub node: &'n Node<'i>,
}

impl<'n, 'i> Field<'n, 'i> {
    pub fn span(&self) -> Range<usize> {
        self.node.span()
    }

    /// An error about this value.
    pub fn error(&self, ctx: &mut Ctx, msg: impl Into<String>, expected: Option<&str>) {
        ctx.error_at(&self.span(), &self.path, msg, expected);
    }

    fn wrong_type(&self, ctx: &mut Ctx, expected: &str) {
        let got = self.node.get_ref().type_str();
        self.error(ctx, format!("wrong type: got {got}"), Some(expected));
    }

    pub fn str(&self, ctx: &mut Ctx) -> Option<&'n str> {
        match self.node.get_ref() {
            DeValue::String(s) => Some(s.as_ref()),
            _ => {
                self.wrong_type(ctx, "a string");
                None
            }
        }
    }

    /// The string value, if it is one, without reporting anything.
    pub fn peek_str(&self) -> Option<&'n str> {
        match self.node.get_ref() {
            DeValue::String(s) => Some(s.as_ref()),
            _ => None,
        }
    }

    pub fn bool(&self, ctx: &mut Ctx) -> Option<bool> {
        match self.node.get_ref() {
            DeValue::Boolean(b) => Some(*b),
            _ => {
                self.wrong_type(ctx, "true or false");
                None
            }
        }
    }

    /// An integer within `min..=max`.
    pub fn int(&self, ctx: &mut Ctx, min: i128, max: i128) -> Option<i128> {
        let expected = format!("an integer in {min}..={max}");
        let DeValue::Integer(i) = self.node.get_ref() else {
            self.wrong_type(ctx, &expected);
            return None;
        };
        match i128::from_str_radix(i.as_str(), i.radix()) {
            Ok(v) if (min..=max).contains(&v) => Some(v),
            _ => {
                self.error(ctx, format!("{i} is out of range"), Some(&expected));
                None
            }
        }
    }

    /// Whether the value is an integer (for keys that take a number or a word).
    pub fn is_int(&self) -> bool {
        matches!(self.node.get_ref(), DeValue::Integer(_))
    }

    /// A string that must be one of `choices`.
    pub fn choice<T: Copy>(&self, ctx: &mut Ctx, choices: &[(&str, T)]) -> Option<T> {
        let expected = format!(
            "one of: {}",
            choices
                .iter()
                .map(|(n, _)| format!("{n:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        let DeValue::String(s) = self.node.get_ref() else {
            self.wrong_type(ctx, &expected);
            return None;
        };
        let found = choices
            .iter()
            .find(|(n, _)| *n == s.as_ref())
            .map(|(_, v)| *v);
        if found.is_none() {
            self.error(ctx, format!("unknown value {s:?}"), Some(&expected));
        }
        found
    }

    /// A string parsed by `parse`; its error message is reported as is.
    pub fn parse_with<T>(
        &self,
        ctx: &mut Ctx,
        expected: &str,
        parse: impl FnOnce(&str) -> Result<T, String>,
    ) -> Option<T> {
        let s = match self.node.get_ref() {
            DeValue::String(s) => s.as_ref(),
            _ => {
                self.wrong_type(ctx, expected);
                return None;
            }
        };
        match parse(s) {
            Ok(v) => Some(v),
            Err(msg) => {
                self.error(ctx, msg, Some(expected));
                None
            }
        }
    }

    /// A string parsed with [`FromStr`]; the value is quoted in the error.
    pub fn parse<T: FromStr>(&self, ctx: &mut Ctx, what: &str, expected: &str) -> Option<T> {
        self.parse_with(ctx, expected, |s| {
            s.parse().map_err(|_| format!("{s:?} is not {what}"))
        })
    }

    /// The items of an array.
    pub fn array(&self, ctx: &mut Ctx, expected: &str) -> Option<Vec<Field<'n, 'i>>> {
        let DeValue::Array(items) = self.node.get_ref() else {
            self.wrong_type(ctx, expected);
            return None;
        };
        let items = items
            .iter()
            .enumerate()
            .map(|(i, node)| {
                let path = format!("{}[{i}]", self.path);
                ctx.remember(&path, node.span());
                Field { path, node }
            })
            .collect();
        Some(items)
    }

    /// Either one value or an array of them (`address = "a"` or `["a", "b"]`).
    pub fn one_or_many(&self, ctx: &mut Ctx, expected: &str) -> Vec<Field<'n, 'i>> {
        match self.node.get_ref() {
            DeValue::Array(_) => self.array(ctx, expected).unwrap_or_default(),
            _ => vec![self.clone()],
        }
    }

    /// A (sub)table with the given keys.
    pub fn table(&self, ctx: &mut Ctx, allowed: &'static [&'static str]) -> Option<Table<'n, 'i>> {
        let DeValue::Table(map) = self.node.get_ref() else {
            self.wrong_type(ctx, "a table");
            return None;
        };
        Some(Table {
            path: self.path.clone(),
            span: self.node.span(),
            map,
            allowed,
        })
    }
}

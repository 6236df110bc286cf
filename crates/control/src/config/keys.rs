//! Reading SA keys: inline hex in the config or a separate key file.
//!
//! A key file (`key_file = "keys/tun1.toml"`, relative to the config file)
//! holds only secrets, so the config itself can be shared and versioned:
//!
//! ```toml
//! [out]
//! key = "0x..."        # plus auth_key for CBC+HMAC suites
//! [in]
//! key = "0x..."
//! ```
//!
//! SPIs stay in the config. A key may come from one place only.

use std::path::Path;

use espgw_esp::Suite;
use toml::de::DeTable;

use super::diag::Diagnostic;
use super::perms;
use super::reader::{Ctx, Table};
use super::source::SourceText;
use super::HostFacts;
use espgw_esp::SecretBytes;

const KEY_FILE_KEYS: &[&str] = &["out", "in"];
const KEY_FILE_DIR_KEYS: &[&str] = &["key", "auth_key"];

/// The keys of one SA direction, as far as they were given.
#[derive(Default)]
pub(crate) struct DirKeys {
    pub key: Option<SecretBytes>,
    pub auth_key: Option<SecretBytes>,
}

impl DirKeys {
    pub fn any(&self) -> bool {
        self.key.is_some() || self.auth_key.is_some()
    }
}

/// What the suite wants for `key` or `auth_key`, in words.
fn describe_len(suite: Suite, auth: bool) -> String {
    if auth {
        format!("{} bytes", suite.auth_key_len())
    } else if suite.is_aead() {
        format!(
            "{} bytes: {}-byte key + 4-byte salt",
            suite.key_len(),
            suite.key_len() - 4
        )
    } else {
        format!("{} bytes", suite.key_len())
    }
}

/// Reads `key` and `auth_key` from a direction table and checks their
/// lengths against the suite (when the suite is known). Returns the keys
/// and whether everything given was valid.
pub(crate) fn read_dir_keys(ctx: &mut Ctx, t: &Table, suite: Option<Suite>) -> (DirKeys, bool) {
    let mut ok = true;
    let mut keys = DirKeys::default();
    for (name, auth) in [("key", false), ("auth_key", true)] {
        let Some(f) = t.get(ctx, name) else { continue };
        // Never echo the value: parse errors name a position only.
        let Some(bytes) = f.parse_with(
            ctx,
            "hex bytes, e.g. \"0x0011..\" or \"00:11:..\"",
            SecretBytes::from_hex,
        ) else {
            ok = false;
            continue;
        };
        if let Some(suite) = suite {
            let want = if auth {
                suite.auth_key_len()
            } else {
                suite.key_len()
            };
            if auth && want == 0 {
                f.error(
                    ctx,
                    format!("{suite} is an AEAD suite and takes no auth_key"),
                    Some("no auth_key"),
                );
                ok = false;
                continue;
            }
            if bytes.len() != want {
                f.error(
                    ctx,
                    format!("wrong length for {suite}: got {} bytes", bytes.len()),
                    Some(&describe_len(suite, auth)),
                );
                ok = false;
                continue;
            }
        }
        if auth {
            keys.auth_key = Some(bytes);
        } else {
            keys.key = Some(bytes);
        }
    }
    (keys, ok)
}

/// The result of reading one key file.
pub(crate) struct KeyFile {
    pub out: DirKeys,
    pub inn: DirKeys,
    /// False when the file had errors (they are in `diags`).
    pub ok: bool,
    pub diags: Vec<Diagnostic>,
    /// The file could not be read at all.
    pub io_error: Option<String>,
}

/// Reads a key file; `tunnel_path` (`tunnel[0]`) prefixes its key paths.
/// Key files are a few hundred bytes: anything larger is not one.
pub(crate) const MAX_KEY_FILE: u64 = 64 * 1024;

/// Reads a key file that is a regular file of at most [`MAX_KEY_FILE`]
/// bytes: `/dev/zero`, a FIFO or a huge file is refused, never read until
/// memory runs out or forever (found by the config fuzz harness).
pub(crate) fn read_small_regular_file(path: &Path) -> Result<String, String> {
    use std::io::Read;
    let file = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let meta = file.metadata().map_err(|e| e.to_string())?;
    if !meta.is_file() {
        return Err("not a regular file".to_string());
    }
    let mut bytes = Vec::new();
    file.take(MAX_KEY_FILE + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| e.to_string())?;
    if bytes.len() as u64 > MAX_KEY_FILE {
        return Err(format!("larger than {MAX_KEY_FILE} bytes: not a key file"));
    }
    String::from_utf8(bytes).map_err(|_| "not UTF-8 text".to_string())
}

pub(crate) fn read_key_file(
    path: &Path,
    tunnel_path: &str,
    suite: Option<Suite>,
    host: &HostFacts,
) -> KeyFile {
    let mut result = KeyFile {
        out: DirKeys::default(),
        inn: DirKeys::default(),
        ok: false,
        diags: Vec::new(),
        io_error: None,
    };
    let text = match read_small_regular_file(path) {
        Ok(text) => text,
        Err(e) => {
            result.io_error = Some(e);
            return result;
        }
    };
    let src = SourceText::new(path, text);
    let mut ctx = Ctx::new(&src);
    let (doc, syntax) = DeTable::parse_recoverable(&src.text);
    for e in &syntax {
        let span = e.span().unwrap_or(0..0);
        ctx.error_at(&span, "", format!("TOML syntax: {}", e.message()), None);
    }
    if syntax.is_empty() {
        let root = Table::root(&mut ctx, tunnel_path, &doc, KEY_FILE_KEYS);
        let mut ok = true;
        for (name, slot) in [("out", &mut result.out), ("in", &mut result.inn)] {
            let Some(f) = root.get(&mut ctx, name) else {
                continue;
            };
            let Some(t) = f.table(&mut ctx, KEY_FILE_DIR_KEYS) else {
                ok = false;
                continue;
            };
            let (keys, keys_ok) = read_dir_keys(&mut ctx, &t, suite);
            t.finish(&mut ctx);
            ok &= keys_ok;
            *slot = keys;
        }
        root.finish(&mut ctx);
        result.ok = ok && !ctx.diags.iter().any(Diagnostic::is_error);
    }
    if host.check_permissions {
        perms::warn_if_unsafe(&mut ctx, path, perms::Holds::Keys);
    }
    result.diags = ctx.diags;
    result
}

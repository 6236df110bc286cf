//! The unsafe boundary of the workspace, checked rather than trusted: the
//! compiler enforces `unsafe_code = "forbid"` in every member that takes the
//! workspace lints, and this test makes sure that every member does, except
//! the few listed below, and that `#[allow(unsafe_code)]` appears only where
//! this list says. A new crate without `[lints] workspace = true`, or a new
//! `allow`, fails here until the list (and the review) agree.

use std::path::{Path, PathBuf};

/// Members that do not take the workspace lints, and the level they set.
const EXCEPTIONS: &[(&str, &str)] = &[
    // The FFI boundary.
    ("dpdk/dpdk-sys", "allow"),
    ("dpdk/dpdk", "allow"),
    ("dpdk/ipsec-mb", "allow"),
    // deny, so that its x86_64 module (the #[target_feature] calls) can allow.
    ("crates/aesgcm", "deny"),
    // deny, for the test allocator and two bench clocks (src/lib.rs forbids).
    ("crates/esp", "deny"),
];

/// The only files that may carry `#[allow(unsafe_code)]`, and how many.
const ALLOWS: &[(&str, usize)] = &[
    ("crates/aesgcm/src/lib.rs", 1),
    ("crates/esp/tests/no_alloc.rs", 1),
    ("crates/esp/benches/esp.rs", 1),
    ("crates/esp/benches/aead.rs", 1),
];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The `members = [..]` of the root Cargo.toml.
fn members() -> Vec<String> {
    let text = read(&root().join("Cargo.toml"));
    let start = text.find("members = [").expect("workspace members") + "members = [".len();
    let end = start + text[start..].find(']').expect("end of members");
    text[start..end]
        .split(',')
        .map(|m| m.trim().trim_matches('"').to_string())
        .filter(|m| !m.is_empty())
        .collect()
}

/// The lines of `toml` after the header `table`, up to the next header.
fn table<'a>(toml: &'a str, table: &str) -> Option<Vec<&'a str>> {
    let mut lines = toml.lines().skip_while(|l| l.trim() != table);
    lines.next()?;
    Some(
        lines
            .take_while(|l| !l.trim_start().starts_with('['))
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .collect(),
    )
}

#[test]
fn the_workspace_forbids_unsafe_code() {
    let root_toml = read(&root().join("Cargo.toml"));
    let lints = table(&root_toml, "[workspace.lints.rust]").expect("[workspace.lints.rust]");
    assert!(lints.contains(&r#"unsafe_code = "forbid""#), "{lints:?}");
}

#[test]
fn every_member_takes_the_workspace_lints_or_is_a_listed_exception() {
    let members = members();
    assert!(members.len() >= 10, "{members:?}");
    for member in &members {
        let toml = read(&root().join(member).join("Cargo.toml"));
        match EXCEPTIONS.iter().find(|(m, _)| m == member) {
            None => assert_eq!(
                table(&toml, "[lints]"),
                Some(vec!["workspace = true"]),
                "{member}: add `[lints] workspace = true` to its Cargo.toml"
            ),
            Some((_, level)) => {
                let rust = table(&toml, "[lints.rust]").unwrap_or_default();
                let want = format!(r#"unsafe_code = "{level}""#);
                assert!(rust.contains(&want.as_str()), "{member}: {rust:?}");
            }
        }
    }
    for (exception, _) in EXCEPTIONS {
        assert!(members.iter().any(|m| m == exception), "{exception}");
    }
}

/// Crates whose lints are `deny` for a test or bench, while their library
/// forbids `unsafe` in its root.
const LIBRARY_FORBIDS: &[&str] = &["crates/esp/src/lib.rs"];

#[test]
fn libraries_with_deny_lints_forbid_unsafe_in_their_root() {
    for lib in LIBRARY_FORBIDS {
        let text = read(&root().join(lib));
        assert!(text.contains("#![forbid(unsafe_code)]"), "{lib}");
    }
}

#[test]
fn allow_unsafe_code_appears_only_where_listed() {
    let mut found = Vec::new();
    for dir in ["crates", "dpdk"] {
        walk(&root().join(dir), &mut |path, text| {
            let n = text.matches("allow(unsafe_code)").count();
            if n > 0 {
                let rel = path
                    .strip_prefix(root())
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                found.push((rel, n));
            }
        });
    }
    found.sort();
    let mut want: Vec<_> = ALLOWS.iter().map(|(p, n)| (p.to_string(), *n)).collect();
    want.sort();
    // This file names the attribute in its own text.
    found.retain(|(p, _)| p != "crates/espgw/tests/unsafe_boundary.rs");
    assert_eq!(found, want);
}

/// Calls `f` with every .rs file under `dir`, skipping build output and the
/// fuzz projects (outside the workspace).
fn walk(dir: &Path, f: &mut dyn FnMut(&Path, &str)) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy();
        if path.is_dir() {
            if name != "target" && name != "fuzz" && !name.starts_with('.') {
                walk(&path, f);
            }
        } else if name.ends_with(".rs") {
            f(&path, &read(&path));
        }
    }
}

//! The skip rule of scripts/skip.bash for Rust tests, written once and
//! included by path (`#[path = ".../tests/support/skip.rs"] mod skip_rule;`)
//! by the test binaries that can only run part of their work on some
//! machines (root for DPDK, a CPU feature).

use std::io::Write;

/// True when this process runs with effective UID 0 (what DPDK, network
/// namespaces and hugepages need).
#[allow(dead_code)]
pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).map(|euid| euid == "0"))
        })
        .unwrap_or(false)
}

/// Says that `what` did not run and why: SKIPPED on stderr, and a line in
/// `$ESPGW_SKIP_LOG` (scripts/test.sh lists them in its summary). For a
/// machine the project runs on that lacks what the case needs (a CPU
/// feature): never a failure.
#[allow(dead_code)]
pub fn record_skip(what: &str, reason: &str) {
    eprintln!("SKIPPED: {what}: {reason}");
    if let Some(log) = std::env::var_os("ESPGW_SKIP_LOG") {
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(log)
        {
            let _ = writeln!(f, "{what}: {reason}");
        }
    }
}

/// A sub-case that cannot run in this environment (not root): recorded as
/// [`record_skip`] does, and a failure where skips are not allowed:
/// `ESPGW_NO_SKIP=1` (CI), or `CI=true` unless `ESPGW_NO_SKIP=0` (the rule
/// of scripts/skip.bash).
#[allow(dead_code)]
pub fn skip(what: &str, reason: &str) {
    record_skip(what, reason);
    let allowed = match std::env::var("ESPGW_NO_SKIP").as_deref() {
        Ok("1") => false,
        Ok("0") => true,
        _ => std::env::var("CI").as_deref() != Ok("true"),
    };
    assert!(
        allowed,
        "{what} skipped ({reason}), and skips are not allowed here (ESPGW_NO_SKIP=1 or CI=true)"
    );
}

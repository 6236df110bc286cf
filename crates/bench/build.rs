//! Records the commit the bench was built from (`ESPGW_BUILD_COMMIT`), so
//! that a result says which code measured it: the checkout a binary runs
//! from may be at another commit (before/after runs of two builds).

use std::process::Command;

fn main() {
    // Rebuilt when HEAD moves (a commit, a checkout).
    for path in [
        "../../.git/HEAD",
        "../../.git/refs/heads",
        "../../.git/packed-refs",
    ] {
        println!("cargo:rerun-if-changed={path}");
    }
    println!("cargo:rerun-if-changed=build.rs");
    let commit = Command::new("git")
        .args(["rev-parse", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    println!("cargo:rustc-env=ESPGW_BUILD_COMMIT={commit}");
}

//! Records the commit the bench was built from (`ESPGW_BUILD_COMMIT`), so
//! that a result says which code measured it: the checkout a binary runs
//! from may be at another commit (before/after runs of two builds).

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    Command::new("git")
        .args(args)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    // Rebuilt when HEAD moves (a commit, a checkout): the files that say
    // where it is, wherever this checkout keeps them (a worktree's HEAD is
    // in its own git dir, the branches in the common one).
    if let (Some(dir), Some(common)) = (
        git(&["rev-parse", "--absolute-git-dir"]),
        git(&["rev-parse", "--git-common-dir"]),
    ) {
        let common = if std::path::Path::new(&common).is_absolute() {
            common
        } else {
            format!(
                "{}/{common}",
                std::env::current_dir().unwrap_or_default().display()
            )
        };
        for path in [
            format!("{dir}/HEAD"),
            format!("{common}/refs/heads"),
            format!("{common}/packed-refs"),
        ] {
            if std::path::Path::new(&path).exists() {
                println!("cargo:rerun-if-changed={path}");
            }
        }
    }
    let commit = git(&["rev-parse", "HEAD"]).unwrap_or_default();
    println!("cargo:rustc-env=ESPGW_BUILD_COMMIT={commit}");
}

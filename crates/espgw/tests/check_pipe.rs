//! `espgw check ... | head`: a reader that goes away early is not a panic.

use std::process::{Command, Stdio};

#[test]
fn check_into_a_closed_pipe_does_not_panic() {
    let (reader, writer) = std::io::pipe().expect("pipe");
    drop(reader); // every write to the pipe now fails with EPIPE
    let config = concat!(env!("CARGO_MANIFEST_DIR"), "/../../gateway.toml");
    let out = Command::new(env!("CARGO_BIN_EXE_espgw"))
        .args(["check", "--config", config])
        .stdout(Stdio::from(writer))
        .stderr(Stdio::piped())
        .output()
        .expect("espgw runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(out.status.success(), "{:?}: {stderr}", out.status);
}

//! `espgw keys wireshark --config FILE`: Wireshark esp_sa records of a
//! config's tunnels; `--socket PATH`: a running gateway's IKE SAs
//! (ikev2_decryption_table records) and SAs (esp_sa records, CHILD_SAs
//! included), read over the control socket.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use espgw_control::wireshark::esp_sa_lines;

use super::{print_diagnostics, EXIT_INVALID};

pub fn wireshark(path: &Path) -> ExitCode {
    let config = match espgw_control::load(path) {
        Ok((config, warnings)) => {
            print_diagnostics(&warnings);
            config
        }
        Err(diags) => {
            print_diagnostics(&diags);
            return ExitCode::from(EXIT_INVALID);
        }
    };
    let mut out = std::io::stdout().lock();
    let header = format!(
        "# Wireshark esp_sa records for {} (holds keys: keep it private).\n\
         # Save as ~/.config/wireshark/esp_sa and enable ESP decryption:\n\
         #   tshark -o esp.enable_encryption_decode:TRUE ...\n",
        path.display()
    );
    let mut result = out.write_all(header.as_bytes());
    for line in esp_sa_lines(&config) {
        result = result.and_then(|_| writeln!(out, "{}", line.as_str()));
    }
    match result.and_then(|_| out.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("espgw keys wireshark: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Writes `lines` to `path`, created with mode 0600 (it holds keys).
fn write_private(path: &Path, header: &str, lines: &[String]) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    f.write_all(header.as_bytes())?;
    for l in lines {
        writeln!(f, "{l}")?;
    }
    f.flush()
}

pub fn wireshark_socket(socket: &Path, ikev2: Option<&Path>, esp_sa: Option<&Path>) -> ExitCode {
    let fail = |e: &dyn std::fmt::Display| {
        eprintln!("espgw keys wireshark: {e}");
        ExitCode::FAILURE
    };
    let reply = match espgw_control::live::client::keys_wireshark(socket) {
        Ok(r) => r,
        Err(e) => return fail(&e),
    };
    for spi in &reply.ikev2_skipped {
        eprintln!(
            "espgw keys wireshark: IKE SA {spi} uses ChaCha20-Poly1305, which Wireshark's IKEv2 table does not take: skipped"
        );
    }
    let esp_header = format!(
        "# Wireshark esp_sa records of the gateway at {} (holds keys: keep it private).\n\
         # Save as ~/.config/wireshark/esp_sa; tshark -o esp.enable_encryption_decode:TRUE ...\n",
        socket.display()
    );
    let ike_header = "# Wireshark ikev2_decryption_table records (holds keys: keep it private).\n\
                      # Save as ~/.config/wireshark/ikev2_decryption_table.\n";
    let mut result = match esp_sa {
        Some(p) => write_private(p, &esp_header, &reply.esp_sa),
        None => {
            let mut out = std::io::stdout().lock();
            let mut r = out.write_all(esp_header.as_bytes());
            for l in &reply.esp_sa {
                r = r.and_then(|_| writeln!(out, "{l}"));
            }
            r.and_then(|_| out.flush())
        }
    };
    result = result.and_then(|_| match ikev2 {
        Some(p) => write_private(p, ike_header, &reply.ikev2),
        None => {
            let mut out = std::io::stdout().lock();
            let mut r = out.write_all(ike_header.as_bytes());
            for l in &reply.ikev2 {
                r = r.and_then(|_| writeln!(out, "{l}"));
            }
            r.and_then(|_| out.flush())
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(&e),
    }
}

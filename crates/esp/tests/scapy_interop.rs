//! Round trips against an independent ESP implementation: scapy's IPsec layer
//! (tests/scapy_peer.py). For every suite, with and without ESN, IPv4 and
//! IPv6 outer and inner, plain and UDP-encapsulated ESP, and inner payloads
//! of 0 to 1500 bytes:
//!   (a) scapy encrypts, espgw must decap to the exact inner packet;
//!   (b) espgw encaps, scapy must decrypt to the exact inner packet.
//! ESN cases use sequence numbers above 2^32 so the high bits matter.
//!
//! Needs python3 with scapy and cryptography (`pip install scapy cryptography`);
//! set ESPGW_PYTHON to use another interpreter. Missing scapy is a failure,
//! not a skip.

mod common;

use std::path::PathBuf;
use std::process::Command;

use common::*;
use espgw_esp::{Suite, Verdict};
use espgw_wire::{PacketBuf, VecBuf};
use serde_json::{json, Value};

const SIZES: [usize; 9] = [0, 1, 15, 16, 17, 100, 1000, 1400, 1500];

struct Case {
    suite: Suite,
    esn: bool,
    outer_v6: bool,
    inner_v6: bool,
    udp: bool,
    size: usize,
    seq: u64,
}

impl Case {
    fn name(&self) -> String {
        format!(
            "{} esn={} outer={} inner={} udp={} size={} seq={:#x}",
            self.suite,
            self.esn,
            if self.outer_v6 { "v6" } else { "v4" },
            if self.inner_v6 { "v6" } else { "v4" },
            self.udp,
            self.size,
            self.seq
        )
    }
}

fn cases() -> Vec<Case> {
    let mut out = Vec::new();
    let mut n = 0u64;
    for suite in Suite::ALL {
        for esn in [false, true] {
            for outer_v6 in [false, true] {
                for inner_v6 in [false, true] {
                    for udp in [false, true] {
                        for size in SIZES {
                            n += 1;
                            // With ESN, start above 2^32 so the high half is non-zero.
                            let seq = if esn { (3 << 32) | (n * 977) } else { n * 977 };
                            out.push(Case {
                                suite,
                                esn,
                                outer_v6,
                                inner_v6,
                                udp,
                                size,
                                seq,
                            });
                        }
                    }
                }
            }
        }
    }
    out
}

fn python() -> String {
    std::env::var("ESPGW_PYTHON").unwrap_or_else(|_| "python3".into())
}

fn require_scapy() {
    let probe = Command::new(python())
        .args(["-c", "import scapy.layers.ipsec, cryptography"])
        .output();
    match probe {
        Ok(o) if o.status.success() => {}
        Ok(o) => panic!(
            "scapy_interop needs python3 with scapy and cryptography \
             (pip install scapy cryptography): {}",
            String::from_utf8_lossy(&o.stderr)
        ),
        Err(e) => panic!("scapy_interop cannot run {}: {e}", python()),
    }
}

fn task(
    case: &Case,
    cfg: &espgw_esp::SaConfig,
    src: std::net::IpAddr,
    dst: std::net::IpAddr,
) -> Value {
    json!({
        "suite": case.suite.name(),
        "spi": cfg.spi,
        "key": hex(cfg.key.expose()),
        "auth_key": hex(cfg.auth_key.expose()),
        "esn": case.esn,
        "seq": case.seq,
        "udp": case.udp,
        "outer_src": src.to_string(),
        "outer_dst": dst.to_string(),
    })
}

fn run_peer(request: &Value) -> Value {
    let dir = std::env::temp_dir().join(format!("espgw-scapy-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (req, resp) = (dir.join("request.json"), dir.join("response.json"));
    std::fs::write(&req, request.to_string()).unwrap();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/scapy_peer.py");
    let out = Command::new(python())
        .arg(script)
        .arg(&req)
        .arg(&resp)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "scapy_peer.py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&std::fs::read(&resp).unwrap()).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    v
}

#[test]
fn scapy_and_espgw_interoperate() {
    require_scapy();
    let cases = cases();
    let mut rng = Rng(0x5eed_1234_abcd_0001);
    let mut failures = Vec::new();

    // Per case: the SA seen from the gateway, the inner packet, and for (b)
    // what espgw encapped.
    let mut encrypt_tasks = Vec::new();
    let mut decrypt_tasks = Vec::new();
    let mut prepared = Vec::new();
    for case in &cases {
        let cfg = config(case.suite, case.esn, case.outer_v6, case.udp, &mut rng);
        let inner = inner_packet(case.inner_v6, &rng.bytes(case.size));

        // (a) scapy is the peer sending to us: remote -> local.
        let mut t = task(case, &cfg, cfg.remote, cfg.local);
        t["inner"] = json!(hex(&inner));
        encrypt_tasks.push(t);

        // (b) we send to the peer: local -> remote.
        let out = espgw_esp::OutboundSa::new(&cfg, 0)
            .unwrap()
            .starting_after(case.seq - 1);
        let mut bufs = [VecBuf::from_packet(&inner)];
        let mut verdicts = [Verdict::default()];
        out.encap_burst(&mut bufs, &mut verdicts, 0);
        assert_eq!(verdicts, [Verdict::Forward], "encap {}", case.name());
        let mut t = task(case, &cfg, cfg.local, cfg.remote);
        t["outer"] = json!(hex(bufs[0].data()));
        decrypt_tasks.push(t);

        prepared.push((cfg, inner));
    }

    let response = run_peer(&json!({"encrypt": encrypt_tasks, "decrypt": decrypt_tasks}));
    let encrypted = response["encrypt"].as_array().unwrap();
    let decrypted = response["decrypt"].as_array().unwrap();
    assert_eq!(encrypted.len(), cases.len());
    assert_eq!(decrypted.len(), cases.len());

    for (i, case) in cases.iter().enumerate() {
        let (cfg, inner) = &prepared[i];
        // (a) espgw decaps what scapy encrypted.
        match encrypted[i]["outer"].as_str() {
            None => failures.push(format!("scapy encrypt {}: {}", case.name(), encrypted[i])),
            Some(outer) => {
                let sa = espgw_esp::InboundSa::new(cfg, 0)
                    .unwrap()
                    .starting_after(case.seq - 1);
                let mut bufs = [VecBuf::from_packet(&unhex(outer))];
                let mut verdicts = [Verdict::default()];
                sa.decap_burst(&mut bufs, &mut verdicts, 0);
                if verdicts != [Verdict::Forward] {
                    failures.push(format!("espgw decap {}: {:?}", case.name(), verdicts[0]));
                } else if bufs[0].data() != &inner[..] {
                    failures.push(format!("espgw decap {}: inner differs", case.name()));
                }
            }
        }
        // (b) scapy decrypts what espgw encapped.
        match decrypted[i]["inner"].as_str() {
            None => failures.push(format!("scapy decrypt {}: {}", case.name(), decrypted[i])),
            Some(got) => {
                if unhex(got) != *inner {
                    failures.push(format!("scapy decrypt {}: inner differs", case.name()));
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} interop checks failed:\n{}",
        failures.len(),
        2 * cases.len(),
        failures.join("\n")
    );
}

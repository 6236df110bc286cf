//! `espgw keys wireshark` checked against Wireshark itself: packets that
//! scapy encrypts with a config's SAs must decrypt in tshark when tshark is
//! given exactly the esp_sa lines espgw printed.

use std::path::{Path, PathBuf};
use std::process::Command;

struct Sa {
    local: String,
    remote: String,
    spi: u32,
    scapy_crypt: &'static str,
    key: String,
    scapy_auth: &'static str,
    auth_key: Option<String>,
}

fn hex(byte: u8, len: usize) -> String {
    (0..len)
        .map(|i| format!("{:02x}", byte.wrapping_add(i as u8)))
        .collect()
}

/// A config with one tunnel per suite Wireshark 4.0 can decrypt, and the
/// outbound SAs scapy will encrypt with.
fn config() -> (String, Vec<Sa>) {
    // (suite, scapy cipher, key bytes, scapy auth, auth key bytes, outer IPv6)
    let suites = [
        ("aes128gcm16", "AES-GCM", 20, "", 0, false),
        ("aes256gcm16", "AES-GCM", 36, "", 0, false),
        ("aes128-sha256", "AES-CBC", 16, "SHA2-256-128", 32, false),
        ("aes256-sha256", "AES-CBC", 32, "SHA2-256-128", 32, false),
        ("aes128-sha1", "AES-CBC", 16, "HMAC-SHA1-96", 20, false),
        ("aes128gcm16", "AES-GCM", 20, "", 0, true),
    ];
    let mut text = String::from(
        "[[port]]\nname = \"p\"\nside = \"protected\"\ndevice = \"net_ring0\"\naddress = \"10.1.0.1/24\"\n\n\
         [[port]]\nname = \"u\"\nside = \"unprotected\"\ndevice = \"net_ring1\"\naddress = [\"192.0.2.1/24\", \"2001:db8::1/64\"]\n",
    );
    let mut sas = Vec::new();
    for (i, (suite, crypt, key_len, auth, auth_len, v6)) in suites.into_iter().enumerate() {
        let i = i as u8;
        let (local, remote) = if v6 {
            ("2001:db8::1".to_string(), format!("2001:db8::{}", 10 + i))
        } else {
            ("192.0.2.1".to_string(), format!("192.0.2.{}", 10 + i))
        };
        let spi = 0x1000 + u32::from(i);
        let key = hex(0x10 * (i + 1), key_len);
        let auth_key = (auth_len > 0).then(|| hex(0x80 + i, auth_len));
        let auth_kv = auth_key
            .as_ref()
            .map_or(String::new(), |k| format!(", auth_key = \"{k}\""));
        // The in SA is not used here, but needs a key of its own.
        let in_key = hex(0x10 * (i + 1) + 1, key_len);
        text += &format!(
            "\n[[tunnel]]\nname = \"t{i}\"\nlocal = \"{local}\"\nremote = \"{remote}\"\n\
             local_ts = [\"10.1.0.0/24\"]\nremote_ts = [\"10.{}.0.0/16\"]\nesp = \"{suite}\"\n\
             out = {{ spi = {spi}, key = \"{key}\"{auth_kv} }}\nin = {{ spi = {}, key = \"{in_key}\"{auth_kv} }}\n",
            20 + i,
            spi + 0x100,
        );
        sas.push(Sa {
            local,
            remote,
            spi,
            scapy_crypt: crypt,
            key,
            scapy_auth: auth,
            auth_key,
        });
    }
    (text, sas)
}

fn temp_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("espgw-wireshark-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("home/.config/wireshark")).unwrap();
    dir
}

fn require_tool(name: &str, arg: &str) {
    let ok = Command::new(name)
        .arg(arg)
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(ok, "this test needs `{name}` (apt-get install tshark python3-scapy, or pip install scapy); `{name} {arg}` failed");
}

/// The decrypted ICMP payloads tshark shows, with `home` as its config home.
fn tshark_payloads(pcap: &Path, home: &Path) -> String {
    let out = Command::new("tshark")
        .env("HOME", home)
        .env_remove("XDG_CONFIG_HOME")
        .args(["-r"])
        .arg(pcap)
        .args([
            "-o",
            "esp.enable_encryption_decode:TRUE",
            "-T",
            "fields",
            "-e",
            "data.data",
        ])
        .output()
        .expect("run tshark");
    assert!(
        out.status.success(),
        "tshark failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn tshark_decrypts_with_the_printed_esp_sa_lines() {
    require_tool("tshark", "--version");
    require_tool("python3", "--version");
    let scapy = Command::new("python3")
        .args(["-c", "import scapy.layers.ipsec"])
        .status();
    assert!(
        scapy.is_ok_and(|s| s.success()),
        "this test needs scapy for python3 (pip install scapy)"
    );

    let dir = temp_dir();
    let (text, sas) = config();
    let config_path = dir.join("gw.toml");
    std::fs::write(&config_path, text).unwrap();

    let out = Command::new(env!("CARGO_BIN_EXE_espgw"))
        .args(["keys", "wireshark", "--config"])
        .arg(&config_path)
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let records: Vec<&str> = stdout.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(records.len(), 2 * sas.len(), "{stdout}");
    let v6 = sas.last().unwrap();
    assert!(
        records[2 * sas.len() - 2]
            .starts_with(&format!("\"IPv6\",\"2001:db8::1\",\"{}\"", v6.remote)),
        "{stdout}"
    );
    assert_eq!(
        records[0],
        format!("\"IPv4\",\"192.0.2.1\",\"192.0.2.10\",\"0x00001000\",\"AES-GCM with 16 octet ICV [RFC4106]\",\"0x{}\",\"NULL\",\"\"", sas[0].key)
    );

    let pcap = dir.join("esp.pcap");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/esp_packets.py");
    let specs: Vec<String> = sas
        .iter()
        .map(|sa| {
            format!(
                "{}/{}/{:#x}/{}/{}/{}/{}",
                sa.local,
                sa.remote,
                sa.spi,
                sa.scapy_crypt,
                sa.key,
                sa.scapy_auth,
                sa.auth_key.clone().unwrap_or_default()
            )
        })
        .collect();
    let made = Command::new("python3")
        .arg(&script)
        .arg(&pcap)
        .args(&specs)
        .output()
        .unwrap();
    assert!(
        made.status.success(),
        "scapy failed: {}",
        String::from_utf8_lossy(&made.stderr)
    );

    // Without the SAs nothing decrypts: the check below can fail.
    let home = dir.join("home");
    let blind = tshark_payloads(&pcap, &home);
    let marker = |spi: u32| {
        format!("espgw-sa-{spi:x}")
            .bytes()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    };
    for sa in &sas {
        assert!(!blind.contains(&marker(sa.spi)), "decrypted without keys?");
    }

    std::fs::write(home.join(".config/wireshark/esp_sa"), &stdout).unwrap();
    let seen = tshark_payloads(&pcap, &home);
    for sa in &sas {
        assert!(
            seen.contains(&marker(sa.spi)),
            "SA {:#x} ({}) did not decrypt; tshark saw:\n{seen}",
            sa.spi,
            sa.scapy_crypt
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

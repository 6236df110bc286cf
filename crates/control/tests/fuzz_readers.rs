//! The control plane's fuzz targets on stable Rust: the checked-in seed
//! corpora (fuzz/corpus/request, fuzz/corpus/config) plus random and
//! mutated inputs through the same bodies the cargo-fuzz targets in
//! crates/control/fuzz run (docs/fuzzing.md).
//!
//! Regenerate the seed corpora with
//! `cargo test -p espgw-control --test fuzz_readers -- --ignored write_seed_corpora`.

mod fuzz_readers_body;

use std::path::PathBuf;

use espgw_control::config::SaKeys;
use espgw_control::live::protocol::{DelTarget, Request};
use espgw_esp::SecretBytes;
use fuzz_readers_body as body;
use serde_json::json;

fn corpus_dir(target: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target)
}

fn corpus(target: &str) -> Vec<Vec<u8>> {
    let mut entries: Vec<_> = std::fs::read_dir(corpus_dir(target))
        .expect("seed corpus directory")
        .map(|e| std::fs::read(e.unwrap().path()).unwrap())
        .collect();
    entries.sort();
    entries
}

const ADD_OUT_KEY: &str = "a1a2a3a4a5a6a7a8a9aaabacadaeafb0b1b2b3b4";
const ADD_IN_KEY: &str = "c1c2c3c4c5c6c7c8c9cacbcccdcecfd0d1d2d3d4";

fn keys(spi: u32, key: &str, auth: Option<&str>) -> Option<SaKeys> {
    let hex = |k: &str| SecretBytes::from_hex(k).expect("hex key");
    Some(SaKeys {
        spi,
        key: hex(key),
        auth_key: auth.map(hex),
    })
}

/// Request lines as `espgw ctl` sends them, one session per seed.
fn request_seeds() -> Vec<Vec<u8>> {
    let tunnel_u = json!({
        "name": "u", "local": "192.0.2.1", "remote": "192.0.2.3",
        "local_ts": ["10.1.0.0/24"], "remote_ts": ["10.3.0.0/24"],
        "esp": "aes128gcm16", "replay_window": 128, "mss_clamp": "auto",
        "lifetime": {"seconds": 3600, "packets": 1000000},
        "out": {"spi": "0xc001", "key": ADD_OUT_KEY},
        "in": {"spi": 0xd001, "key": ADD_IN_KEY}
    });
    let tunnel_cbc = json!({
        "name": "v6", "local": "192.0.2.1", "remote": "192.0.2.4",
        "local_ts": ["10.1.0.0/24", "fd00:1::/64"], "remote_ts": ["10.4.0.0/24", "fd00:4::/64"],
        "esp": "aes128-sha256", "encap": "udp", "esn": true,
        "out": {"spi": 0xe001, "key": "00112233445566778899aabbccddeeff",
                "auth_key": "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"},
        "in": {"spi": 0xe002, "key": "ffeeddccbbaa99887766554433221100",
               "auth_key": "ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100"}
    });
    let sessions: Vec<Vec<Request>> = vec![
        vec![Request::Status, Request::SaList, Request::Stats],
        vec![
            Request::SaAdd {
                tunnel: tunnel_u.clone(),
            },
            Request::SaList,
            Request::SaRekey {
                tunnel: "u".into(),
                outbound: keys(0xc002, "e1e2e3e4e5e6e7e8e9eaebecedeeeff0f1f2f3f4", None),
                inbound: keys(0xd002, "0102030405060708090a0b0c0d0e0f1011121314", None),
            },
            Request::SaDel {
                target: DelTarget::Spi(0xd001),
            },
            Request::Status,
        ],
        vec![
            Request::SaAdd { tunnel: tunnel_cbc },
            Request::SaRekey {
                tunnel: "v6".into(),
                outbound: keys(
                    0xe003,
                    "0f0e0d0c0b0a09080706050403020100",
                    Some("0f0e0d0c0b0a090807060504030201000f0e0d0c0b0a09080706050403020100"),
                ),
                inbound: None,
            },
            Request::SaDel {
                target: DelTarget::Tunnel("v6".into()),
            },
        ],
        vec![
            Request::SaRekey {
                tunnel: "to-gw-b".into(),
                outbound: keys(0xa002, ADD_OUT_KEY, None),
                inbound: None,
            },
            Request::SaDel {
                target: DelTarget::Tunnel("to-gw-b".into()),
            },
            Request::Stats,
        ],
    ];
    let mut out: Vec<Vec<u8>> = sessions
        .iter()
        .map(|s| {
            s.iter()
                .flat_map(|c| c.write_line().expect("request line").to_vec())
                .collect::<Vec<u8>>()
        })
        .collect();
    // Malformed lines a client could send.
    out.push(
        b"{\"cmd\":\"sa_del\",\"spi\":\"0xzz\"}\n{\"cmd\":\"nope\"}\n[1,2]\n{\"cmd\":\"sa_add\",\"tunnel\":{\"name\":\"x\",\"key_file\":\"keys.toml\"}}\n\n{\"cmd\":\"sa_rekey\",\"tunnel\":\"to-gw-b\"}\n"
            .to_vec(),
    );
    // The ike_* requests (this gateway runs no IKE driver: each is refused).
    out.push(
        b"{\"cmd\":\"ike_list\"}\n{\"cmd\":\"ike_initiate\",\"connection\":\"c\"}\n{\"cmd\":\"ike_terminate\",\"connection\":\"c\"}\n{\"child\":\"net\",\"cmd\":\"ike_rekey\",\"connection\":\"c\"}\n{\"cmd\":\"ike_rekey\"}\n"
            .to_vec(),
    );
    out
}

/// Config texts: the repository's configs and variants of them that reach
/// the other sections (policies, routes, neighbors, IPv6, key files).
fn config_seeds() -> Vec<Vec<u8>> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut out = vec![body::GATEWAY_TOML.as_bytes().to_vec()];
    let mut configs: Vec<_> = std::fs::read_dir(root.join("configs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    configs.sort();
    for p in configs {
        out.push(std::fs::read(p).unwrap());
    }
    out.push(
        br#"default_action = "bypass"
[gateway]
name = "gw-6"
control_socket = "/run/espgw/gw-6.sock"
metrics = "[::1]:9100"
[dataplane]
workers = "all"
mode = "pipeline"
burst = 64
mbufs = 8191
mtu = 9000
poll = "busy"
[[port]]
name = "p"
side = "protected"
device = "0000:03:00.0"
address = ["10.1.0.1/24", "fd00:1::1/64"]
mac = "02:00:00:00:00:01"
[[port]]
name = "u"
side = "unprotected"
device = "net_af_packet0,iface=eth1,framesz=9216,blocksz=36864"
address = ["192.0.2.1/24", "2001:db8::1/64"]
[[neighbor]]
address = "2001:db8::2"
mac = "02:00:00:00:00:02"
port = "u"
[[route]]
dest = "198.51.100.0/24"
via = "192.0.2.254"
port = "u"
[[route]]
dest = "::/0"
via = "2001:db8::fe"
port = "u"
[[tunnel]]
name = "t6"
local = "2001:db8::1"
remote = "2001:db8::2"
local_ts = ["fd00:1::/64", "10.1.0.0/24"]
remote_ts = ["fd00:2::/64", "10.2.0.0/24"]
esp = "chacha20poly1305"
esn = true
replay_window = 0
encap = "udp"
priority = 10
mss_clamp = 1300
lifetime = { seconds = 3600, soft_seconds = 3000, bytes = 1000000000, packets = 100000000 }
key_file = "keys.toml"
[[tunnel]]
name = "cbc"
local = "192.0.2.1"
remote = "198.51.100.9"
local_ts = "10.1.0.0/24"
remote_ts = "10.9.0.0/16"
esp = "aes256-sha256"
out = { spi = 4096, key = "0x000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f", auth_key = "00:11:22:33:44:55:66:77:88:99:aa:bb:cc:dd:ee:ff:00:11:22:33:44:55:66:77:88:99:aa:bb:cc:dd:ee:ff" }
in = { spi = 4097, key = "1f1e1d1c1b1a191817161514131211100f0e0d0c0b0a09080706050403020100", auth_key = "ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100" }
[[policy]]
action = "discard"
src = "10.1.0.0/24"
dst = "10.9.9.0/24"
proto = "tcp"
dport = "1-1023"
priority = 5
[[policy]]
action = "bypass"
dst = "any"
proto = "icmpv6"
"#
        .to_vec(),
    );
    // A config with errors in every section (the error paths).
    out.push(
        br#"default_action = "maybe"
[gateway]
name = ""
[dataplane]
workers = 0
mtu = 100
[[port]]
name = "p"
side = "sideways"
address = "10.1.0.1/33"
[[tunnel]]
name = "t"
local = "192.0.2.1"
remote = "10.1.0.2"
local_ts = ["10.1.0.0/24"]
remote_ts = ["10.1.0.0/24"]
esp = "rot13"
out = { spi = 1, key = "0x00" }
in = { spi = 1, key = "0xgg" }
key_file = "missing.toml"
"#
        .to_vec(),
    );
    // IKE connections: a valid one (the tunnel t's selectors moved away),
    // then one with an error in every key.
    let gw = body::GATEWAY_TOML;
    out.push(
        format!(
            "{gw}\n[[connection]]\nname = \"ike\"\nlocal = \"192.0.2.1\"\nremote = \"%any\"\n\
             local_id = \"@gw-a.example\"\nremote_id = \"ops@example.org\"\n\
             psk = \"0x00112233445566778899aabbccddeeff0011\"\n\
             proposals = [\"aes256gcm16-prfsha384-ecp384\", \"aes128-sha256-x25519\"]\n\
             dpd_delay = 30\nrekey_time = 7200\nstart_action = \"none\"\n\n\
             [[connection.child]]\nname = \"net\"\nlocal_ts = [\"10.1.5.0/24\"]\n\
             remote_ts = [\"10.77.0.0/16\"]\nesp_proposals = [\"aes128gcm16-x25519\"]\n\
             rekey_time = 600\nrekey_bytes = 1000000\nreplay_window = 128\nmss_clamp = \"auto\"\n"
        )
        .into_bytes(),
    );
    out.push(
        br#"[gateway]
name = "gw"
[[connection]]
name = "a/b"
local = "10.0.0.1"
remote = "%all"
local_id = "CN=x"
auth = "pubkey"
psk = "0xzz"
psk_file = "/dev/zero"
cert = 1
cacerts = [2]
proposals = ["aes256gcm16-ecp384", "rot13"]
encap = "udp"
dpd_delay = -1
reauth_time = 60
start_action = "trap"
fragmentation = "no"
[[connection.child]]
name = "n"
local_ts = ["10.1.0.7/24"]
remote_ts = "fd00::/64"
esp_proposals = ["aes256-sha1"]
rekey_time = 10
life_time = 5
start_action = "later"
[[connection.child]]
name = "n"
local_ts = []
"#
        .to_vec(),
    );
    out
}

#[test]
#[ignore = "writes fuzz/corpus/{request,config}; run by hand"]
fn write_seed_corpora() {
    for (target, seeds) in [("request", request_seeds()), ("config", config_seeds())] {
        std::fs::create_dir_all(corpus_dir(target)).unwrap();
        for (i, input) in seeds.iter().enumerate() {
            std::fs::write(corpus_dir(target).join(format!("seed-{i:03}")), input).unwrap();
        }
    }
}

#[test]
fn seed_corpora_are_current_and_run() {
    for (target, seeds, run) in [
        ("request", request_seeds(), body::request as fn(&[u8])),
        ("config", config_seeds(), body::config as fn(&[u8])),
    ] {
        let corpus = corpus(target);
        for s in &seeds {
            assert!(
                corpus.contains(s),
                "{target} seed corpus is stale: regenerate it (see the file's docs)"
            );
        }
        for input in &corpus {
            run(input);
        }
    }
}

/// The request seeds are real sessions: their commands succeed.
#[test]
fn request_seed_sessions_succeed() {
    use espgw_control::live::protocol::Request;
    use espgw_control::live::{ControlBackend, LiveControl, SaManager};
    let config = match espgw_control::parse_str(
        &body::base_dir().join("gateway.toml"),
        body::GATEWAY_TOML.to_string(),
        &espgw_control::HostFacts::assumed(2),
    ) {
        Ok((c, _)) => c,
        Err(d) => panic!("{d:?}"),
    };
    for (i, seed) in request_seeds().iter().take(4).enumerate() {
        let manager = SaManager::with_control_tables(&config, 0).unwrap();
        let control = LiveControl::new(
            &config,
            manager,
            std::sync::Arc::new(|| 7),
            std::sync::Arc::new(NoCounters),
        );
        for line in std::str::from_utf8(seed).unwrap().lines() {
            let answer = control.handle(Request::parse(line).unwrap());
            assert_eq!(answer["ok"], true, "seed {i}: {line}: {answer}");
        }
    }
}

struct NoCounters;

impl espgw_control::live::CountersSource for NoCounters {
    fn counters(&self) -> espgw_control::live::DataplaneCounters {
        espgw_control::live::DataplaneCounters {
            ports: Vec::new(),
            workers: Vec::new(),
            drops: Default::default(),
        }
    }
}

struct Rng(u64);

impl Rng {
    fn next_u64(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// Byte flips, overwrites with syntax characters, cuts and splices of
/// another seed's bytes.
fn mutate(rng: &mut Rng, input: &mut Vec<u8>, donor: &[u8]) {
    const SYNTAX: &[u8] = b"{}[]\",:=.#\n\\ 0x-19aeu\"'";
    for _ in 0..=rng.next_u64() % 4 {
        let r = rng.next_u64();
        let len = input.len().max(1);
        let i = (r >> 8) as usize % len;
        match r % 5 {
            0 => {
                if let Some(b) = input.get_mut(i) {
                    *b ^= 1 << (r >> 40 & 7);
                }
            }
            1 => {
                if let Some(b) = input.get_mut(i) {
                    *b = SYNTAX[(r >> 32) as usize % SYNTAX.len()];
                }
            }
            2 => {
                let end = (i + 1 + (r >> 24) as usize % 64).min(input.len());
                input.drain(i.min(input.len())..end);
            }
            _ => {
                if !donor.is_empty() {
                    let from = (r >> 16) as usize % donor.len();
                    let to = (from + (r >> 40) as usize % 80).min(donor.len());
                    let at = i.min(input.len());
                    input.splice(at..at, donor[from..to].iter().copied());
                }
            }
        }
    }
}

fn random_and_mutated(target: &str, run: fn(&[u8]), default_iterations: usize) {
    let iterations: usize = std::env::var("ESPGW_FUZZ_ITERATIONS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default_iterations);
    let corpus = corpus(target);
    let mut rng = Rng(0xC0FF_EE00_5EED);
    for i in 0..iterations {
        let mut input = corpus[i % corpus.len()].clone();
        let donor = &corpus[rng.next_u64() as usize % corpus.len()];
        mutate(&mut rng, &mut input, donor);
        run(&input);
    }
}

#[test]
fn request_random_and_mutated_inputs_never_panic() {
    random_and_mutated("request", body::request, 1_000);
}

#[test]
fn config_random_and_mutated_inputs_never_panic() {
    random_and_mutated("config", body::config, 1_000);
}

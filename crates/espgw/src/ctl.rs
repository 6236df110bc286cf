//! `espgw ctl --socket PATH COMMAND...`: the control socket's client.
//!
//! The words after `--socket PATH` are parsed here (a clap grammar of
//! their own), turned into a request by `espgw_control::live::client`,
//! sent, and the answer printed as a table (or as JSON with `--json`).
//! Exit status: 0 done, 1 refused by the gateway or unreachable, 2 usage.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use espgw_control::live::client::TunnelJson;
use espgw_control::live::client::{self, CtlCommand, KeyArgs};
use espgw_control::live::protocol::DelTarget;

/// Exit status when the gateway refused the request or could not be reached.
const EXIT_FAILED: u8 = 1;
/// Exit status for a malformed command line (as clap's own).
const EXIT_USAGE: u8 = 2;

#[derive(Parser, Debug)]
#[command(
    name = "espgw ctl --socket PATH",
    bin_name = "espgw ctl --socket PATH",
    no_binary_name = true
)]
struct CtlLine {
    /// Print the gateway's JSON response instead of a table.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Top,
}

#[derive(Subcommand, Debug)]
enum Top {
    /// Gateway, tunnels, soft-expired SAs, recent state changes.
    Status,
    /// SA commands.
    Sa {
        #[command(subcommand)]
        command: Box<Sa>,
    },
    /// Ports, workers, drops by reason, every SA's counters.
    Stats,
}

#[derive(Subcommand, Debug)]
enum Sa {
    /// Every SA with counters, drops, lifetime left and state.
    List,
    /// Add a tunnel (an SA pair and its policy).
    Add(Box<AddArgs>),
    /// Delete a tunnel: by name, or by any SPI of it.
    Del {
        /// Tunnel name.
        #[arg(required_unless_present = "spi", conflicts_with = "spi")]
        name: Option<String>,
        /// An SPI of the tunnel (0x... or decimal).
        #[arg(long, value_parser = parse_spi)]
        spi: Option<u32>,
    },
    /// Rekey make-before-break: the new inbound SA is installed before the
    /// outbound SA switches; the old inbound SA drains. Give `--in-*` only
    /// (step 1) or `--out-*` only (step 2) to coordinate two gateways.
    Rekey(RekeyArgs),
}

#[derive(Args, Debug)]
struct AddArgs {
    /// A TOML file holding one [[tunnel]] table (or its keys at top level).
    /// Preferred over key flags: command lines are visible to other users.
    #[arg(long, value_name = "FILE", conflicts_with = "name")]
    tunnel_toml: Option<PathBuf>,
    #[arg(long, required_unless_present = "tunnel_toml")]
    name: Option<String>,
    /// This gateway's outer address.
    #[arg(long, requires = "name")]
    local: Option<String>,
    /// The peer's outer address.
    #[arg(long, requires = "name")]
    remote: Option<String>,
    /// Protected-side prefixes, comma-separated.
    #[arg(long, value_delimiter = ',', requires = "name")]
    local_ts: Vec<String>,
    /// Far-side prefixes, comma-separated.
    #[arg(long, value_delimiter = ',', requires = "name")]
    remote_ts: Vec<String>,
    /// Suite: aes128gcm16, aes256gcm16, chacha20poly1305, aes128-sha256, ...
    #[arg(long, requires = "name")]
    esp: Option<String>,
    #[arg(long)]
    esn: bool,
    #[arg(long)]
    replay_window: Option<u32>,
    /// none | udp
    #[arg(long)]
    encap: Option<String>,
    #[arg(long)]
    priority: Option<u32>,
    #[arg(long)]
    lifetime_seconds: Option<u64>,
    #[arg(long)]
    lifetime_bytes: Option<u64>,
    #[arg(long)]
    lifetime_packets: Option<u64>,
    #[command(flatten)]
    keys: KeyFlags,
}

#[derive(Args, Debug)]
struct KeyFlags {
    #[arg(long, value_parser = parse_spi)]
    out_spi: Option<u32>,
    /// Hex (AEAD suites: key followed by the 4-byte salt).
    #[arg(long)]
    out_key: Option<String>,
    #[arg(long)]
    out_auth_key: Option<String>,
    #[arg(long, value_parser = parse_spi)]
    in_spi: Option<u32>,
    #[arg(long)]
    in_key: Option<String>,
    #[arg(long)]
    in_auth_key: Option<String>,
}

#[derive(Args, Debug)]
struct RekeyArgs {
    /// Tunnel name.
    name: String,
    #[command(flatten)]
    keys: KeyFlags,
}

fn parse_spi(s: &str) -> Result<u32, String> {
    let n = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => u32::from_str_radix(hex, 16),
        None => s.parse(),
    };
    n.map_err(|_| "expected an SPI: 0x... or decimal, up to 0xffffffff".to_string())
}

impl KeyFlags {
    /// One direction's keys: both SPI and key, or neither.
    fn direction(
        dir: &str,
        spi: Option<u32>,
        key: &mut Option<String>,
        auth_key: &mut Option<String>,
    ) -> Result<Option<KeyArgs>, String> {
        match (spi, key.take()) {
            (Some(spi), Some(key)) => Ok(Some(KeyArgs::new(spi, key, auth_key.take()))),
            (None, None) if auth_key.is_none() => Ok(None),
            _ => Err(format!("--{dir}-spi and --{dir}-key go together")),
        }
    }

    fn take(&mut self) -> Result<(Option<KeyArgs>, Option<KeyArgs>), String> {
        let out = Self::direction(
            "out",
            self.out_spi,
            &mut self.out_key,
            &mut self.out_auth_key,
        )?;
        let inb = Self::direction("in", self.in_spi, &mut self.in_key, &mut self.in_auth_key)?;
        Ok((out, inb))
    }
}

impl AddArgs {
    /// The tunnel's JSON, from the TOML file or from the flags.
    fn tunnel(mut self) -> Result<TunnelJson, String> {
        if let Some(path) = &self.tunnel_toml {
            let text =
                std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
            return client::tunnel_from_toml(&text).map_err(|e| format!("{}: {e}", path.display()));
        }
        let (out, inb) = self.keys.take()?;
        let (Some(out), Some(inb)) = (out, inb) else {
            return Err(
                "sa add needs --out-spi/--out-key and --in-spi/--in-key (or --tunnel-toml)".into(),
            );
        };
        client::tunnel_json(client::TunnelFields {
            name: self.name.unwrap_or_default(),
            local: self.local,
            remote: self.remote,
            local_ts: self.local_ts,
            remote_ts: self.remote_ts,
            esp: self.esp,
            esn: self.esn,
            replay_window: self.replay_window,
            encap: self.encap,
            priority: self.priority,
            lifetime: [
                ("seconds", self.lifetime_seconds),
                ("bytes", self.lifetime_bytes),
                ("packets", self.lifetime_packets),
            ],
            out,
            inbound: inb,
        })
    }
}

/// The request for a command line, and whether to print JSON.
fn command(words: &[String]) -> Result<(CtlCommand, bool), (u8, String)> {
    let line = CtlLine::try_parse_from(words).map_err(|e| {
        let code = if e.use_stderr() { EXIT_USAGE } else { 0 };
        (code, e.render().to_string())
    })?;
    let usage = |e: String| (EXIT_USAGE, e);
    let command = match line.command {
        Top::Status => CtlCommand::Status,
        Top::Stats => CtlCommand::Stats,
        Top::Sa { command } => match *command {
            Sa::List => CtlCommand::SaList,
            Sa::Add(args) => CtlCommand::SaAdd {
                tunnel: args.tunnel().map_err(usage)?,
            },
            Sa::Del { name, spi } => CtlCommand::SaDel {
                target: match (name, spi) {
                    (Some(name), _) => DelTarget::Tunnel(name),
                    (None, Some(spi)) => DelTarget::Spi(spi),
                    (None, None) => return Err(usage("sa del needs a name or --spi".into())),
                },
            },
            Sa::Rekey(mut args) => {
                let (outbound, inbound) = args.keys.take().map_err(usage)?;
                if outbound.is_none() && inbound.is_none() {
                    return Err(usage(
                        "sa rekey needs --out-spi/--out-key, --in-spi/--in-key, or both".into(),
                    ));
                }
                CtlCommand::SaRekey {
                    tunnel: args.name,
                    outbound,
                    inbound,
                }
            }
        },
    };
    Ok((command, line.json))
}

/// Runs `words` against the gateway at `socket`: what to print on success,
/// or an exit status and a message.
pub fn execute(socket: &Path, words: &[String]) -> Result<String, (u8, String)> {
    let (command, json) = command(words)?;
    client::run(socket, &command, json).map_err(|e| (EXIT_FAILED, e))
}

pub fn run(socket: &Path, words: &[String]) -> ExitCode {
    match execute(socket, words) {
        Ok(text) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        // --help and --version land here with status 0.
        Err((0, text)) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Err((code, message)) => {
            eprintln!("espgw ctl: {}", message.trim_end());
            ExitCode::from(code)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;
    use std::sync::Arc;

    use espgw_control::config::HostFacts;
    use espgw_control::live::{monotonic_clock, ControlServer, LiveControl, SaManager};

    fn words(line: &str) -> Vec<String> {
        line.split_whitespace().map(str::to_string).collect()
    }

    fn request(line: &str) -> String {
        match command(&words(line)) {
            Ok((c, _)) => c.request().to_string(),
            Err((code, e)) => panic!("{line}: {code} {e}"),
        }
    }

    #[test]
    fn grammar_is_consistent() {
        CtlLine::command().debug_assert();
    }

    #[test]
    fn command_lines_become_requests() {
        assert_eq!(request("status"), r#"{"cmd":"status"}"#);
        assert_eq!(request("sa list"), r#"{"cmd":"sa_list"}"#);
        assert_eq!(request("stats --json"), r#"{"cmd":"stats"}"#);
        assert!(command(&words("stats --json")).unwrap().1);
        assert_eq!(request("sa del t1"), r#"{"cmd":"sa_del","tunnel":"t1"}"#);
        assert_eq!(
            request("sa del --spi 0x1001"),
            r#"{"cmd":"sa_del","spi":4097}"#
        );
        assert_eq!(
            request("sa rekey t1 --in-spi 0xb002 --in-key 00112233"),
            r#"{"cmd":"sa_rekey","in":{"key":"00112233","spi":45058},"tunnel":"t1"}"#
        );
        let add = "sa add --name u --local 192.0.2.1 --remote 192.0.2.3 \
             --local-ts 10.1.0.0/24,10.1.1.0/24 --remote-ts 10.3.0.0/24 --esp aes128-sha256 \
             --lifetime-seconds 3600 --out-spi 0xc001 --out-key 00 --out-auth-key 11 \
             --in-spi 53249 --in-key 22 --in-auth-key 33";
        let Ok((CtlCommand::SaAdd { tunnel: t }, false)) = command(&words(add)) else {
            panic!("{add}");
        };
        assert_eq!(
            t["local_ts"].to_string(),
            r#"["10.1.0.0/24","10.1.1.0/24"]"#
        );
        assert_eq!(
            t["out"].to_string(),
            r#"{"auth_key":"11","key":"00","spi":49153}"#
        );
        assert_eq!(t["in"]["spi"], 53249);
        assert_eq!(t["lifetime"].to_string(), r#"{"seconds":3600}"#);
        assert_eq!(t["esp"], "aes128-sha256");
    }

    #[test]
    fn bad_command_lines_are_usage_errors() {
        for line in [
            "",
            "reboot",
            "sa",
            "sa del",
            "sa del t --spi 0x1001",
            "sa del --spi banana",
            "sa rekey t",
            "sa rekey t --out-spi 0x1001",
            "sa rekey t --in-key 00",
            "sa add --name u --out-spi 0x1001 --out-key 00",
        ] {
            match command(&words(line)) {
                Err((code, _)) => assert_eq!(code, EXIT_USAGE, "{line}"),
                Ok(_) => panic!("{line} was accepted"),
            }
        }
    }

    const OUT_KEY: &str = "a1a2a3a4a5a6a7a8a9aaabacadaeafb0b1b2b3b4";
    const IN_KEY: &str = "c1c2c3c4c5c6c7c8c9cacbcccdcecfd0d1d2d3d4";
    const NEW_KEY: &str = "e1e2e3e4e5e6e7e8e9eaebecedeeeff0f1f2f3f4";
    // Every SA gets a key of its own (the gateway refuses a key used twice).
    const W_IN_KEY: &str = "0a1b2c3d4e5f60718293a4b5c6d7e8f901234567";
    const NEW_IN_KEY: &str = "f0e1d2c3b4a5968778695a4b3c2d1e0f76543210";
    const OUT_KEY_T2: &str = "1f2e3d4c5b6a79881f2e3d4c5b6a798812345678";

    const CONFIG: &str = r#"
[gateway]
name = "gw-a"
[dataplane]
workers = 1
[[port]]
name = "prot"
side = "protected"
device = "net_null0"
address = "10.1.0.1/24"
[[port]]
name = "unprot"
side = "unprotected"
device = "net_null1"
address = "192.0.2.1/24"
[[tunnel]]
name = "t"
local = "192.0.2.1"
remote = "192.0.2.2"
local_ts = ["10.1.0.0/24"]
remote_ts = ["10.2.0.0/24"]
esp = "aes128gcm16"
out = { spi = 0xa001, key = "0x1111111111111111111111111111111122222222" }
in = { spi = 0xb001, key = "0x3333333333333333333333333333333344444444" }
"#;

    #[test]
    fn every_command_against_a_live_socket() {
        let dir = std::env::temp_dir().join(format!("espgw-ctl-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let host = HostFacts {
            cpus: 1,
            check_permissions: false,
        };
        let (config, _) =
            espgw_control::parse_str(&dir.join("gw.toml"), CONFIG.to_string(), &host).unwrap();
        let manager = SaManager::with_control_tables(&config, 0).unwrap();
        let control = Arc::new(LiveControl::new(
            &config,
            manager,
            monotonic_clock(),
            Arc::new(()),
        ));
        let sock = dir.join("gw.sock");
        let server = ControlServer::bind(&sock, control).unwrap();
        let toml_file = dir.join("u.toml");
        std::fs::write(
            &toml_file,
            format!(
                "[[tunnel]]\nname = \"u\"\nlocal = \"192.0.2.1\"\nremote = \"192.0.2.3\"\n\
                 local_ts = [\"10.1.0.0/24\"]\nremote_ts = [\"10.3.0.0/24\"]\nesp = \"aes128gcm16\"\n\
                 out = {{ spi = 0xc001, key = \"{OUT_KEY}\" }}\nin = {{ spi = 0xd001, key = \"{IN_KEY}\" }}\n"
            ),
        )
        .unwrap();
        let mut printed = Vec::new();
        let mut run = |line: String| {
            let r = execute(&sock, &words(&line));
            printed.push(format!("{r:?}"));
            r
        };

        let status = run("status".into()).unwrap();
        assert!(status.starts_with("gateway gw-a: up"), "{status}");
        let added = run(format!("sa add --tunnel-toml {}", toml_file.display())).unwrap();
        assert_eq!(added, "tunnel \"u\" added\n");
        let added = run(format!(
            "sa add --name w --local 192.0.2.1 --remote 192.0.2.4 --local-ts 10.1.0.0/24 \
             --remote-ts 10.4.0.0/24 --esp aes128gcm16 --lifetime-packets 1000 \
             --out-spi 0xe001 --out-key {NEW_KEY} --in-spi 0xf001 --in-key {W_IN_KEY}"
        ))
        .unwrap();
        assert_eq!(added, "tunnel \"w\" added\n");
        let list = run("sa list".into()).unwrap();
        assert_eq!(list.lines().count(), 7, "{list}");
        assert!(
            list.contains("w       out  0x0000e001  aes128gcm16  active  0"),
            "{list}"
        );
        assert!(list.trim_end().ends_with("1000"), "{list}");
        let rekeyed = run(format!(
            "sa rekey t --out-spi 0xa002 --out-key {OUT_KEY_T2} --in-spi 0xb002 --in-key {NEW_IN_KEY}"
        ))
        .unwrap();
        assert!(
            rekeyed.contains("0x0000b002") && rekeyed.contains("0x0000a002"),
            "{rekeyed}"
        );
        assert!(run("sa list".into())
            .unwrap()
            .contains("0x0000b001  aes128gcm16  draining"));
        // Refused by the gateway: exit status 1 and its message.
        let (code, e) = run(format!("sa rekey t --in-spi 0xb002 --in-key {NEW_KEY}")).unwrap_err();
        assert_eq!(code, EXIT_FAILED);
        assert!(e.contains("already used"), "{e}");
        let (code, e) = run(format!(
            "sa rekey t --in-spi 0xb003 --in-key {}",
            &NEW_KEY[..10]
        ))
        .unwrap_err();
        assert_eq!(code, EXIT_FAILED);
        assert!(e.contains("in"), "{e}");
        assert_eq!(run("sa del u".into()).unwrap(), "tunnel \"u\" deleted\n");
        assert_eq!(
            run("sa del --spi 0xf001".into()).unwrap(),
            "tunnel \"w\" deleted\n"
        );
        let stats = run("stats --json".into()).unwrap();
        assert!(stats.contains("\"ok\": true"), "{stats}");
        // t: outbound, new inbound and the draining old one.
        assert_eq!(stats.matches("\"state\":").count(), 3, "{stats}");
        assert!(run("stats".into()).unwrap().contains("PORT"));

        drop(server);
        let (code, _) = run("status".into()).unwrap_err();
        assert_eq!(code, EXIT_FAILED, "no gateway listening");
        for text in &printed {
            for key in [OUT_KEY, IN_KEY, NEW_KEY, W_IN_KEY, NEW_IN_KEY, OUT_KEY_T2] {
                assert!(!text.contains(&key[..12]), "key in {text}");
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}

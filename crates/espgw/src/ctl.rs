//! `espgw ctl --socket PATH COMMAND...`: the control socket's client.
//!
//! The words after `--socket PATH` are parsed here (a clap grammar of
//! their own), turned into a request by `espgw_control::live::client`,
//! sent, and the answer printed as a table (or as JSON with `--json`).
//! Exit status: 0 done, 1 refused by the gateway or unreachable, 2 usage.
//!
//! Keys belong in a file or on standard input (`sa rekey --keys-file F`,
//! `--keys-file -`; `sa add --tunnel-toml F`, `--tunnel-toml -`): any
//! local user can read a process's command line from /proc/PID/cmdline,
//! so keys given as flags draw a warning on stderr.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use espgw_control::config::SaKeys;
use espgw_control::live::client;
use espgw_control::live::client::TunnelJson;
use espgw_control::live::client::Zeroizing;
use espgw_control::live::protocol::{DelTarget, IkeCommand, Request};

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
    /// IKEv2 commands ([[connection]]s by name).
    Ike {
        #[command(subcommand)]
        command: Ike,
    },
}

#[derive(Subcommand, Debug)]
enum Ike {
    /// IKE SAs: peer, state, SPI, proposal, times, CHILD_SAs.
    List,
    /// Set up an IKE SA (and its CHILD_SA) for a connection now.
    Initiate {
        /// Connection name.
        name: String,
    },
    /// Delete a connection's IKE SAs and CHILD_SAs (its traffic is then
    /// discarded) and stop re-initiating it; with --child only that
    /// CHILD_SA (and its per-CPU ones), keeping the IKE SA.
    Terminate {
        /// Connection name.
        name: String,
        /// The child whose CHILD_SA to delete instead of the IKE SA.
        #[arg(long)]
        child: Option<String>,
    },
    /// Rekey the connection's IKE SA, or with --child its CHILD_SA.
    Rekey {
        /// Connection name.
        name: String,
        /// The child to rekey instead of the IKE SA.
        #[arg(long)]
        child: Option<String>,
    },
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
    /// A TOML file holding one [[tunnel]] table (or its keys at top level);
    /// "-" reads standard input. Preferred over key flags: command lines
    /// are visible to other users.
    #[arg(long, value_name = "FILE|-", conflicts_with = "name")]
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
    /// The new keys from a file ("-": standard input), TOML or JSON:
    /// `out = { spi = 0xa002, key = "HEX" }` and/or `in = { ... }`
    /// (`auth_key` too for non-AEAD suites). Keeps keys off the command
    /// line, which other users can read.
    #[arg(
        long,
        value_name = "FILE|-",
        conflicts_with_all = ["out_spi", "out_key", "out_auth_key", "in_spi", "in_key", "in_auth_key"]
    )]
    keys_file: Option<PathBuf>,
    #[command(flatten)]
    keys: KeyFlags,
}

/// What `-` names instead of a file.
const STDIN: &str = "-";

/// A file's text, or standard input's for `-`; zeroized when dropped (it
/// holds keys). Errors name the file, never its text.
fn read_secret_text(path: &Path, stdin: &mut dyn Read) -> Result<Zeroizing<String>, String> {
    let mut text = Zeroizing::new(String::new());
    if path.as_os_str() == STDIN {
        stdin
            .read_to_string(&mut text)
            .map_err(|e| format!("standard input: {e}"))?;
    } else {
        std::fs::File::open(path)
            .and_then(|mut f| f.read_to_string(&mut text))
            .map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(text)
}

fn source_name(path: &Path) -> String {
    if path.as_os_str() == STDIN {
        "standard input".into()
    } else {
        path.display().to_string()
    }
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
    ) -> Result<Option<SaKeys>, String> {
        // The hex text is wiped once it has become the request's keys.
        let (key, auth_key) = (
            key.take().map(Zeroizing::new),
            auth_key.take().map(Zeroizing::new),
        );
        match (spi, key) {
            (Some(spi), Some(key)) => Ok(Some(client::sa_keys_from_hex(
                dir,
                spi,
                &key,
                auth_key.as_deref().map(String::as_str),
            )?)),
            (None, None) if auth_key.is_none() => Ok(None),
            _ => Err(format!("--{dir}-spi and --{dir}-key go together")),
        }
    }

    /// One warning per key given as a command-line argument.
    fn warnings(&self) -> Vec<String> {
        [
            ("out-key", &self.out_key),
            ("out-auth-key", &self.out_auth_key),
            ("in-key", &self.in_key),
            ("in-auth-key", &self.in_auth_key),
        ]
        .into_iter()
        .filter(|(_, v)| v.is_some())
        .map(|(flag, _)| {
            format!(
                "warning: --{flag} puts a key on the command line, where every local user can \
                 read it (ps, /proc/PID/cmdline); use --keys-file FILE or --keys-file - (stdin) \
                 for sa rekey, --tunnel-toml FILE or - for sa add"
            )
        })
        .collect()
    }

    fn take(&mut self) -> Result<(Option<SaKeys>, Option<SaKeys>), String> {
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
    /// The tunnel's JSON, from the TOML file (or stdin) or from the flags.
    fn tunnel(mut self, stdin: &mut dyn Read) -> Result<TunnelJson, String> {
        if let Some(path) = &self.tunnel_toml {
            let text = read_secret_text(path, stdin)?;
            return client::tunnel_from_toml(&text)
                .map_err(|e| format!("{}: {e}", source_name(path)));
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

/// A parsed command line.
struct Parsed {
    command: Request,
    /// Print the JSON response.
    json: bool,
    /// For stderr (keys given as arguments).
    warnings: Vec<String>,
}

/// The request for a command line; `-` file arguments read `stdin`.
fn command(words: &[String], stdin: &mut dyn Read) -> Result<Parsed, (u8, String)> {
    let line = CtlLine::try_parse_from(words).map_err(|e| {
        let code = if e.use_stderr() { EXIT_USAGE } else { 0 };
        (code, e.render().to_string())
    })?;
    let usage = |e: String| (EXIT_USAGE, e);
    let mut warnings = Vec::new();
    let command = match line.command {
        Top::Status => Request::Status,
        Top::Stats => Request::Stats,
        Top::Ike { command } => Request::Ike(match command {
            Ike::List => IkeCommand::List,
            Ike::Initiate { name } => IkeCommand::Initiate { connection: name },
            Ike::Terminate { name, child } => IkeCommand::Terminate {
                connection: name,
                child,
            },
            Ike::Rekey { name, child } => IkeCommand::Rekey {
                connection: name,
                child,
            },
        }),
        Top::Sa { command } => match *command {
            Sa::List => Request::SaList,
            Sa::Add(args) => {
                warnings = args.keys.warnings();
                Request::SaAdd {
                    tunnel: args.tunnel(stdin).map_err(usage)?,
                }
            }
            Sa::Del { name, spi } => Request::SaDel {
                target: match (name, spi) {
                    (Some(name), _) => DelTarget::Tunnel(name),
                    (None, Some(spi)) => DelTarget::Spi(spi),
                    (None, None) => return Err(usage("sa del needs a name or --spi".into())),
                },
            },
            Sa::Rekey(mut args) => {
                warnings = args.keys.warnings();
                let (outbound, inbound) = match &args.keys_file {
                    Some(path) => {
                        let text = read_secret_text(path, stdin).map_err(usage)?;
                        client::rekey_keys_from_text(&text)
                            .map_err(|e| usage(format!("{}: {e}", source_name(path))))?
                    }
                    None => args.keys.take().map_err(usage)?,
                };
                if outbound.is_none() && inbound.is_none() {
                    return Err(usage(
                        "sa rekey needs --keys-file, --out-spi/--out-key, --in-spi/--in-key, or both"
                            .into(),
                    ));
                }
                Request::SaRekey {
                    tunnel: args.name,
                    outbound,
                    inbound,
                }
            }
        },
    };
    Ok(Parsed {
        command,
        json: line.json,
        warnings,
    })
}

/// Runs `words` against the gateway at `socket`: what to print on success,
/// or an exit status and a message. Warnings go to stderr at once.
pub fn execute(socket: &Path, words: &[String]) -> Result<String, (u8, String)> {
    let parsed = command(words, &mut std::io::stdin().lock())?;
    for w in &parsed.warnings {
        eprintln!("espgw ctl: {w}");
    }
    client::run(socket, &parsed.command, parsed.json).map_err(|e| (EXIT_FAILED, e))
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
    use espgw_control::fixtures::GatewayToml;
    use espgw_control::live::{monotonic_clock, ControlServer, LiveControl, SaManager};

    fn words(line: &str) -> Vec<String> {
        line.split_whitespace().map(str::to_string).collect()
    }

    fn parse(line: &str) -> Result<Parsed, (u8, String)> {
        command(&words(line), &mut std::io::empty())
    }

    fn request(line: &str) -> String {
        match parse(line) {
            Ok(p) => p.command.to_json().to_string(),
            Err((code, e)) => panic!("{line}: {code} {e}"),
        }
    }

    #[test]
    fn grammar_is_consistent() {
        CtlLine::command().debug_assert();
    }

    #[test]
    fn ike_command_lines_become_requests() {
        assert_eq!(request("ike list"), r#"{"cmd":"ike_list"}"#);
        assert_eq!(
            request("ike initiate c"),
            r#"{"cmd":"ike_initiate","connection":"c"}"#
        );
        assert_eq!(
            request("ike terminate c"),
            r#"{"cmd":"ike_terminate","connection":"c"}"#
        );
        assert_eq!(
            request("ike terminate c --child net"),
            r#"{"child":"net","cmd":"ike_terminate","connection":"c"}"#
        );
        assert_eq!(
            request("ike rekey c"),
            r#"{"cmd":"ike_rekey","connection":"c"}"#
        );
        assert_eq!(
            request("ike rekey c --child net"),
            r#"{"child":"net","cmd":"ike_rekey","connection":"c"}"#
        );
        assert!(parse("ike rekey").is_err());
        assert!(parse("ike initiate").is_err());
    }

    /// `ike` commands over a live socket: a gateway with connection "c"
    /// (its peer is not there: the IKE SA stays "connecting").
    #[test]
    fn ike_commands_against_a_live_socket() {
        use espgw_control::ike::{
            monotonic_ms, EngineConfig, IkeDriver, IkeService, MemoryTransport, SystemRandom,
        };
        let dir = std::env::temp_dir().join(format!("espgw-ctl-ike-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let host = HostFacts::assumed(1);
        let mut g = GatewayToml::demo(1).name("gw-a");
        g.tunnels.clear();
        let text = g
            .extra(
                "\n[[connection]]\nname = \"c\"\nlocal = \"192.0.2.1\"\nremote = \"192.0.2.2\"\n\
                 psk = \"0x00112233445566778899aabbccddeeff\"\n\n[[connection.child]]\nname = \"net\"\n\
                 local_ts = [\"10.1.0.0/24\"]\nremote_ts = [\"10.2.0.0/24\"]\n",
            )
            .render();
        let (config, _) = espgw_control::parse_str(&dir.join("gw.toml"), text, &host)
            .unwrap_or_else(|d| panic!("{d:?}"));
        let manager = SaManager::with_control_tables(&config, 0).unwrap();
        let control = Arc::new(LiveControl::new(
            &config,
            manager,
            monotonic_clock(),
            Arc::new(()),
        ));
        let sock = dir.join("gw.sock");
        let server = ControlServer::bind(&sock, control.clone()).unwrap();
        let run = |line: &str| execute(&sock, &words(line));

        let (code, e) = run("ike list").unwrap_err();
        assert_eq!(code, EXIT_FAILED);
        assert!(e.contains("IKE is not running"), "{e}");

        let driver = IkeDriver::new(
            &config.connections,
            EngineConfig::default(),
            SystemRandom::new(),
        )
        .unwrap();
        let ike = Arc::new(IkeService::new(
            driver,
            Box::new(MemoryTransport::default()),
            monotonic_ms(),
        ));
        assert!(control.set_ike(ike));
        assert_eq!(run("ike list").unwrap(), "no IKE SAs\n");
        assert_eq!(
            run("ike initiate c").unwrap(),
            "connection \"c\": initiating\n"
        );
        let list = run("ike list").unwrap();
        assert!(
            list.starts_with("c: IKE SA ") && list.contains("connecting (initiator)"),
            "{list}"
        );
        let json = run("ike list --json").unwrap();
        assert!(json.contains("\"state\": \"connecting\""), "{json}");
        let (code, e) = run("ike rekey c").unwrap_err();
        assert_eq!(code, EXIT_FAILED);
        assert!(e.contains("no IKE SA up"), "{e}");
        let (_, e) = run("ike rekey c --child net").unwrap_err();
        assert!(e.contains("no CHILD_SA up"), "{e}");
        let (code, e) = run("ike terminate c --child net").unwrap_err();
        assert_eq!(code, EXIT_FAILED);
        assert!(e.contains("no CHILD_SA up"), "{e}");
        let (_, e) = run("ike terminate c --child other").unwrap_err();
        assert!(e.contains("has no child \"other\""), "{e}");
        let (_, e) = run("ike initiate nope").unwrap_err();
        assert!(e.contains("no connection named"), "{e}");
        let done = run("ike terminate c").unwrap();
        assert!(
            done.starts_with("connection \"c\": deleting 1 IKE SA"),
            "{done}"
        );
        assert_eq!(control.ike_metrics().unwrap().initiated, 1);
        // The metrics endpoint appends the IKE families.
        let mut prom = String::new();
        espgw_control::live::StatsSource::extra_metrics(&*control, "gw-a", &mut prom);
        assert!(
            prom.contains("espgw_ike_initiated_total{gateway=\"gw-a\"} 1"),
            "{prom}"
        );
        drop(server);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn command_lines_become_requests() {
        assert_eq!(request("status"), r#"{"cmd":"status"}"#);
        assert_eq!(request("sa list"), r#"{"cmd":"sa_list"}"#);
        assert_eq!(request("stats --json"), r#"{"cmd":"stats"}"#);
        assert!(parse("stats --json").unwrap().json);
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
        let Ok(Parsed {
            command: Request::SaAdd { tunnel: t },
            json: false,
            ..
        }) = parse(add)
        else {
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
            match parse(line) {
                Err((code, _)) => assert_eq!(code, EXIT_USAGE, "{line}"),
                Ok(_) => panic!("{line} was accepted"),
            }
        }
    }

    /// Keys become the request's `SecretBytes` before anything is sent: a
    /// key that is not hex is a usage error naming the flag, not the key.
    #[test]
    fn key_flags_that_are_not_hex_are_usage_errors() {
        for line in [
            format!("sa rekey t --in-spi 0xb002 --in-key {}zz", &OUT_KEY[..16]),
            format!(
                "sa rekey t --out-spi 0xa002 --out-key {OUT_KEY} --out-auth-key {}q",
                &IN_KEY[..16]
            ),
            format!(
                "sa add --name u --out-spi 0xc001 --out-key {}g --in-spi 0xd001 --in-key {IN_KEY}",
                &OUT_KEY[..16]
            ),
        ] {
            match parse(&line) {
                Err((code, e)) => {
                    assert_eq!(code, EXIT_USAGE, "{line}: {e}");
                    assert!(e.contains("key: not a hex digit"), "{e}");
                    assert!(
                        !e.contains(&OUT_KEY[..8]) && !e.contains(&IN_KEY[..8]),
                        "{e}"
                    );
                }
                Ok(_) => panic!("{line} accepted"),
            }
        }
        // Keys are sent as lowercase hex, a 0x prefix dropped.
        assert_eq!(
            request("sa rekey t --in-spi 0xb002 --in-key 0xAB:CD"),
            r#"{"cmd":"sa_rekey","in":{"key":"abcd","spi":45058},"tunnel":"t"}"#
        );
    }

    #[test]
    fn rekey_keys_from_a_file_or_stdin_make_the_same_request_without_warnings() {
        let (k1, k2, k3) = (OUT_KEY, IN_KEY, &NEW_KEY[..16]);
        let flags = parse(&format!(
            "sa rekey t --out-spi 0xa002 --out-key {k1} --in-spi 0xb002 --in-key {k2} --in-auth-key {k3}"
        ))
        .unwrap();
        let want = flags.command.to_json().to_string();
        assert!(want.contains(k1) && want.contains(k3), "{want}");
        assert_eq!(flags.warnings.len(), 3, "{:?}", flags.warnings);
        for (w, flag) in flags
            .warnings
            .iter()
            .zip(["out-key", "in-key", "in-auth-key"])
        {
            assert!(
                w.starts_with(&format!("warning: --{flag} puts a key on the command line")),
                "{w}"
            );
            assert!(w.contains("--keys-file"), "{w}");
            assert!(!w.contains(&k1[..8]) && !w.contains(&k2[..8]), "{w}");
        }

        let toml = format!(
            "out = {{ spi = 0xa002, key = \"{k1}\" }}\n[in]\nspi = \"0xb002\"\nkey = \"{k2}\"\nauth_key = \"{k3}\"\n"
        );
        let json = format!(
            r#"{{"out": {{"spi": 40962, "key": "{k1}"}}, "in": {{"spi": "0xb002", "key": "{k2}", "auth_key": "{k3}"}}}}"#
        );
        let dir = std::env::temp_dir().join(format!("espgw-ctl-keys-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for (name, text) in [("k.toml", &toml), ("k.json", &json)] {
            let file = dir.join(name);
            std::fs::write(&file, text).unwrap();
            let p = parse(&format!("sa rekey t --keys-file {}", file.display())).unwrap();
            assert_eq!(p.command.to_json().to_string(), want, "{name}");
            assert!(p.warnings.is_empty(), "{:?}", p.warnings);
            // The same text on standard input.
            let p = command(&words("sa rekey t --keys-file -"), &mut text.as_bytes()).unwrap();
            assert_eq!(p.command.to_json().to_string(), want, "stdin {name}");
            assert!(p.warnings.is_empty());
        }
        // One direction only.
        let p = command(
            &words("sa rekey t --keys-file -"),
            &mut format!("[in]\nspi = 0xb002\nkey = \"{k2}\"\n").as_bytes(),
        )
        .unwrap();
        assert_eq!(
            p.command.to_json().to_string(),
            format!(r#"{{"cmd":"sa_rekey","in":{{"key":"{k2}","spi":45058}},"tunnel":"t"}}"#)
        );

        // Mistakes are usage errors that never quote a key.
        let bad = |line: &str, stdin: &str| match command(&words(line), &mut stdin.as_bytes()) {
            Err((code, e)) => {
                assert_eq!(code, EXIT_USAGE, "{line}: {e}");
                assert!(!e.contains(&k1[..8]) && !e.contains(&k2[..8]), "{e}");
                e
            }
            Ok(_) => panic!("{line} accepted"),
        };
        bad(&format!("sa rekey t --keys-file - --in-key {k2}"), &toml);
        bad("sa rekey t --keys-file - --in-spi 0xb002", &toml);
        let e = bad(
            "sa rekey t --keys-file -",
            &toml.replace("key = \"a1", "key = a1"),
        );
        assert!(e.starts_with("standard input: TOML"), "{e}");
        let e = bad(
            "sa rekey t --keys-file -",
            &json.replace("\"key\"", "\"kee\""),
        );
        assert!(e.contains("unknown key \"kee\""), "{e}");
        bad(
            "sa rekey t --keys-file -",
            &toml.replace("spi = 0xa002, ", ""),
        );
        bad("sa rekey t --keys-file -", "");
        let e = bad(
            &format!("sa rekey t --keys-file {}", dir.join("none").display()),
            "",
        );
        assert!(e.contains("none"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn sa_add_reads_its_tunnel_from_stdin() {
        let text = format!(
            "[[tunnel]]\nname = \"u\"\nlocal = \"192.0.2.1\"\nremote = \"192.0.2.3\"\n\
             local_ts = [\"10.1.0.0/24\"]\nremote_ts = [\"10.3.0.0/24\"]\nesp = \"aes128gcm16\"\n\
             out = {{ spi = 0xc001, key = \"{OUT_KEY}\" }}\nin = {{ spi = 0xd001, key = \"{IN_KEY}\" }}\n"
        );
        let p = command(&words("sa add --tunnel-toml -"), &mut text.as_bytes()).unwrap();
        assert!(p.warnings.is_empty());
        let flags = parse(&format!(
            "sa add --name u --local 192.0.2.1 --remote 192.0.2.3 --local-ts 10.1.0.0/24 \
             --remote-ts 10.3.0.0/24 --esp aes128gcm16 --out-spi 0xc001 --out-key {OUT_KEY} \
             --in-spi 0xd001 --in-key {IN_KEY}"
        ))
        .unwrap();
        assert_eq!(flags.warnings.len(), 2);
        assert_eq!(
            p.command.to_json().to_string(),
            flags.command.to_json().to_string()
        );
    }

    const OUT_KEY: &str = "a1a2a3a4a5a6a7a8a9aaabacadaeafb0b1b2b3b4";
    const IN_KEY: &str = "c1c2c3c4c5c6c7c8c9cacbcccdcecfd0d1d2d3d4";
    const NEW_KEY: &str = "e1e2e3e4e5e6e7e8e9eaebecedeeeff0f1f2f3f4";
    // Every SA gets a key of its own (the gateway refuses a key used twice).
    const W_IN_KEY: &str = "0a1b2c3d4e5f60718293a4b5c6d7e8f901234567";
    const NEW_IN_KEY: &str = "f0e1d2c3b4a5968778695a4b3c2d1e0f76543210";
    const OUT_KEY_T2: &str = "1f2e3d4c5b6a79881f2e3d4c5b6a798812345678";

    /// Gateway "gw-a": gateway 1 of the demo pair, its own keys.
    fn config_text() -> String {
        GatewayToml::demo(1).name("gw-a").render()
    }

    #[test]
    fn every_command_against_a_live_socket() {
        let dir = std::env::temp_dir().join(format!("espgw-ctl-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let host = HostFacts::assumed(1);
        let (config, _) =
            espgw_control::parse_str(&dir.join("gw.toml"), config_text(), &host).unwrap();
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

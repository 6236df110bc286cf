//! The client end of the control socket, for `espgw ctl`: builds
//! requests, sends them, and renders responses as tables.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};
/// Re-exported so `espgw ctl` holds key text in it without a dependency
/// of its own.
pub use zeroize::Zeroizing;

use super::access;
use super::protocol::{
    self, IkeCommand, IkeListReply, IkeReply, RekeyReply, Request, SaListReply, TunnelReply,
};
use super::status::{SaInfo, StatsSnapshot, Status};
use crate::config::{SaKeys, SecretBytes};
use crate::ike::IkeSaInfo;

/// How long to wait for the gateway's answer.
const TIMEOUT: Duration = Duration::from_secs(30);

/// One direction's keys from the hex the operator typed. Errors never
/// quote the text (the gateway checks the lengths for the suite).
pub fn sa_keys_from_hex(
    dir: &str,
    spi: u32,
    key: &str,
    auth_key: Option<&str>,
) -> Result<SaKeys, String> {
    let secret = |what: &str, hex: &str| {
        SecretBytes::from_hex(hex).map_err(|e| format!("--{dir}-{what}: {e}"))
    };
    Ok(SaKeys {
        spi,
        key: secret("key", key)?,
        auth_key: auth_key.map(|a| secret("auth-key", a)).transpose()?,
    })
}

/// The `{spi, key, auth_key}` JSON of one direction in a tunnel (keys in
/// hex, as a `[[tunnel]]` table has them).
fn tunnel_keys_json(k: &SaKeys) -> Value {
    let mut v = json!({ "spi": k.spi, "key": k.key.to_hex().as_str() });
    if let Some(a) = &k.auth_key {
        v["auth_key"] = Value::String(a.to_hex().to_string());
    }
    v
}

/// A tunnel's fields as JSON (what `sa_add` carries).
pub type TunnelJson = Value;

/// A tunnel given by command-line flags; `None` fields take the config
/// defaults.
pub struct TunnelFields {
    pub name: String,
    pub local: Option<String>,
    pub remote: Option<String>,
    pub local_ts: Vec<String>,
    pub remote_ts: Vec<String>,
    pub esp: Option<String>,
    pub esn: bool,
    pub replay_window: Option<u32>,
    pub encap: Option<String>,
    pub priority: Option<u32>,
    /// Hard limits: `seconds`, `bytes`, `packets`.
    pub lifetime: [(&'static str, Option<u64>); 3],
    pub out: SaKeys,
    pub inbound: SaKeys,
}

/// The `sa_add` tunnel object for flags. Missing required fields are left
/// out, so the gateway's config checks name them.
pub fn tunnel_json(f: TunnelFields) -> Result<TunnelJson, String> {
    let mut t = json!({
        "name": f.name,
        "out": tunnel_keys_json(&f.out),
        "in": tunnel_keys_json(&f.inbound),
    });
    let mut set = |k: &str, v: Option<Value>| {
        if let Some(v) = v {
            t[k] = v;
        }
    };
    set("local", f.local.map(Value::String));
    set("remote", f.remote.map(Value::String));
    let list = |l: Vec<String>| (!l.is_empty()).then(|| json!(l));
    set("local_ts", list(f.local_ts));
    set("remote_ts", list(f.remote_ts));
    set("esp", f.esp.map(Value::String));
    set("esn", f.esn.then_some(Value::Bool(true)));
    set("replay_window", f.replay_window.map(|w| json!(w)));
    set("encap", f.encap.map(Value::String));
    set("priority", f.priority.map(|p| json!(p)));
    let mut lifetime = serde_json::Map::new();
    for (k, v) in f.lifetime {
        if let Some(v) = v {
            let v = i64::try_from(v).map_err(|_| format!("lifetime {k} is too large"))?;
            lifetime.insert(k.to_string(), json!(v));
        }
    }
    if !lifetime.is_empty() {
        set("lifetime", Some(Value::Object(lifetime)));
    }
    Ok(t)
}

/// Renders a successful response to `request` for people.
pub fn render(request: &Request, response: &Value) -> Result<String, String> {
    match request {
        Request::Status => render_status(&parse(response)?),
        Request::SaList => Ok(render_sas(&parse::<SaListReply>(response)?.sas)),
        Request::Stats => render_stats(&parse(response)?),
        Request::SaAdd { .. } => Ok(format!(
            "tunnel {:?} added\n",
            parse::<TunnelReply>(response)?.tunnel
        )),
        Request::SaDel { .. } => Ok(format!(
            "tunnel {:?} deleted\n",
            parse::<TunnelReply>(response)?.tunnel
        )),
        Request::SaRekey { .. } => {
            let reply: RekeyReply = parse(response)?;
            let mut steps = Vec::new();
            if let Some(spi) = reply.in_spi {
                steps.push(format!(
                    "new inbound SPI {spi:#010x} installed (old one draining)"
                ));
            }
            if let Some(spi) = reply.out_spi {
                steps.push(format!("outbound switched to SPI {spi:#010x}"));
            }
            Ok(format!(
                "tunnel {:?} rekeyed: {}\n",
                reply.tunnel,
                steps.join("; ")
            ))
        }
        Request::KeysWireshark => {
            let r: super::protocol::KeysReply = parse(response)?;
            Ok(format!(
                "{} IKE SA record(s), {} ESP SA record(s) (use espgw keys wireshark --socket)\n",
                r.ikev2.len(),
                r.esp_sa.len()
            ))
        }
        Request::Ike(IkeCommand::List) => Ok(render_ike(&parse::<IkeListReply>(response)?.sas)),
        Request::Ike(_) => {
            let r: IkeReply = parse(response)?;
            Ok(format!("connection {:?}: {}\n", r.connection, r.done))
        }
    }
}

/// `ike list`: one block per IKE SA, its CHILD_SAs indented.
pub fn render_ike(sas: &[IkeSaInfo]) -> String {
    if sas.is_empty() {
        return "no IKE SAs\n".into();
    }
    let mut out = String::new();
    let opt = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".into());
    for s in sas {
        if s.state == "trapped" {
            out.push_str(&format!(
                "{}: trapped, no IKE SA (the first packet initiates), {} -> {}\n",
                s.connection,
                opt(&s.local),
                opt(&s.remote),
            ));
            continue;
        }
        out.push_str(&format!(
            "{}: IKE SA {} {}{}, {} -> {}, {}",
            s.connection,
            s.ike_sa,
            s.state,
            if s.initiator {
                " (initiator)"
            } else {
                " (responder)"
            },
            opt(&s.local),
            opt(&s.remote),
            opt(&s.proposal),
        ));
        // Both SPIs, as swanctl --list-sas writes them.
        if !s.spi_i.is_empty() {
            out.push_str(&format!(", SPIs {}_i {}_r", s.spi_i, s.spi_r));
        }
        if let Some(e) = s.established_seconds {
            out.push_str(&format!(", up {e} s"));
        }
        if let Some(r) = s.rekey_in_seconds {
            out.push_str(&format!(", rekey in {r} s"));
        }
        out.push('\n');
        if s.children.is_empty() && s.state == "established" {
            // Deleted by either side (`ike terminate NAME --child`):
            // `ike initiate` or the next packet of a trap adds one.
            out.push_str("  no CHILD_SA\n");
        }
        for c in &s.children {
            out.push_str(&format!(
                "  child {} (tunnel {:?}){}: in {:#010x} out {:#010x} {}{}{}, {} s old{}{}\n",
                c.name,
                c.tunnel,
                if c.per_cpu { " per-cpu" } else { "" },
                c.in_spi,
                c.out_spi,
                c.suite,
                if c.key_exchange.is_empty() {
                    String::new()
                } else {
                    format!("/{}", c.key_exchange)
                },
                if c.udp_encap { " udp-encap" } else { "" },
                c.age_seconds,
                if c.rekeying { ", rekeying" } else { "" },
                if c.local_ts.is_empty() {
                    String::new()
                } else {
                    format!(", {} === {}", c.local_ts.join(","), c.remote_ts.join(","))
                },
            ));
        }
    }
    out
}

fn parse<T: serde::de::DeserializeOwned>(v: &Value) -> Result<T, String> {
    serde_json::from_value(v.clone()).map_err(|e| format!("unexpected response: {e}"))
}

/// Sends one request and returns the response object (`ok` true or false).
/// A request with keys goes only to a socket that root or the caller owns
/// and serves (see [`access::check_server`]): another user's socket at a
/// guessed or stale path never receives them.
pub fn call(socket: &Path, request: &Request) -> Result<Value, String> {
    let stream = UnixStream::connect(socket)
        .map_err(|e| format!("cannot connect to {}: {e}", socket.display()))?;
    if request.carries_keys() {
        access::check_server(socket, &stream, access::my_uid())?;
    }
    stream
        .set_read_timeout(Some(TIMEOUT))
        .and_then(|_| stream.set_write_timeout(Some(TIMEOUT)))
        .map_err(|e| e.to_string())?;
    let line = request.write_line()?;
    let sent = (&stream).write_all(&line);
    let mut answer = String::new();
    // A gateway that refuses us answers at once and closes, maybe before
    // our request was written: its reason is worth more than "broken pipe".
    let received = BufReader::new(&stream).read_line(&mut answer);
    match (sent, received) {
        (Ok(()), Err(e)) => return Err(format!("receive: {e}")),
        (Err(e), Err(_) | Ok(0)) => return Err(format!("send: {e}")),
        _ => {}
    }
    if answer.is_empty() {
        return Err("the gateway closed the connection without answering".into());
    }
    serde_json::from_str(&answer).map_err(|e| format!("response is not JSON: {e}"))
}

/// `keys_wireshark`: the running gateway's Wireshark records, or its error.
pub fn keys_wireshark(socket: &Path) -> Result<super::protocol::KeysReply, String> {
    let response = call(socket, &Request::KeysWireshark)?;
    if response["ok"] != Value::Bool(true) {
        return Err(response["error"]
            .as_str()
            .unwrap_or("request failed")
            .to_string());
    }
    parse(&response)
}

/// Runs a command: the text to print, or the gateway's error.
pub fn run(socket: &Path, request: &Request, as_json: bool) -> Result<String, String> {
    let response = call(socket, request)?;
    output(request, &response, as_json)
}

/// What [`run`] prints for `response`: the table (or pretty JSON), or
/// the gateway's error.
pub fn output(request: &Request, response: &Value, as_json: bool) -> Result<String, String> {
    if response["ok"] != Value::Bool(true) {
        return Err(response["error"]
            .as_str()
            .unwrap_or("request failed")
            .to_string());
    }
    if as_json {
        let mut s = serde_json::to_string_pretty(response).map_err(|e| e.to_string())?;
        s.push('\n');
        return Ok(s);
    }
    render(request, response)
}

/// A tunnel from TOML text: either a `[[tunnel]]` table (the first one)
/// or the tunnel's keys at top level. Errors never quote the text.
pub fn tunnel_from_toml(text: &str) -> Result<Value, String> {
    let doc: toml::Table = toml::from_str(text).map_err(|e| format!("TOML: {}", e.message()))?;
    let table = match doc.get("tunnel") {
        Some(toml::Value::Array(items)) => match items.first() {
            Some(toml::Value::Table(t)) => t.clone(),
            _ => return Err("[[tunnel]] is empty".into()),
        },
        Some(toml::Value::Table(t)) => t.clone(),
        Some(_) => return Err("\"tunnel\" must be a table".into()),
        None => doc,
    };
    serde_json::to_value(table).map_err(|e| format!("TOML: {e}"))
}

/// New keys for `sa_rekey` from a file's text (TOML or JSON, told apart
/// by a leading `{`): an `out` and/or an `in` table, each
/// `{spi, key, auth_key?}` as in a tunnel's `out`/`in`, read by the same
/// code that reads them from a request line ([`protocol::sa_keys`]):
///
/// ```toml
/// out = { spi = 0xa002, key = "..." }
/// in = { spi = 0xb002, key = "..." }
/// ```
///
/// Errors never quote the text.
pub fn rekey_keys_from_text(text: &str) -> Result<(Option<SaKeys>, Option<SaKeys>), String> {
    let doc: Value = if text.trim_start().starts_with('{') {
        // serde_json's errors give a position, never the text.
        serde_json::from_str(text).map_err(|e| format!("JSON: {e}"))?
    } else {
        let table: toml::Table =
            toml::from_str(text).map_err(|e| format!("TOML: {}", e.message()))?;
        serde_json::to_value(table).map_err(|e| format!("TOML: {e}"))?
    };
    let Value::Object(obj) = &doc else {
        return Err("expected a table with \"out\" and/or \"in\"".into());
    };
    if let Some(k) = obj.keys().find(|k| !["out", "in"].contains(&k.as_str())) {
        return Err(format!(
            "unknown key {:?} (expected out and/or in)",
            k.chars().take(32).collect::<String>()
        ));
    }
    let dir = |name: &str| {
        obj.get(name)
            .map(|v| protocol::sa_keys(v, name))
            .transpose()
    };
    let keys = (dir("out")?, dir("in")?);
    if keys.0.is_none() && keys.1.is_none() {
        return Err("no keys: give out, in, or both".into());
    }
    Ok(keys)
}

/// Left-aligned columns, two spaces apart.
fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for r in rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut out = String::new();
    let mut line = |cells: Vec<&str>| {
        let mut l = String::new();
        for (i, (c, w)) in cells.iter().zip(&widths).enumerate() {
            if i + 1 == cells.len() {
                l.push_str(c);
            } else {
                l.push_str(&format!("{c:<w$}  "));
            }
        }
        out.push_str(l.trim_end());
        out.push('\n');
    };
    line(header.to_vec());
    for r in rows {
        line(r.iter().map(String::as_str).collect());
    }
    out
}

fn opt(v: Option<u64>) -> String {
    v.map_or("-".to_string(), |n| n.to_string())
}

fn spi(v: Option<u32>) -> String {
    v.map_or("-".to_string(), |s| format!("{s:#010x}"))
}

pub fn render_sas(sas: &[SaInfo]) -> String {
    let rows: Vec<Vec<String>> = sas
        .iter()
        .map(|s| {
            let drops = if s.drops.is_empty() {
                "-".to_string()
            } else {
                s.drops
                    .iter()
                    .map(|(r, n)| format!("{r}={n}"))
                    .collect::<Vec<_>>()
                    .join(",")
            };
            vec![
                s.tunnel.clone(),
                s.dir.name().to_string(),
                spi(Some(s.spi)),
                s.suite.clone(),
                s.state.name().to_string(),
                s.packets.to_string(),
                s.bytes.to_string(),
                drops,
                opt(s.lifetime_left.seconds),
                opt(s.lifetime_left.bytes),
                opt(s.lifetime_left.packets),
            ]
        })
        .collect();
    table(
        &[
            "TUNNEL",
            "DIR",
            "SPI",
            "SUITE",
            "STATE",
            "PACKETS",
            "BYTES",
            "DROPS",
            "LEFT_S",
            "LEFT_BYTES",
            "LEFT_PKTS",
        ],
        &rows,
    )
}

pub fn render_status(s: &Status) -> Result<String, String> {
    let mut out = format!(
        "gateway {}: up {} s, {} worker(s), {} tunnel(s), snapshot generation {} ({} pending)\n",
        s.gateway,
        s.uptime_seconds,
        s.workers,
        s.tunnels.len(),
        s.generation,
        s.pending_snapshots
    );
    let e = &s.events;
    out.push_str(&format!(
        "events: {} added, {} deleted, {} rekeys (in {}, out {}), {} soft expiries, {} hard expiries, {} drained\n\n",
        e.tunnels_added,
        e.tunnels_deleted,
        e.rekeys_inbound + e.rekeys_outbound,
        e.rekeys_inbound,
        e.rekeys_outbound,
        e.soft_expiries,
        e.hard_expiries,
        e.drained
    ));
    let rows: Vec<Vec<String>> = s
        .tunnels
        .iter()
        .map(|t| {
            let state = match (t.out_spi, t.in_spi, t.soft_expired) {
                (None, _, _) | (_, None, _) => "expired",
                (_, _, true) => "soft-expired",
                _ => "up",
            };
            vec![
                t.name.clone(),
                t.local.clone(),
                t.remote.clone(),
                spi(t.out_spi),
                spi(t.in_spi),
                t.draining.to_string(),
                state.to_string(),
            ]
        })
        .collect();
    out.push_str(&table(
        &[
            "TUNNEL", "LOCAL", "REMOTE", "OUT_SPI", "IN_SPI", "DRAINING", "STATE",
        ],
        &rows,
    ));
    if !s.soft_expired.is_empty() {
        out.push_str("\nsoft-expired (rekey due):\n");
        for r in &s.soft_expired {
            out.push_str(&format!(
                "  {} {} {}\n",
                r.tunnel,
                r.dir.name(),
                spi(Some(r.spi))
            ));
        }
    }
    if !s.recent.is_empty() {
        out.push_str("\nrecent events:\n");
        for ev in &s.recent {
            out.push_str(&format!(
                "  t={} {} {}{}{}\n",
                ev.at,
                ev.kind,
                ev.tunnel,
                ev.dir.map_or(String::new(), |d| format!(" {}", d.name())),
                ev.spi.map_or(String::new(), |x| format!(" {x:#010x}")),
            ));
        }
    }
    Ok(out)
}

/// A port's ESP steering in a word or three: `steering 4 rules`,
/// `refused (udp4)`, `idle`.
fn steering_cell(e: &super::status::EspSteeringState) -> String {
    let mut cell = match e.state.as_str() {
        "steering" => format!(
            "steering {} rule{}",
            e.rules,
            if e.rules == 1 { "" } else { "s" }
        ),
        other => other.to_string(),
    };
    if !e.refused.is_empty() {
        let verb = if e.state == "refused" {
            ""
        } else {
            ", refused"
        };
        cell += &format!("{verb} ({})", e.refused.join(" "));
    }
    cell
}

/// A worker's live check of the fan-out (`spread_recheck_ms`) in one cell:
/// `-` before its first trial; else whether the fan-out is on, the last
/// trial's rates with and without it, and the trials so far.
fn fan_out_check_cell(w: &super::status::WorkerLoad) -> String {
    let trials: u64 = w.spread_trials.iter().sum();
    if trials == 0 {
        return "-".into();
    }
    format!(
        "{} ({:.2} with / {:.2} without Mpps, {trials} trials)",
        if w.spread_off { "off" } else { "on" },
        w.spread_trial_with_pps as f64 / 1e6,
        w.spread_trial_without_pps as f64 / 1e6,
    )
}

pub fn render_stats(s: &StatsSnapshot) -> Result<String, String> {
    let mut out = format!("gateway {}: up {} s\n\n", s.gateway, s.uptime_seconds);
    // ESP steering's column only where it is in effect (steer_esp).
    let steering = s.ports.iter().any(|p| p.esp_steering.is_some());
    let ports: Vec<Vec<String>> = s
        .ports
        .iter()
        .map(|p| {
            let mut row = vec![
                p.name.clone(),
                p.rx_packets.to_string(),
                p.tx_packets.to_string(),
                p.rx_bytes.to_string(),
                p.tx_bytes.to_string(),
            ];
            if steering {
                row.push(p.esp_steering.as_ref().map_or("-".into(), steering_cell));
            }
            row
        })
        .collect();
    let mut heads = vec!["PORT", "RX_PKTS", "TX_PKTS", "RX_BYTES", "TX_BYTES"];
    if steering {
        heads.push("ESP_STEERING");
    }
    out.push_str(&table(&heads, &ports));
    let workers: Vec<Vec<String>> = s
        .workers
        .iter()
        .map(|w| {
            vec![
                w.worker.to_string(),
                format!("{:.3}", w.busy_ratio),
                w.mss_clamped.to_string(),
                w.spread_out.to_string(),
                w.spread_in.to_string(),
                w.spread_kept.to_string(),
                w.spread_unneeded.to_string(),
                w.reorder_late_sent.to_string(),
                w.sa_handoff_out.to_string(),
                w.sa_handoff_in.to_string(),
                w.spread_solo.to_string(),
                fan_out_check_cell(w),
            ]
        })
        .collect();
    out.push('\n');
    out.push_str(&table(
        &[
            "WORKER",
            "BUSY",
            "MSS_CLAMPED",
            "SPREAD_OUT",
            "SPREAD_IN",
            "SPREAD_KEPT",
            "SPREAD_UNNEEDED",
            "LATE_SENT",
            "HANDOFF_OUT",
            "HANDOFF_IN",
            "SPREAD_SOLO",
            "FAN_OUT_CHECK",
        ],
        &workers,
    ));
    let drops: Vec<Vec<String>> = s
        .drops
        .iter()
        .map(|(r, n)| vec![r.clone(), n.to_string()])
        .collect();
    out.push('\n');
    out.push_str(&table(&["DROP_REASON", "PACKETS"], &drops));
    out.push('\n');
    out.push_str(&render_sas(&s.sas));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::live::status::{EspSteeringState, PortTraffic};

    fn port(name: &str, esp_steering: Option<EspSteeringState>) -> PortTraffic {
        PortTraffic {
            name: name.into(),
            esp_steering,
            ..PortTraffic::default()
        }
    }

    /// `ctl stats` shows ESP steering per port where it is in effect, and
    /// no such column where it is not.
    #[test]
    fn stats_show_esp_steering_only_where_in_effect() {
        let state = |state: &str, rules, refused: &[&str]| EspSteeringState {
            state: state.into(),
            rules,
            refused: refused.iter().map(|s| s.to_string()).collect(),
        };
        let s = StatsSnapshot {
            ports: vec![
                port("prot", Some(state("idle", 0, &[]))),
                port("unprot", Some(state("steering", 4, &["udp6"]))),
                port("other", Some(state("refused", 0, &["esp4", "udp4"]))),
            ],
            ..StatsSnapshot::default()
        };
        let out = render_stats(&s).unwrap();
        assert!(out.contains("ESP_STEERING"), "{out}");
        assert!(out.contains("steering 4 rules, refused (udp6)"), "{out}");
        assert!(out.contains("refused (esp4 udp4)"), "{out}");
        assert!(
            out.lines()
                .any(|l| l.starts_with("prot") && l.ends_with("idle")),
            "{out}"
        );
        let none = StatsSnapshot {
            ports: vec![port("prot", None)],
            ..StatsSnapshot::default()
        };
        assert!(!render_stats(&none).unwrap().contains("ESP_STEERING"));
    }

    /// `ctl stats` shows each worker's live check of the fan-out: `-`
    /// before a trial, else on/off with the last trial's rates.
    #[test]
    fn stats_show_the_fan_out_check_per_worker() {
        use super::super::status::WorkerLoad;
        let s = StatsSnapshot {
            workers: vec![
                WorkerLoad {
                    worker: 0,
                    spread_solo: 4096,
                    spread_trials: vec![1, 2, 0, 0],
                    spread_trial_with_pps: 1_500_000,
                    spread_trial_without_pps: 2_610_000,
                    spread_off: true,
                    ..WorkerLoad::default()
                },
                WorkerLoad {
                    worker: 1,
                    ..WorkerLoad::default()
                },
            ],
            ..StatsSnapshot::default()
        };
        let out = render_stats(&s).unwrap();
        assert!(
            out.contains("SPREAD_SOLO") && out.contains("FAN_OUT_CHECK"),
            "{out}"
        );
        let row = |w: &str| {
            out.lines()
                .find(|l| l.split_whitespace().next() == Some(w))
                .unwrap_or_else(|| panic!("no worker {w} in {out}"))
                .to_string()
        };
        let w0 = row("0");
        assert!(w0.contains(" 4096 "), "{w0}");
        assert!(
            w0.ends_with("off (1.50 with / 2.61 without Mpps, 3 trials)"),
            "{w0}"
        );
        assert!(row("1").trim_end().ends_with('-'), "{out}");
    }
}

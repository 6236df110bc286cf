//! Prometheus text exposition (format 0.0.4) over a tiny HTTP/1.0 server.
//!
//! `GET /metrics` answers with the current [`StatsSnapshot`] of a
//! [`StatsSource`]; anything else gets 404 (or 405 for other methods).
//! One std thread accepts; each connection is answered on a thread of its
//! own (at most [`MAX_CONNECTIONS`] at once), and the whole exchange, from
//! accept to the last byte written, must finish within a deadline (5 s by
//! default). A client that sends its request a byte at a time, or never
//! reads the answer, is cut off at the deadline and never delays another
//! scrape.

use std::fmt::Write as _;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tracing::{debug, info, warn};

use super::control::StatsSource;
use super::status::{SaInfo, StatsSnapshot, TunnelTotals};

pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// How long one connection may take in all (not per read): well under
/// Prometheus's default 10 s scrape timeout.
pub const CONNECTION_DEADLINE: Duration = Duration::from_secs(5);

/// Connections served at once; more are closed unanswered (a scraper
/// retries at its next interval).
pub const MAX_CONNECTIONS: usize = 16;

/// A label value with `\`, `"` and newlines escaped.
fn escape(v: &str) -> String {
    let mut s = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => s.push_str("\\\\"),
            '"' => s.push_str("\\\""),
            '\n' => s.push_str("\\n"),
            c => s.push(c),
        }
    }
    s
}

/// Writes one metric family: HELP, TYPE, then its samples.
struct Family<'a> {
    out: &'a mut String,
}

impl Family<'_> {
    fn start<'o>(out: &'o mut String, name: &str, kind: &str, help: &str) -> Family<'o> {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} {kind}");
        Family { out }
    }

    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: impl std::fmt::Display) {
        self.out.push_str(name);
        if !labels.is_empty() {
            self.out.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                if i > 0 {
                    self.out.push(',');
                }
                let _ = write!(self.out, "{k}=\"{}\"", escape(v));
            }
            self.out.push('}');
        }
        let _ = writeln!(self.out, " {value}");
    }
}

fn sa_labels(sa: &SaInfo) -> [(&'static str, String); 3] {
    [
        ("tunnel", sa.tunnel.clone()),
        ("dir", sa.dir.name().to_string()),
        ("spi", format!("{:#010x}", sa.spi)),
    ]
}

fn as_refs<'a>(labels: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
    labels.iter().map(|(k, v)| (*k, v.as_str())).collect()
}

/// The exposition text of a snapshot.
pub fn render(s: &StatsSnapshot) -> String {
    let mut out = String::new();
    for (name, help, get) in [
        (
            "espgw_port_rx_packets_total",
            "Packets received on the port.",
            (|p: &super::status::PortTraffic| p.rx_packets) as fn(&_) -> u64,
        ),
        (
            "espgw_port_tx_packets_total",
            "Packets sent on the port.",
            |p| p.tx_packets,
        ),
        (
            "espgw_port_rx_bytes_total",
            "Bytes received on the port.",
            |p| p.rx_bytes,
        ),
        (
            "espgw_port_tx_bytes_total",
            "Bytes sent on the port.",
            |p| p.tx_bytes,
        ),
    ] {
        let mut f = Family::start(&mut out, name, "counter", help);
        for p in &s.ports {
            f.sample(name, &[("port", &p.name)], get(p));
        }
    }
    {
        let name = "espgw_port_tx_udp_checksum_offload";
        let mut f = Family::start(
            &mut out,
            name,
            "gauge",
            "1 where the port's NIC computes the UDP checksums of ESP in UDP over IPv6 (tx_checksum_offload).",
        );
        for p in &s.ports {
            f.sample(name, &[("port", &p.name)], u64::from(p.tx_udp_checksum));
        }
    }
    if s.ports.iter().any(|p| p.esp_steering.is_some()) {
        let name = "espgw_port_esp_steering_rules";
        let mut f = Family::start(
            &mut out,
            name,
            "gauge",
            "ESP steering (steer_esp): flow rules the port's NIC holds, one per inbound SA it steers.",
        );
        for p in &s.ports {
            if let Some(e) = &p.esp_steering {
                f.sample(name, &[("port", &p.name)], e.rules);
            }
        }
        let name = "espgw_port_esp_steering_refused";
        let mut f = Family::start(
            &mut out,
            name,
            "gauge",
            "ESP steering: 1 for each form of rule (esp4, esp6, udp4, udp6) the port's NIC refused (those SAs go by RSS).",
        );
        for p in &s.ports {
            for form in p.esp_steering.iter().flat_map(|e| &e.refused) {
                f.sample(name, &[("port", &p.name), ("form", form)], 1u64);
            }
        }
    }
    {
        let name = "espgw_worker_busy_ratio";
        let mut f = Family::start(
            &mut out,
            name,
            "gauge",
            "Share of the worker's polls that found packets (0..1).",
        );
        for w in &s.workers {
            f.sample(name, &[("worker", &w.worker.to_string())], w.busy_ratio);
        }
    }
    for (name, help, get) in [
        (
            "espgw_worker_mss_clamped_total",
            "TCP SYN / SYN-ACK segments whose MSS option the worker lowered (mss_clamp).",
            (|w: &super::status::WorkerLoad| w.mss_clamped) as fn(&_) -> u64,
        ),
        (
            "espgw_worker_spread_out_total",
            "Decrypt fan-out: packets the worker handed to other workers to decrypt.",
            |w| w.spread_out,
        ),
        (
            "espgw_worker_spread_in_total",
            "Decrypt fan-out: packets the worker decrypted for other workers.",
            |w| w.spread_in,
        ),
        (
            "espgw_worker_spread_kept_total",
            "Decrypt fan-out: packets of groups worth spreading the worker wanted help with but decrypted itself, every other worker being busy with its own traffic or its inbox full.",
            |w| w.spread_kept,
        ),
        (
            "espgw_worker_spread_unneeded_total",
            "Decrypt fan-out (spread_decrypt = auto): packets of groups worth spreading the worker decrypted itself because it kept up alone.",
            |w| w.spread_unneeded,
        ),
        (
            "espgw_worker_spread_solo_total",
            "Decrypt fan-out (spread_decrypt = auto): packets of groups worth spreading the worker decrypted itself while behind because its live check (spread_recheck_ms) had the fan-out off.",
            |w| w.spread_solo,
        ),
        (
            "espgw_worker_reorder_late_sent_total",
            "Decrypt fan-out with spread_late = send: packets of late parts sent out of arrival order.",
            |w| w.reorder_late_sent,
        ),
        (
            "espgw_worker_sa_handoff_out_total",
            "Per-CPU SA handoff: packets the worker received and handed to the worker of their RFC 9611 per-CPU SA.",
            |w| w.sa_handoff_out,
        ),
        (
            "espgw_worker_sa_handoff_in_total",
            "Per-CPU SA handoff: packets other workers handed to this one to decrypt and forward.",
            |w| w.sa_handoff_in,
        ),
        (
            "espgw_worker_sa_handoff_kept_total",
            "Per-CPU SA handoff: packets of another worker's SA the worker decrypted itself, that worker's handoff ring being full (or no job box free) and nothing of the SA queued there.",
            |w| w.sa_handoff_kept,
        ),
    ] {
        let mut f = Family::start(&mut out, name, "counter", help);
        for w in &s.workers {
            f.sample(name, &[("worker", &w.worker.to_string())], get(w));
        }
    }
    {
        let name = "espgw_worker_spread_trials_total";
        let mut f = Family::start(
            &mut out,
            name,
            "counter",
            "Decrypt fan-out's live check (spread_recheck_ms): trials by verdict: on (the fan-out delivered as much as the worker alone), off (less: off until the next trial), keeping_up (alone the worker kept up) and no_helper (no other worker was free), the last two measuring nothing.",
        );
        for w in &s.workers {
            let worker = w.worker.to_string();
            for (i, verdict) in super::status::SPREAD_TRIAL_VERDICTS.iter().enumerate() {
                let n = w.spread_trials.get(i).copied().unwrap_or(0);
                f.sample(name, &[("worker", &worker), ("verdict", verdict)], n);
            }
        }
    }
    {
        let name = "espgw_worker_spread_trial_rate_pps";
        let mut f = Family::start(
            &mut out,
            name,
            "gauge",
            "Decrypt fan-out's live check: packets per second the worker delivered in its last trial with the fan-out and without it (0 before the first trial).",
        );
        for w in &s.workers {
            let worker = w.worker.to_string();
            for (fan_out, pps) in [
                ("with", w.spread_trial_with_pps),
                ("without", w.spread_trial_without_pps),
            ] {
                f.sample(name, &[("worker", &worker), ("fan_out", fan_out)], pps);
            }
        }
    }
    {
        let name = "espgw_worker_spread_off";
        let mut f = Family::start(
            &mut out,
            name,
            "gauge",
            "Decrypt fan-out's live check: 1 while the fan-out is off for the worker (its last trial found it slower than the worker alone, or it started off over the start-up probe's limit and no trial has turned it on yet).",
        );
        for w in &s.workers {
            let off = u64::from(w.spread_off);
            f.sample(name, &[("worker", &w.worker.to_string())], off);
        }
    }
    {
        // A Prometheus histogram of the counts per bucket (cumulative here).
        let name = "espgw_worker_spread_part_return_seconds";
        let mut f = Family::start(
            &mut out,
            name,
            "histogram",
            "Decrypt fan-out: how long the parts a worker handed out took to come back from the worker that decrypted them (what spread_wait_us must cover).",
        );
        let bucket = format!("{name}_bucket");
        for w in &s.workers {
            let worker = w.worker.to_string();
            let mut seen = 0u64;
            for (i, bound) in super::status::SPREAD_BACK_BOUNDS_US.iter().enumerate() {
                seen += w.spread_back.get(i).copied().unwrap_or(0);
                let le = format!("{}", *bound as f64 / 1e6);
                f.sample(&bucket, &[("worker", &worker), ("le", &le)], seen);
            }
            let count: u64 = w.spread_back.iter().sum();
            f.sample(&bucket, &[("worker", &worker), ("le", "+Inf")], count);
            f.sample(
                &format!("{name}_sum"),
                &[("worker", &worker)],
                w.spread_back_ns as f64 / 1e9,
            );
            f.sample(&format!("{name}_count"), &[("worker", &worker)], count);
        }
    }
    {
        let name = "espgw_drops_total";
        let mut f = Family::start(&mut out, name, "counter", "Packets dropped, by reason.");
        for (reason, n) in &s.drops {
            f.sample(name, &[("reason", reason)], n);
        }
    }
    for (name, help, get) in [
        (
            "espgw_sa_packets_total",
            "Packets the SA encrypted (out) or decrypted (in).",
            (|sa: &SaInfo| sa.packets) as fn(&_) -> u64,
        ),
        (
            "espgw_sa_bytes_total",
            "Inner (plaintext) bytes the SA carried.",
            |sa| sa.bytes,
        ),
    ] {
        let mut f = Family::start(&mut out, name, "counter", help);
        for sa in &s.sas {
            let labels = sa_labels(sa);
            f.sample(name, &as_refs(&labels), get(sa));
        }
    }
    {
        let name = "espgw_sa_drops_total";
        let mut f = Family::start(
            &mut out,
            name,
            "counter",
            "Packets the SA dropped, by reason.",
        );
        for sa in &s.sas {
            let labels = sa_labels(sa);
            for (reason, n) in &sa.drops {
                let mut l = as_refs(&labels);
                l.push(("reason", reason));
                f.sample(name, &l, n);
            }
        }
    }
    for (name, help, get) in [
        (
            "espgw_tunnel_packets_total",
            "Packets the tunnel's SAs carried, past SAs included.",
            (|t: &TunnelTotals| t.packets) as fn(&_) -> u64,
        ),
        (
            "espgw_tunnel_bytes_total",
            "Inner bytes the tunnel's SAs carried, past SAs included.",
            |t| t.bytes,
        ),
    ] {
        let mut f = Family::start(&mut out, name, "counter", help);
        for t in &s.tunnels {
            f.sample(
                name,
                &[("tunnel", &t.tunnel), ("dir", t.dir.name())],
                get(t),
            );
        }
    }
    {
        let name = "espgw_tunnel_drops_total";
        let mut f = Family::start(
            &mut out,
            name,
            "counter",
            "Packets the tunnel's SAs dropped, by reason, past SAs included.",
        );
        for t in &s.tunnels {
            for (reason, n) in &t.drops {
                f.sample(
                    name,
                    &[
                        ("tunnel", &t.tunnel),
                        ("dir", t.dir.name()),
                        ("reason", reason),
                    ],
                    n,
                );
            }
        }
    }
    for (name, help, get) in [
        (
            "espgw_sa_lifetime_remaining_seconds",
            "Seconds until the SA's hard lifetime (SAs with a time limit only).",
            (|sa: &SaInfo| sa.lifetime_left.seconds) as fn(&_) -> Option<u64>,
        ),
        (
            "espgw_sa_lifetime_remaining_bytes",
            "Bytes left before the SA's hard lifetime (SAs with a byte limit only).",
            |sa| sa.lifetime_left.bytes,
        ),
        (
            "espgw_sa_lifetime_remaining_packets",
            "Packets left before the SA's hard lifetime (SAs with a packet limit only).",
            |sa| sa.lifetime_left.packets,
        ),
    ] {
        let mut f = Family::start(&mut out, name, "gauge", help);
        for sa in &s.sas {
            if let Some(v) = get(sa) {
                let labels = sa_labels(sa);
                f.sample(name, &as_refs(&labels), v);
            }
        }
    }
    {
        let name = "espgw_sa_state";
        let mut f = Family::start(
            &mut out,
            name,
            "gauge",
            "1 for the SA's current state (active, soft-expired, draining).",
        );
        for sa in &s.sas {
            let labels = sa_labels(sa);
            let mut l = as_refs(&labels);
            l.push(("state", sa.state.name()));
            f.sample(name, &l, 1);
        }
    }
    let e = &s.events;
    for (name, help, v) in [
        (
            "espgw_sa_soft_expiries_total",
            "SAs that reached a soft lifetime.",
            e.soft_expiries,
        ),
        (
            "espgw_sa_hard_expiries_total",
            "SAs removed at a hard lifetime.",
            e.hard_expiries,
        ),
        (
            "espgw_rekeys_total",
            "Rekey steps (new inbound SA installed, or outbound switched).",
            e.rekeys_inbound + e.rekeys_outbound,
        ),
        (
            "espgw_tunnels_added_total",
            "Tunnels added at run time.",
            e.tunnels_added,
        ),
        (
            "espgw_tunnels_deleted_total",
            "Tunnels deleted at run time.",
            e.tunnels_deleted,
        ),
    ] {
        let mut f = Family::start(&mut out, name, "counter", help);
        f.sample(name, &[], v);
    }
    {
        let name = "espgw_uptime_seconds";
        let mut f = Family::start(
            &mut out,
            name,
            "gauge",
            "Seconds since the gateway started.",
        );
        f.sample(name, &[], s.uptime_seconds);
    }
    out
}

/// A running metrics endpoint; dropping it stops the server.
pub struct MetricsServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl MetricsServer {
    /// Listens on `addr` (port 0 picks a free port; see [`Self::local_addr`]).
    pub fn bind(addr: SocketAddr, source: Arc<dyn StatsSource>) -> io::Result<MetricsServer> {
        Self::bind_with_deadline(addr, source, CONNECTION_DEADLINE)
    }

    /// [`Self::bind`] with another per-connection deadline (tests).
    pub fn bind_with_deadline(
        addr: SocketAddr,
        source: Arc<dyn StatsSource>,
        deadline: Duration,
    ) -> io::Result<MetricsServer> {
        let listener = TcpListener::bind(addr)?;
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let stop = Arc::clone(&stop);
            std::thread::Builder::new()
                .name("espgw-metrics".into())
                .spawn(move || accept_loop(listener, source, deadline, stop))?
        };
        info!(%addr, "metrics endpoint listening (GET /metrics)");
        Ok(MetricsServer {
            addr,
            stop,
            thread: Some(thread),
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the blocking accept; connection threads end by their deadline.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(2));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn accept_loop(
    listener: TcpListener,
    source: Arc<dyn StatsSource>,
    deadline: Duration,
    stop: Arc<AtomicBool>,
) {
    let active = Arc::new(AtomicUsize::new(0));
    for conn in listener.incoming() {
        if stop.load(Ordering::SeqCst) {
            break;
        }
        let Ok(stream) = conn else { continue };
        // The deadline starts at accept, before any byte is read.
        let until = Instant::now() + deadline;
        if active.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS {
            active.fetch_sub(1, Ordering::SeqCst);
            debug!("metrics: {MAX_CONNECTIONS} connections busy, closing a new one");
            continue;
        }
        let slot = Slot(Arc::clone(&active));
        let source = Arc::clone(&source);
        let spawned = std::thread::Builder::new()
            .name("espgw-metrics-conn".into())
            .spawn(move || {
                let _slot = slot;
                if let Err(e) = answer(&stream, source.as_ref(), until) {
                    debug!(error = %e, "metrics connection ended");
                }
            });
        if let Err(e) = spawned {
            warn!(error = %e, "metrics: cannot start a connection thread");
        }
    }
}

/// One connection's place among [`MAX_CONNECTIONS`]; freed on drop, also
/// when the thread could not start.
struct Slot(Arc<AtomicUsize>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A stream whose every read and write waits at most until `until`: the
/// socket timeout is set to the time left before each call, so many small
/// reads cannot add up past the deadline.
struct Deadlined<'a> {
    stream: &'a TcpStream,
    until: Instant,
}

impl Deadlined<'_> {
    fn time_left(&self) -> io::Result<Duration> {
        let left = self.until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "connection deadline passed",
            ));
        }
        Ok(left)
    }
}

impl Read for Deadlined<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.stream.set_read_timeout(Some(self.time_left()?))?;
        let mut s = self.stream;
        s.read(buf)
    }
}

impl Write for Deadlined<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.stream.set_write_timeout(Some(self.time_left()?))?;
        let mut s = self.stream;
        s.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        let mut s = self.stream;
        s.flush()
    }
}

fn answer(stream: &TcpStream, source: &dyn StatsSource, until: Instant) -> io::Result<()> {
    let mut reader = BufReader::new(Deadlined { stream, until }.take(8192));
    let mut request_line = String::new();
    reader.read_line(&mut request_line)?;
    // Read the headers to their end so the client sees a clean close.
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h)? == 0 || h == "\r\n" || h == "\n" {
            break;
        }
    }
    let mut parts = request_line.split_whitespace();
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    let (status, body, content_type) = match (method, path) {
        ("GET", "/metrics") => {
            let snapshot = source.snapshot();
            let mut body = render(&snapshot);
            source.extra_metrics(&snapshot.gateway, &mut body);
            ("200 OK", body, CONTENT_TYPE)
        }
        ("GET", _) => (
            "404 Not Found",
            "not found: try /metrics\n".to_string(),
            "text/plain",
        ),
        _ => (
            "405 Method Not Allowed",
            "only GET\n".to_string(),
            "text/plain",
        ),
    };
    let head = format!(
        "HTTP/1.0 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let mut w = Deadlined { stream, until };
    w.write_all(head.as_bytes())?;
    w.write_all(body.as_bytes())?;
    w.flush()
}

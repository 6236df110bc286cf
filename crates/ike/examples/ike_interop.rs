//! A test driver: the engine over real UDP sockets (ports 500 and 4500)
//! against one strongSwan charon, for tests/ike/interop.sh. Not a daemon:
//! it brings up one IKE SA with its first CHILD_SA, writes what it
//! installed to a file, and exits.
//!
//! usage: ike_interop initiate|respond LOCAL_IP REMOTE_IP OUT_FILE [rekey]
//!
//! With `rekey` it goes on through a CHILD_SA rekey, an IKE SA rekey and
//! a CHILD_SA rekey on the new IKE SA (started by us when initiating, by
//! the peer when responding), writing the second and third CHILD_SA to
//! OUT_FILE.rekey and OUT_FILE.rekey2.
//!
//! With `timed` instead of `rekey` it waits for the same three CHILD_SAs
//! and IKE SA rekey, started by the engine's own lifetimes (no explicit
//! calls): IKE_INTEROP_CHILD_REKEY_MS and IKE_INTEROP_IKE_REKEY_MS set the
//! connection's `child_rekey_time_ms` and `ike_rekey_time_ms`.
//!
//! IKE_INTEROP_PSK, IKE_INTEROP_PROPOSALS and IKE_INTEROP_ESP override the
//! PSK and proposals below. IKE_INTEROP_CERT, IKE_INTEROP_KEY and
//! IKE_INTEROP_CACERT (PEM files) switch to certificate authentication
//! (RFC 7427 signatures), validated at the system's wall-clock time. Otherwise fixed to the interop test's setup:
//! PSK authentication as a.example
//! with b.example, aes128gcm16-prfsha256-x25519, ESP aes128gcm16 (with
//! x25519 PFS on rekeys),
//! 10.1.0.0/24 to 10.2.0.0/24. OUT_FILE gets the CHILD_SA's SPIs and (test
//! keys only, for comparing with charon's log) its keys in hex; stdout
//! gets the events, which never contain keys.

use std::io::ErrorKind;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use espgw_ike::crypto::SystemRandom;
use espgw_ike::engine::{ChildSa, Connection, Engine, EngineConfig, Event};
use espgw_ike::message::Identification;

const PSK: &[u8] = b"espgw-strongswan-test-psk-0123456789";

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn report(c: &ChildSa) -> String {
    format!(
        "suite={}\ninbound_spi={:08x}\noutbound_spi={:08x}\ninbound_key={}\noutbound_key={}\ninbound_auth_key={}\noutbound_auth_key={}\nudp_encap={}\nlocal={}\nremote={}\n",
        c.suite.config_name(),
        c.inbound_spi,
        c.outbound_spi,
        hex(c.inbound.key.expose()),
        hex(c.outbound.key.expose()),
        hex(c.inbound.auth_key.expose()),
        hex(c.outbound.auth_key.expose()),
        c.udp_encap,
        c.local,
        c.remote,
    )
}

fn send_all(engine: &mut Engine<SystemRandom>, sockets: &[(SocketAddr, UdpSocket)]) {
    while let Some(t) = engine.poll_transmit() {
        let (_, s) = sockets
            .iter()
            .find(|(a, _)| *a == t.src)
            .expect("a socket for the source");
        s.send_to(&t.payload, t.dst).expect("send");
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    // Lifetimes (issue 11): `timed` is `rekey` driven by the engine's timers.
    let timed = args.get(5).map(String::as_str) == Some("timed");
    let rekey = args.get(5).map(String::as_str) == Some("rekey") || timed;
    if !(args.len() == 5 || rekey && args.len() == 6)
        || !(args[1] == "initiate" || args[1] == "respond")
    {
        eprintln!("usage: ike_interop initiate|respond LOCAL_IP REMOTE_IP OUT_FILE [rekey|timed]");
        std::process::exit(2);
    }
    let initiate = args[1] == "initiate";
    let local_ip: IpAddr = args[2].parse().expect("LOCAL_IP");
    let remote_ip: IpAddr = args[3].parse().expect("REMOTE_IP");
    let out_file = &args[4];
    let config = EngineConfig::default();
    let sockets: Vec<(SocketAddr, UdpSocket)> = [500, config.nat_t_port]
        .into_iter()
        .map(|port| {
            let addr = SocketAddr::new(local_ip, port);
            let s = UdpSocket::bind(addr).unwrap_or_else(|e| panic!("bind {addr}: {e}"));
            s.set_read_timeout(Some(Duration::from_millis(10))).unwrap();
            (addr, s)
        })
        .collect();
    // The environment may change the PSK and proposals (wrong-PSK and
    // proposal-family runs of tests/ike/interop.sh).
    let env = |k: &str, d: &str| std::env::var(k).unwrap_or_else(|_| d.to_string());
    let psk = env("IKE_INTEROP_PSK", std::str::from_utf8(PSK).unwrap());
    let proposals = env("IKE_INTEROP_PROPOSALS", "aes128gcm16-prfsha256-x25519");
    let esp_proposals = env("IKE_INTEROP_ESP", "aes128gcm16-x25519");
    let conn = Connection::new(
        "interop",
        SocketAddr::new(local_ip, 500),
        SocketAddr::new(remote_ip, 500),
        Identification::fqdn("a.example"),
        Some(Identification::fqdn("b.example")),
        psk.as_bytes(),
        &proposals,
        // The PFS group is used by CHILD_SA rekeys only.
        &esp_proposals,
        &["10.1.0.0/24"],
        &["10.2.0.0/24"],
    )
    .expect("connection");
    let mut conn = match std::env::var("IKE_INTEROP_CERT") {
        Ok(cert) => {
            let read = |p: &str| std::fs::read(p).unwrap_or_else(|e| panic!("{p}: {e}"));
            let key = read(&std::env::var("IKE_INTEROP_KEY").expect("IKE_INTEROP_KEY"));
            let ca = read(&std::env::var("IKE_INTEROP_CACERT").expect("IKE_INTEROP_CACERT"));
            conn.with_pem(&read(&cert), &key, &[&ca])
                .expect("certificates")
        }
        Err(_) => conn,
    };
    for (k, field) in [
        (
            "IKE_INTEROP_CHILD_REKEY_MS",
            &mut conn.lifetimes.child_rekey_time_ms,
        ),
        (
            "IKE_INTEROP_IKE_REKEY_MS",
            &mut conn.lifetimes.ike_rekey_time_ms,
        ),
    ] {
        if let Ok(v) = std::env::var(k) {
            *field = v.parse().expect("milliseconds");
        }
    }
    let mut engine = Engine::new(config, SystemRandom::new());
    let id = engine.add_connection(conn);
    let start = Instant::now();
    let now = || start.elapsed().as_millis() as u64;
    // The engine reads no clock: certificates are checked against this.
    let wall = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock after 1970");
    engine.set_unix_time(now(), wall.as_millis() as u64);
    if initiate {
        engine.initiate(now(), id).expect("initiate");
    }
    let mut buf = vec![0u8; 65536];
    let deadline = Duration::from_secs(30);
    let (mut installed, mut deleted) = (0, 0);
    let (mut ike_sa, mut child_spi) = (0u64, 0u32);
    let (mut ike_rekeyed, mut old_ike_deleted) = (false, false);
    // Dead peer detection: as initiator with `rekey`, once the rekeys are
    // done, one liveness check on the rekeyed IKE SA must be answered.
    let (mut dpd_sent, mut peer_alive) = (false, false);
    let mut done_at: Option<Instant> = None;
    loop {
        send_all(&mut engine, &sockets);
        while let Some(e) = engine.poll_event() {
            println!("{e}");
            match e {
                Event::ChildSaInstalled(c) => {
                    installed += 1;
                    ike_sa = c.ike_sa;
                    child_spi = c.inbound_spi;
                    let file = match installed {
                        1 => out_file.clone(),
                        2 => format!("{out_file}.rekey"),
                        _ => format!("{out_file}.rekey2"),
                    };
                    std::fs::write(&file, report(&c)).expect("write OUT_FILE");
                    if rekey && !timed && initiate && installed == 1 {
                        engine
                            .rekey_child_sa(now(), c.ike_sa, c.inbound_spi)
                            .expect("rekey");
                    }
                }
                Event::ChildSaDeleted { .. } => {
                    deleted += 1;
                    if rekey && !timed && initiate && deleted == 1 {
                        engine.rekey_ike_sa(now(), ike_sa).expect("IKE rekey");
                    }
                }
                Event::IkeSaRekeyed { new, .. } => {
                    ike_rekeyed = true;
                    ike_sa = new;
                }
                Event::IkeSaDeleted { ike_sa: gone } if gone != ike_sa => {
                    old_ike_deleted = true;
                    if rekey && !timed && initiate {
                        engine
                            .rekey_child_sa(now(), ike_sa, child_spi)
                            .expect("CHILD_SA rekey on the new IKE SA");
                    }
                }
                Event::PeerAlive { ike_sa: alive } if alive == ike_sa => peer_alive = true,
                Event::AuthFailed { .. }
                | Event::IkeSaFailed { .. }
                | Event::ChildSaFailed { .. }
                | Event::IkeRekeyFailed { .. }
                | Event::IkeSaDeleted { .. } => std::process::exit(1),
                _ => {}
            }
        }
        let rekeyed = installed >= 3 && deleted >= 2 && ike_rekeyed && old_ike_deleted;
        let dpd = rekey && !timed && initiate;
        if dpd && rekeyed && !dpd_sent {
            engine
                .check_liveness(now(), ike_sa)
                .expect("liveness check");
            dpd_sent = true;
        }
        let finished = if rekey {
            rekeyed && (!dpd || peer_alive)
        } else {
            installed >= 1
        };
        if finished && done_at.is_none() {
            done_at = Some(Instant::now());
        }
        // Once done, answer retransmissions for a moment before leaving.
        if done_at.is_some_and(|t| t.elapsed() > Duration::from_millis(500)) {
            return;
        }
        if start.elapsed() > deadline {
            eprintln!("not done within {deadline:?}; {:?}", engine.stats());
            std::process::exit(1);
        }
        for (local, s) in &sockets {
            match s.recv_from(&mut buf) {
                Ok((n, src)) => engine.handle_datagram(now(), src, *local, &buf[..n]),
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                Err(e) => panic!("recv: {e}"),
            }
        }
        if engine.poll_timeout().is_some_and(|t| t <= now()) {
            engine.handle_timeout(now());
        }
    }
}

//! The development transport end to end: two gateways' IKE services on
//! kernel UDP sockets over loopback (127.0.0.1 and 127.0.0.2, unprivileged
//! ports), each on its own thread with its own `LiveControl`; the control
//! requests `ike_list`, `ike_rekey`, `ike_terminate --child` and `ike_initiate` go through `IkeControl` as the
//! control socket sends them. No network namespace, no root.

#[path = "live_support.rs"]
mod support;

use std::net::{IpAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use espgw_control::config::Config;
use espgw_control::fixtures::GatewayToml;
use espgw_control::ike::{
    monotonic_ms, EngineConfig, IkeControl, IkeDriver, IkeService, SystemRandom, UdpTransport,
};
use espgw_control::live::protocol::{IkeCommand, IkeListReply};
use espgw_control::live::{monotonic_clock, Dir, LiveControl, SaManager};
use espgw_control::tables::Tables;
use support::*;

fn gateway(me: u8) -> Config {
    let peer = 3 - me;
    let mut g = GatewayToml::demo(me).default_action("discard");
    g.tunnels.clear();
    g.unprot_address = format!("127.0.0.{me}/8");
    let start = if me == 1 {
        "start_action = \"start\"\n"
    } else {
        ""
    };
    config(
        g.extra(&format!(
            "\n[[connection]]\nname = \"c\"\nlocal = \"127.0.0.{me}\"\nremote = \"127.0.0.{peer}\"\n\
             psk = \"loopback-test-key-0123456789abcdef\"\n{start}\n[[connection.child]]\n\
             name = \"net\"\nlocal_ts = [\"10.{me}.0.0/24\"]\nremote_ts = [\"10.{peer}.0.0/24\"]\n"
        ))
        .render(),
    )
}

/// Two ports free on both loopback addresses.
fn free_ports() -> (u16, u16) {
    for _ in 0..20 {
        let a = UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = UdpSocket::bind("127.0.0.1:0").unwrap();
        let (p, q) = (
            a.local_addr().unwrap().port(),
            b.local_addr().unwrap().port(),
        );
        if UdpSocket::bind(("127.0.0.2", p)).is_ok() && UdpSocket::bind(("127.0.0.2", q)).is_ok() {
            return (p, q);
        }
    }
    panic!("no free ports");
}

struct Gateway {
    live: Arc<LiveControl<Tables>>,
    ike: Arc<IkeService<SystemRandom>>,
}

fn start(me: u8, ports: (u16, u16), stop: &Arc<AtomicBool>) -> Gateway {
    let cfg = gateway(me);
    let live = Arc::new(LiveControl::new(
        &cfg,
        SaManager::with_control_tables(&cfg, 0).unwrap(),
        monotonic_clock(),
        Arc::new(()),
    ));
    let engine = EngineConfig {
        nat_t_port: ports.1,
        retransmit_base_ms: 200,
        ..EngineConfig::default()
    };
    let driver =
        IkeDriver::with_ike_port(&cfg.connections, engine, SystemRandom::new(), ports.0).unwrap();
    let ip: IpAddr = format!("127.0.0.{me}").parse().unwrap();
    let tx = UdpTransport::bind(ip, ports.0, ports.1).unwrap();
    let rx = tx.try_clone().unwrap();
    let ike = Arc::new(IkeService::new(driver, Box::new(tx), monotonic_ms()));
    assert!(live.set_ike(ike.clone()));
    ike.spawn_udp(live.clone(), rx, stop.clone()).unwrap();
    Gateway { live, ike }
}

fn out_spi(g: &Gateway) -> Option<u32> {
    let m = g.live.manager();
    m.sa_list(0)
        .iter()
        .find(|s| s.tunnel == "c/net" && s.dir == Dir::Out)
        .map(|s| s.spi)
}

fn inbound_spis(g: &Gateway) -> Vec<u32> {
    let m = g.live.manager();
    m.sa_list(0)
        .iter()
        .filter(|s| s.tunnel == "c/net" && s.dir == Dir::In)
        .map(|s| s.spi)
        .collect()
}

/// `cmd` through `g`'s control interface, as the control socket hands it
/// over; its answer.
fn ike(g: &Gateway, cmd: IkeCommand) -> serde_json::Value {
    IkeControl::command(&*g.ike, cmd, &mut g.live.manager()).unwrap()
}

/// `g`'s `ike_list` answer.
fn ike_list(g: &Gateway) -> IkeListReply {
    serde_json::from_value(ike(g, IkeCommand::List)).unwrap()
}

fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn two_gateways_over_loopback_udp() {
    if UdpSocket::bind("127.0.0.2:0").is_err() {
        eprintln!("skipped: 127.0.0.2 is not usable here");
        return;
    }
    let ports = free_ports();
    let stop = Arc::new(AtomicBool::new(false));
    let a = start(1, ports, &stop);
    let b = start(2, ports, &stop);
    a.ike.start(&mut a.live.manager());
    wait_for("the CHILD_SA on both sides", || {
        out_spi(&a).is_some() && out_spi(&b).is_some()
    });
    let (a_out, b_out) = (out_spi(&a).unwrap(), out_spi(&b).unwrap());
    assert_eq!(inbound_spis(&a), vec![b_out]);
    assert_eq!(inbound_spis(&b), vec![a_out]);

    let list = ike_list(&a);
    assert_eq!(list.sas.len(), 1);
    assert_eq!(list.sas[0].state, "established");
    assert_eq!(
        list.sas[0].remote.as_deref(),
        Some(&*format!("127.0.0.2:{}", ports.0))
    );

    // A CHILD_SA rekey asked for over the control interface.
    ike(
        &b,
        IkeCommand::Rekey {
            connection: "c".into(),
            child: Some("net".into()),
        },
    );
    wait_for("the rekeyed SAs", || {
        out_spi(&a).is_some_and(|s| s != a_out) && out_spi(&b).is_some_and(|s| s != b_out)
    });
    let (a_new, b_new) = (out_spi(&a).unwrap(), out_spi(&b).unwrap());
    assert!(inbound_spis(&a).contains(&b_new) && inbound_spis(&b).contains(&a_new));

    // The CHILD_SA alone deleted over the control interface (`ike
    // terminate c --child net`): both tunnels go, both IKE SAs stay.
    ike(
        &a,
        IkeCommand::Terminate {
            connection: "c".into(),
            child: Some("net".into()),
        },
    );
    wait_for("the CHILD_SA gone on both sides", || {
        out_spi(&a).is_none() && out_spi(&b).is_none()
    });
    for g in [&a, &b] {
        let list = ike_list(g);
        assert_eq!(list.sas.len(), 1, "{list:?}");
        assert_eq!(list.sas[0].state, "established", "{list:?}");
        assert!(list.sas[0].children.is_empty(), "{list:?}");
    }

    // `ike initiate c` on the childless IKE SA: a new CHILD_SA on it
    // (CREATE_CHILD_SA), not a second IKE SA.
    let ike_spi = |g: &Gateway| {
        let list = ike_list(g);
        list.sas.iter().map(|s| s.spi_i.clone()).collect::<Vec<_>>()
    };
    let before = ike_spi(&a);
    ike(
        &a,
        IkeCommand::Initiate {
            connection: "c".into(),
        },
    );
    wait_for("a new CHILD_SA on both sides", || {
        out_spi(&a).is_some() && out_spi(&b).is_some()
    });
    assert_eq!(ike_spi(&a), before, "the same single IKE SA");
    assert_eq!(ike_spi(&b).len(), 1);
    let (a_out, b_out) = (out_spi(&a).unwrap(), out_spi(&b).unwrap());
    assert!(inbound_spis(&a).contains(&b_out) && inbound_spis(&b).contains(&a_out));

    // Shutdown: gateway 1 deletes its IKE SA (still up), gateway 2 follows.
    assert_eq!(a.ike.shutdown(&mut a.live.manager()), 1);
    wait_for("the peer's delete", || ike_list(&b).sas.is_empty());
    stop.store(true, Ordering::Relaxed);
}

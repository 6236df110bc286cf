//! `keys_wireshark` over the control socket: a gateway whose IKE driver
//! set up an IKE SA and CHILD_SA with a peer (in memory) answers with the
//! engine's ikev2_decryption_table record and esp_sa records of its SAs,
//! and the keys in them are the peer's (checked crosswise).

#[path = "live_support.rs"]
mod support;

use std::sync::Arc;

use espgw_control::fixtures::GatewayToml;
use espgw_control::ike::{
    monotonic_ms, EngineConfig, IkeControl, IkeDriver, IkeService, IkeTransport, MemoryTransport,
    SystemRandom,
};
use espgw_control::live::{client, monotonic_clock, ControlServer, LiveControl, SaManager};
use espgw_control::tables::Tables;
use support::*;

fn gateway(me: u8) -> espgw_control::config::Config {
    let peer = 3 - me;
    // demo(me) keeps its static [[tunnel]]: its SAs are listed too.
    let g = GatewayToml::demo(me).default_action("discard");
    config(
        g.extra(&format!(
            "\n[[connection]]\nname = \"c\"\nlocal = \"192.0.2.{me}\"\nremote = \"192.0.2.{peer}\"\n\
             local_id = \"gw{me}.example\"\nremote_id = \"gw{peer}.example\"\n\
             psk = \"a-long-random-pre-shared-key-0123\"\n\
             proposals = [\"aes256-sha256-prfsha256-ecp256\"]\n\n[[connection.child]]\nname = \"net\"\n\
             local_ts = [\"10.{me}.5.0/24\"]\nremote_ts = [\"10.{peer}.5.0/24\"]\n\
             esp_proposals = [\"aes128gcm16\"]\n"
        ))
        .render(),
    )
}

#[test]
fn the_socket_hands_out_the_running_sas_keys_as_wireshark_records() {
    let (ca, cb) = (gateway(1), gateway(2));
    let mut da = IkeDriver::new(
        &ca.connections,
        EngineConfig::default(),
        SystemRandom::new(),
    )
    .unwrap();
    let mut db = IkeDriver::new(
        &cb.connections,
        EngineConfig::default(),
        SystemRandom::new(),
    )
    .unwrap();
    let mut ma: SaManager<Tables> = SaManager::with_control_tables(&ca, 0).unwrap();
    let mut mb: SaManager<Tables> = SaManager::with_control_tables(&cb, 0).unwrap();
    let (mut wa, mut wb) = (MemoryTransport::default(), MemoryTransport::default());
    let now = 1_000;
    da.initiate(now, "c", &mut ma).unwrap();
    loop {
        while let Some(t) = da.poll_transmit() {
            wa.send(t);
        }
        while let Some(t) = db.poll_transmit() {
            wb.send(t);
        }
        if let Some(t) = wa.sent.pop_front() {
            db.handle_datagram(now, t.src, t.dst, &t.payload, &mut mb);
        } else if let Some(t) = wb.sent.pop_front() {
            da.handle_datagram(now, t.src, t.dst, &t.payload, &mut ma);
        } else {
            break;
        }
    }
    let (a_net, b_net) = (
        ma.tunnel("c/net").unwrap().clone(),
        mb.tunnel("c/net").unwrap().clone(),
    );
    let want_ike = espgw_control::wireshark::ikev2_line(&db.ike_sa_secrets()[0]).unwrap();

    let dir = std::env::temp_dir().join(format!("espgw-keys-socket-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let control = Arc::new(LiveControl::new(&ca, ma, monotonic_clock(), Arc::new(())));
    let sock = dir.join("gw.sock");
    let _server = ControlServer::bind(&sock, control.clone()).unwrap();

    // Before the driver is connected: the manager's SAs (the static
    // tunnel's and the CHILD_SA's, two each), no IKE record.
    let r = client::keys_wireshark(&sock).unwrap();
    assert!(r.ikev2.is_empty());
    assert_eq!(r.esp_sa.len(), 4, "{r:?}");
    let before = r.esp_sa.clone();

    let ike: Arc<dyn IkeControl<Tables>> = Arc::new(IkeService::new(
        da,
        Box::new(MemoryTransport::default()),
        monotonic_ms(),
    ));
    assert!(control.set_ike(ike));
    let r = client::keys_wireshark(&sock).unwrap();
    // The peer's engine derived the same record.
    assert_eq!(r.ikev2, vec![want_ike.as_str().to_string()]);
    // The CHILD_SA's two records, crosswise with the peer's tunnel: our
    // outbound key is its inbound key.
    let spi_line = |spi: u32| {
        r.esp_sa
            .iter()
            .find(|l| l.contains(&format!("\"{spi:#010x}\"")))
            .unwrap_or_else(|| panic!("no esp_sa record for {spi:#x}: {r:?}"))
            .clone()
    };
    let out = spi_line(a_net.outbound.spi);
    assert_eq!(a_net.outbound.spi, b_net.inbound.spi);
    assert!(out.contains(&format!("0x{}", b_net.inbound.key.to_hex().as_str())));
    assert!(
        out.starts_with("\"IPv4\",\"192.0.2.1\",\"192.0.2.2\""),
        "{out}"
    );
    let inb = spi_line(a_net.inbound.spi);
    assert!(inb.contains(&format!("0x{}", b_net.outbound.key.to_hex().as_str())));
    assert_eq!(r.esp_sa, before);
    // Debug of the reply shows counts, not keys.
    assert!(!format!("{r:?}").contains("0x"));
    let _ = std::fs::remove_dir_all(&dir);
}

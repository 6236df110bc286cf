//! `[dataplane] tx_checksum_offload`: whether `espgw run` leaves the UDP
//! checksum of ESP in UDP over IPv6 to a NIC that offers TX UDP checksum
//! offload (docs/dataplane.md, "TX checksum offload").

mod common;
use common::*;

#[test]
fn auto_by_default_off_when_asked() {
    for (lines, want) in [
        ("", true),
        ("tx_checksum_offload = \"auto\"", true),
        ("tx_checksum_offload = \"off\"", false),
    ] {
        let (config, diags) =
            parse(&with_workers_dp(1, lines)).unwrap_or_else(|d| panic!("{}", render(&d)));
        assert_eq!(config.dataplane.tx_checksum_offload, want, "{lines:?}");
        let shown = render(&diags);
        assert!(!shown.contains("tx_checksum_offload"), "{lines:?}: {shown}");
    }
}

#[test]
fn another_value_names_the_key_and_the_choices() {
    for bad in ["tx_checksum_offload = \"on\"", "tx_checksum_offload = true"] {
        let shown = render(&errors(&with_workers_dp(1, bad)));
        assert!(
            shown.contains("dataplane.tx_checksum_offload"),
            "{bad}: {shown}"
        );
    }
    let shown = render(&errors(&with_workers_dp(1, "tx_checksum_offload = \"on\"")));
    assert!(
        shown.contains("\"auto\"") && shown.contains("\"off\""),
        "{shown}"
    );
}

/// `Config::may_send_esp_in_udp_v6`: the ports `espgw run` asks for the
/// offload (any TX offload moves some NICs' whole port to a slower TX
/// path, so only where ESP in UDP over IPv6 may leave): a manual tunnel
/// from an IPv6 address in UDP, or an IKE connection from an IPv6 address
/// (whose CHILD_SAs may go in UDP), on that port; not the protected port,
/// not IPv4, not bare ESP.
#[test]
fn only_ports_that_esp_in_udp_over_ipv6_may_leave_by() {
    use espgw_control::config::PortId;
    use espgw_control::fixtures::GatewayToml;
    let (prot, unprot) = (PortId(0), PortId(1));
    let config = |v6: bool, encap: Option<&str>, connection: bool| {
        let mut gw = GatewayToml::demo(1);
        let local = if v6 { "2001:db8::1" } else { "192.0.2.1" };
        if v6 {
            gw.unprot_address = "2001:db8::1/64".into();
        }
        let encap = encap.map(String::from);
        gw = gw.map_tunnels(move |mut t| {
            t.local = local.into();
            t.remote = if v6 { "2001:db8::2" } else { "192.0.2.2" }.into();
            t.encap = encap.clone();
            if connection {
                // Out of the connection's way.
                t.local_ts = vec!["10.1.9.0/24".into()];
                t.encap = None;
            }
            t
        });
        if connection {
            let remote = if v6 { "2001:db8::2" } else { "192.0.2.2" };
            gw.extra = format!(
                "[[connection]]\nname = \"c\"\nlocal = \"{local}\"\nremote = \"{remote}\"\n\
                 psk = \"a-long-random-pre-shared-key-0123\"\n\n[[connection.child]]\n\
                 name = \"net\"\nlocal_ts = [\"10.1.0.0/24\"]\nremote_ts = [\"10.2.0.0/24\"]\n"
            );
        }
        let (config, _) = parse(&gw.render()).unwrap_or_else(|d| panic!("{}", render(&d)));
        config
    };
    for (v6, encap, connection, want) in [
        (true, Some("udp"), false, true),
        (true, None, false, false),
        (false, Some("udp"), false, false),
        (true, None, true, true),
        (false, None, true, false),
    ] {
        let c = config(v6, encap, connection);
        assert_eq!(
            c.may_send_esp_in_udp_v6(unprot),
            want,
            "IPv6 {v6}, encap {encap:?}, connection {connection}"
        );
        assert!(!c.may_send_esp_in_udp_v6(prot), "the protected port");
        // `espgw check` says the same.
        let summary = espgw_control::config::Summary(&c).to_string();
        let line = if want {
            "TX UDP checksum offload asked of port(s) unprot where"
        } else {
            "TX UDP checksum offload asked of no port"
        };
        assert!(summary.contains(line), "{summary}");
    }
}

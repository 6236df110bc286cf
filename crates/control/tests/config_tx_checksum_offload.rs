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

//! `[dataplane] mbufs`: sized to the rings, caches and bursts when the
//! config leaves it out; a smaller value set by hand is kept and warned
//! about (a PCI NIC fills its RX rings from the pool when it starts).

mod common;
use common::*;

use espgw_control::config::{mbufs_needed, Config, QUEUE_DESCRIPTORS};

/// The base config with `workers`, PCI ports or the base's net_ring ones,
/// and extra `[dataplane]` lines; parsed, with whether `dataplane.mbufs`
/// was warned about for the rings.
fn parsed(workers: u32, pci: bool, lines: &str) -> (Config, bool) {
    let mut text = with(&base(), "workers = 2", &format!("workers = {workers}"));
    if pci {
        text = with(&text, "\"net_ring0\"", "\"0000:03:00.0\"");
        text = with(&text, "\"net_ring1\"", "\"0000:03:00.1\"");
    }
    let text = with(
        &text,
        "poll = \"busy\"",
        &format!("poll = \"busy\"\n{lines}"),
    );
    let (config, diags) = parse(&text).unwrap_or_else(|d| panic!("{}", render(&d)));
    let shown = render(&diags);
    let warned = shown.contains("dataplane.mbufs") && shown.contains("rings");
    (config, warned)
}

#[test]
fn left_out_it_covers_sixteen_workers_on_two_pci_ports() {
    let (config, warned) = parsed(16, true, "");
    let dp = &config.dataplane;
    assert!(!dp.mbufs_set);
    assert!(!warned);
    // 2 ports x 16 queues x (512 RX + 512 TX) = 32768 in rings alone.
    let need = mbufs_needed(dp, &config.ports);
    assert_eq!(need.rings, 2 * 16 * 2 * u64::from(QUEUE_DESCRIPTORS));
    assert_eq!(need.caches, 16 * 256 * 3 / 2);
    assert_eq!(need.bursts, 2 * 16 * 32);
    assert!(
        u64::from(dp.mbufs) >= need.total(),
        "{} < {need:?}",
        dp.mbufs
    );
    assert_eq!(dp.mbufs, 65535, "the next 2^n - 1");
}

#[test]
fn left_out_it_stays_at_the_default_where_that_suffices() {
    // Virtual devices hold no buffers in rings: two workers need little.
    let (config, _) = parsed(2, false, "");
    assert_eq!(config.dataplane.mbufs, 8191);
    // Two workers on two PCI ports: 4096 in rings, within the default.
    let (config, _) = parsed(2, true, "");
    assert_eq!(config.dataplane.mbufs, 8191);
    // Pipeline mode: one queue pair per port whatever the workers, but 17
    // lcores' caches and, above all, the rings between the I/O lcore and
    // each worker (one in, one out per port) outgrow the default.
    let (config, _) = parsed(16, true, "mode = \"pipeline\"");
    let need = mbufs_needed(&config.dataplane, &config.ports);
    assert_eq!(
        (need.rings, need.caches, need.pipeline_rings),
        (2048, 17 * 384, 16 * 3 * 1024)
    );
    assert_eq!(config.dataplane.mbufs, 65535);
    // Two pipeline workers on virtual devices: the rings still fit 8191.
    let (config, _) = parsed(2, false, "mode = \"pipeline\"");
    assert_eq!(config.dataplane.mbufs, 8191);
}

#[test]
fn set_below_the_need_it_is_kept_and_warned_about_with_the_arithmetic() {
    let text = with(&base(), "workers = 2", "workers = 16");
    let text = with(&text, "\"net_ring0\"", "\"0000:03:00.0\"");
    let text = with(&text, "\"net_ring1\"", "\"0000:03:00.1\"");
    let text = with(&text, "poll = \"busy\"", "poll = \"busy\"\nmbufs = 8191");
    let (config, diags) = parse(&text).unwrap_or_else(|d| panic!("{}", render(&d)));
    assert_eq!(config.dataplane.mbufs, 8191, "kept");
    assert!(config.dataplane.mbufs_set);
    let shown = render(&diags);
    assert!(
        shown.contains("dataplane.mbufs")
            && shown.contains("32768 in the ports' rings")
            && shown.contains("6144 in 16 lcores' caches")
            && shown.contains("65535 or more"),
        "{shown}"
    );
    // The warning points at the line that set it.
    assert!(
        shown.contains(&format!("test.toml:{}:", line_of(&text, "mbufs = 8191"))),
        "{shown}"
    );
    let (_, warned) = parsed(16, true, "mbufs = 65535");
    assert!(!warned);
    let (_, warned) = parsed(16, false, "mbufs = 8191");
    assert!(!warned, "virtual devices: no rings to fill");
}

/// `espgw check` says whether the pool was sized or set.
#[test]
fn check_says_the_pool_was_sized() {
    let (config, _) = parsed(16, true, "");
    let summary = espgw_control::config::Summary(&config).to_string();
    assert!(
        summary.contains("65535 mbufs (sized to the rings, caches and bursts)"),
        "{summary}"
    );
    let (config, _) = parsed(16, true, "mbufs = 65535");
    let summary = espgw_control::config::Summary(&config).to_string();
    assert!(summary.contains("65535 mbufs, mtu"), "{summary}");
}

/// Without hugepages the EAL has only `-m` (64 MiB by default): the sized
/// pool is held to what that holds, and the shortfall is warned about.
#[test]
fn without_hugepages_the_size_is_held_to_the_eal_memory() {
    let (config, diags) = parse(&with(
        &with(
            &with(&base(), "workers = 2", "workers = 16"),
            "\"net_ring0\"",
            "\"0000:03:00.0\"",
        ),
        "poll = \"busy\"",
        "poll = \"busy\"\neal = [\"--no-huge\", \"-m\", \"64\"]",
    ))
    .unwrap_or_else(|d| panic!("{}", render(&d)));
    assert_eq!(config.dataplane.mbufs, 16383, "64 MiB holds about 21000");
    let shown = render(&diags);
    assert!(
        shown.contains("dataplane.mbufs")
            && shown.contains("sized to 16383, not the 32767")
            && shown.contains("`--no-huge` gives the EAL 64 MiB"),
        "{shown}"
    );
    // With enough memory: the need, no warning.
    let (config, diags) = parse(&with(
        &with(&base(), "workers = 2", "workers = 16"),
        "poll = \"busy\"",
        "poll = \"busy\"\neal = [\"--no-huge\", \"-m\", \"512\"]",
    ))
    .unwrap_or_else(|d| panic!("{}", render(&d)));
    assert_eq!(config.dataplane.mbufs, 8191);
    assert!(!render(&diags).contains("dataplane.mbufs"));
}

/// An af_xdp port's RX queues take their fill rings' buffers from the pool
/// when they are set up: counted like a PCI port's rings.
#[test]
fn af_xdp_fill_rings_count() {
    let text = with(&base(), "workers = 2", "workers = 8");
    let text = with(&text, "\"net_ring1\"", "\"net_af_xdp0,iface=eth1\"");
    let (config, _) = parse(&text).unwrap_or_else(|d| panic!("{}", render(&d)));
    let need = mbufs_needed(&config.dataplane, &config.ports);
    assert_eq!(need.rings, 8 * 1024, "one af_xdp port, 8 RX queues");
    assert_eq!(config.dataplane.mbufs, 16383);
}

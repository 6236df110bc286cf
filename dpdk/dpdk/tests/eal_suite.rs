//! Everything that needs a live EAL, in one test: DPDK's EAL can be
//! initialised once per process, so the sub-cases run in sequence here.
//!
//! Needs root (DPDK opens /dev and /proc/self/pagemap); as non-root, and
//! for the veth sub-cases where `ip link add` fails, it skips: see `skip`
//! (a failure in CI, where nothing may be skipped).

use dpdk::error::Error;
use dpdk::{lcore, Burst, Eal, Mbuf, Mempool, Port, PortConfig, Ring, RingMode, SOCKET_ANY};
use espgw_wire::buf::{NoRoom, PacketBuf, VecBuf};

#[path = "../../../tests/support/skip.rs"]
mod skip_rule;
use skip_rule::{is_root, skip};

const DATA_ROOM: u16 = 2048 + dpdk::MBUF_HEADROOM;

fn eal_args() -> Vec<String> {
    let cpus = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let lcores = if cpus >= 2 { "0-1" } else { "0" };
    // --no-huge implies legacy memory, which DPDK 22.11 refuses together with
    // --in-memory; --no-shconf (half of --in-memory) keeps no shared files,
    // and a per-process prefix keeps parallel test runs apart.
    let prefix = format!("--file-prefix=espgw-dpdk-test-{}", std::process::id());
    [
        "-l",
        lcores,
        "-m",
        "256",
        "--no-huge",
        "--no-shconf",
        &prefix,
        "--no-pci",
        "--no-telemetry",
        "--log-level=lib.eal:warning",
        "--vdev=net_ring0",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

#[test]
fn eal_suite() {
    if !is_root() {
        skip(
            "eal_suite (dpdk/dpdk/tests/eal_suite.rs)",
            "the DPDK EAL tests need root (run with sudo or as root, as CI does)",
        );
        return;
    }
    let eal = Eal::init(&eal_args()).expect("EAL init");
    eal_refuses_second_init();
    let pool = Mempool::new("test_pool", 1023, 32, DATA_ROOM, SOCKET_ANY).expect("mempool");
    mbuf_fresh_layout(&pool);
    mbuf_ops_match_vecbuf_model(&pool);
    mempool_accounting_and_exhaustion();
    burst_semantics(&pool);
    ring_round_trip(&pool);
    ring_port_loopback(&pool);
    port_mtu_needs_matching_data_room(&pool);
    pcap_hotplug_write_then_read_back(&pool);
    lcore_launch();
    registered_thread_uses_the_pool(&pool);
    null_port_gets_rss_with_two_queues(&pool);
    flow_rules_refused_without_a_flow_api(&pool);
    port_opens_once();
    af_packet_over_veth(&pool);
    af_packet_jumbo_over_veth(&pool);
    tap_port_completes_the_udp_checksum_left_to_it(&pool);
    drop(pool);
    drop(eal);
    assert!(
        Mempool::new("after", 63, 0, DATA_ROOM, SOCKET_ANY).is_err(),
        "no objects after EAL drop"
    );
    println!("eal_suite: all sub-cases passed");
}

fn eal_refuses_second_init() {
    let err = Eal::init(&eal_args()).expect_err("second init must fail");
    assert_eq!(err.errno(), 114, "EALREADY, got {err}");
}

fn mbuf_fresh_layout(pool: &Mempool) {
    let m = pool.alloc().expect("alloc");
    assert_eq!(m.len(), 0);
    assert_eq!(m.headroom(), usize::from(dpdk::MBUF_HEADROOM));
    assert_eq!(m.tailroom(), 2048);
    assert_eq!(m.nb_segs(), 1);
}

/// A tiny deterministic generator (xorshift64*) for the op sequences.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// Every PacketBuf op on an mbuf must behave exactly like VecBuf (an
/// independent implementation of the same contract) with the same room,
/// including the NoRoom answers at the headroom/tailroom/length limits.
fn mbuf_ops_match_vecbuf_model(pool: &Mempool) {
    let mut m = pool.alloc().expect("alloc");
    let mut model = VecBuf::with_room(&[], usize::from(dpdk::MBUF_HEADROOM), 2048);
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut no_room_seen = [false; 4];
    for step in 0..20_000 {
        let op = rng.next() % 4;
        // Mostly in range, sometimes just past the limit, sometimes far past.
        let limit = match op {
            0 => model.headroom(),
            1 => model.tailroom(),
            _ => model.len(),
        };
        let n = match rng.next() % 8 {
            0 => limit,
            1 => limit + 1,
            2 => limit + 5000,
            _ => (rng.next() as usize) % (limit + 1),
        };
        let (a, b): (Result<(), NoRoom>, Result<(), NoRoom>) = match op {
            0 => (m.prepend(n), model.prepend(n)),
            1 => (m.append(n), model.append(n)),
            2 => (m.adj(n), model.adj(n)),
            _ => (m.trim(n), model.trim(n)),
        };
        assert_eq!(a, b, "step {step}: op {op} n {n}");
        if a.is_err() {
            no_room_seen[op as usize] = true;
        }
        // Fill the packet with a step-specific pattern through both views.
        let fill = step as u8;
        m.data_mut()
            .iter_mut()
            .enumerate()
            .for_each(|(i, x)| *x = fill ^ i as u8);
        model
            .data_mut()
            .iter_mut()
            .enumerate()
            .for_each(|(i, x)| *x = fill ^ i as u8);
        assert_eq!(m.data(), model.data(), "step {step}");
        assert_eq!(
            (m.headroom(), m.tailroom()),
            (model.headroom(), model.tailroom()),
            "step {step}"
        );
        assert_eq!(m.pkt_len() as usize, m.len(), "pkt_len follows data_len");
    }
    assert_eq!(
        no_room_seen, [true; 4],
        "every op hit its limit at least once"
    );

    let mut m = pool.alloc().expect("alloc");
    m.extend_from_slice(b"hello").unwrap();
    m.prepend(2).unwrap();
    m.data_mut()[..2].copy_from_slice(b">>");
    assert_eq!(m.data(), b">>hello");
    assert_eq!(m.extend_from_slice(&vec![0u8; 2048]), Err(NoRoom));
    assert_eq!(
        m.data(),
        b">>hello",
        "a failed append leaves the packet unchanged"
    );
}

fn mempool_accounting_and_exhaustion() {
    let pool = Mempool::new("small_pool", 63, 0, DATA_ROOM, SOCKET_ANY).expect("mempool");
    assert_eq!((pool.in_use(), pool.available()), (0, 63));
    let mut held = Vec::new();
    while let Some(m) = pool.alloc() {
        held.push(m);
    }
    assert_eq!(held.len(), 63);
    assert_eq!(pool.in_use(), 63);
    drop(held);
    assert_eq!(pool.in_use(), 0, "dropping an Mbuf returns it");

    let mut burst: Burst<64> = Burst::new();
    let err = pool
        .alloc_bulk(&mut burst, 64)
        .expect_err("more than the pool holds");
    assert_eq!(err.errno(), 12, "ENOMEM: {err}");
    assert!(burst.is_empty(), "all or nothing");
    pool.alloc_bulk(&mut burst, 40).unwrap();
    assert_eq!((burst.len(), pool.in_use()), (40, 40));
    let err = pool
        .alloc_bulk(&mut burst, 25)
        .expect_err("burst has 24 free slots");
    assert_eq!(err.errno(), 28, "ENOSPC: {err}");
    drop(burst);
    assert_eq!(pool.in_use(), 0, "dropping a Burst frees what it holds");
}

fn burst_semantics(pool: &Mempool) {
    let mut burst: Burst<4> = Burst::new();
    for i in 0..4u8 {
        let mut m = pool.alloc().unwrap();
        m.extend_from_slice(&[i]).unwrap();
        burst.push(m).unwrap();
    }
    let extra = pool.alloc().unwrap();
    let extra = burst
        .push(extra)
        .expect_err("full burst hands the mbuf back");
    drop(extra);
    let before = pool.in_use();
    burst.retain(|m| m.data()[0] % 2 == 0);
    assert_eq!(pool.in_use(), before - 2, "retain frees the rejected mbufs");
    let order: Vec<u8> = burst.iter().map(|m| m.data()[0]).collect();
    assert_eq!(order, [0, 2]);
    let last = burst.swap_remove(0);
    assert_eq!(last.data(), &[0]);
    assert_eq!(burst.as_slice()[0].data(), &[2]);
}

fn ring_round_trip(pool: &Mempool) {
    let ring = Ring::new("test_ring", 8, SOCKET_ANY, RingMode::SPSC).expect("ring");
    let mut producer = ring.producer().unwrap();
    assert_eq!(ring.producer().expect_err("single producer").errno(), 16);
    let mut consumer = ring.consumer().unwrap();

    let mut burst: Burst<16> = Burst::new();
    for i in 0..10u8 {
        let mut m = pool.alloc().unwrap();
        m.extend_from_slice(&[i; 3]).unwrap();
        burst.push(m).unwrap();
    }
    assert_eq!(producer.enqueue_burst(&mut burst), 8, "ring holds 8");
    assert_eq!(ring.len(), 8);
    let left: Vec<u8> = burst.iter().map(|m| m.data()[0]).collect();
    assert_eq!(left, [8, 9], "the unsent mbufs stay in the burst, in order");
    burst.clear();

    let mut out: Burst<16> = Burst::new();
    assert_eq!(consumer.dequeue_burst(&mut out), 8);
    let got: Vec<u8> = out.iter().map(|m| m.data()[0]).collect();
    assert_eq!(got, [0, 1, 2, 3, 4, 5, 6, 7], "FIFO order, contents intact");
    assert!(ring.is_empty());

    // Mbufs left in a ring are freed with it.
    let in_use = pool.in_use();
    producer.enqueue_burst(&mut out);
    drop((producer, consumer, ring));
    assert_eq!(pool.in_use(), in_use - 8);
}

fn frame(i: u8, len: usize) -> Vec<u8> {
    let mut f = vec![0u8; len];
    f[..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 1]); // dst
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 2]); // src
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    for (k, b) in f[14..].iter_mut().enumerate() {
        *b = i.wrapping_add(k as u8);
    }
    f
}

/// net_ring0 (from --vdev) loops its TX queue to its RX queue.
fn ring_port_loopback(pool: &Mempool) {
    let mut port = Port::open("net_ring0").expect("open net_ring0");
    assert_eq!(dpdk::port_id_by_name("net_ring0"), Some(port.id()));
    let info = port.info().unwrap();
    println!("net_ring0: {info:?}");
    port.configure(&PortConfig::default(), pool)
        .expect("configure");
    assert_eq!(port.rss_flow_types(), 0, "one RX queue: no RSS");
    port.start().expect("start");
    assert!(port.link().unwrap().up, "ring link is up once started");
    let link = port
        .wait_for_link(std::time::Duration::from_secs(1))
        .unwrap();
    assert!(link.up);
    let _mac = port.mac().unwrap();
    port.reset_stats().unwrap();

    let mut rx = port.rx_queue(0).unwrap();
    let mut tx = port.tx_queue(0).unwrap();
    assert_eq!(port.rx_queue(0).expect_err("taken once").errno(), 16);
    assert_eq!(port.start().expect_err("queues out").errno(), 16);

    let sizes = [60usize, 64, 128, 1000, 1514];
    let mut burst: Burst<32> = Burst::new();
    for (i, &len) in sizes.iter().enumerate() {
        let mut m = pool.alloc().unwrap();
        m.extend_from_slice(&frame(i as u8, len)).unwrap();
        burst.push(m).unwrap();
    }
    assert_eq!(tx.tx_burst(&mut burst), sizes.len());
    assert!(burst.is_empty());

    let mut got: Burst<32> = Burst::new();
    for _ in 0..100 {
        rx.rx_burst(&mut got);
        if got.len() == sizes.len() {
            break;
        }
    }
    assert_eq!(got.len(), sizes.len());
    for (i, m) in got.iter().enumerate() {
        assert_eq!(m.data(), &frame(i as u8, sizes[i])[..], "packet {i}");
    }
    let stats = port.stats().unwrap();
    // net_ring counts packets only (its byte counters stay 0 in 22.11);
    // bytes are checked on the pcap port below.
    assert_eq!((stats.tx_packets, stats.rx_packets), (5, 5), "{stats:?}");
    let xstats = port.xstats().unwrap();
    assert!(
        xstats
            .iter()
            .any(|(n, v)| n == "tx_good_packets" && *v == 5),
        "{xstats:?}"
    );
    assert_eq!(port.xstat("rx_good_packets").unwrap(), 5);
    assert!(port.xstat("no_such_counter").is_err());

    drop((rx, tx, got));
    port.stop().expect("stop once the queues are back");
}

fn port_mtu_needs_matching_data_room(pool: &Mempool) {
    let mut port = Port::open("net_ring0").unwrap();
    let jumbo = PortConfig {
        mtu: 9000,
        ..PortConfig::default()
    };
    let err = port
        .configure(&jumbo, pool)
        .expect_err("2 KiB mbufs cannot hold 9000");
    assert_eq!(err.errno(), 22, "{err}");
    let room = Mempool::data_room_for_mtu(9000);
    let big = Mempool::new("jumbo_pool", 255, 0, room as u16, SOCKET_ANY).unwrap();
    port.configure(&jumbo, &big)
        .expect("jumbo with matching data room");
    port.start().unwrap();
    let (mut rx, mut tx) = (port.rx_queue(0).unwrap(), port.tx_queue(0).unwrap());
    let mut burst: Burst<1> = Burst::new();
    let mut m = big.alloc().unwrap();
    m.extend_from_slice(&frame(7, 9000 + 14)).unwrap();
    burst.push(m).unwrap();
    assert_eq!(tx.tx_burst(&mut burst), 1);
    assert_eq!(rx.rx_burst(&mut burst), 1);
    assert_eq!(burst.as_slice()[0].data(), &frame(7, 9014)[..]);
}

/// Hot-plugs a pcap port that writes a file, then another that reads it back.
fn pcap_hotplug_write_then_read_back(pool: &Mempool) {
    let path = std::env::temp_dir().join(format!("espgw-dpdk-test-{}.pcap", std::process::id()));
    let path_s = path.display().to_string();
    let sizes = [64usize, 300, 1514];
    {
        let mut port =
            Port::open(&format!("net_pcap0,tx_pcap={path_s}")).expect("hot-plug pcap writer");
        port.configure(&PortConfig::default(), pool).unwrap();
        port.start().unwrap();
        let mut tx = port.tx_queue(0).unwrap();
        let mut burst: Burst<8> = Burst::new();
        for (i, &len) in sizes.iter().enumerate() {
            let mut m = pool.alloc().unwrap();
            m.extend_from_slice(&frame(40 + i as u8, len)).unwrap();
            burst.push(m).unwrap();
        }
        assert_eq!(tx.tx_burst(&mut burst), 3);
        let stats = port.stats().unwrap();
        let bytes: u64 = sizes.iter().map(|&s| s as u64).sum();
        assert_eq!((stats.tx_packets, stats.tx_bytes), (3, bytes), "{stats:?}");
        assert_eq!(port.xstat("tx_good_bytes").unwrap(), bytes);
        // Dropping the port detaches the device, which closes the file.
    }
    assert_eq!(
        dpdk::port_id_by_name("net_pcap0"),
        None,
        "hot-plugged port is detached on drop"
    );
    let mut port =
        Port::open(&format!("net_pcap1,rx_pcap={path_s}")).expect("hot-plug pcap reader");
    port.configure(&PortConfig::default(), pool).unwrap();
    port.start().unwrap();
    let mut rx = port.rx_queue(0).unwrap();
    let mut got: Burst<8> = Burst::new();
    for _ in 0..100 {
        rx.rx_burst(&mut got);
        if got.len() >= sizes.len() {
            break;
        }
    }
    assert_eq!(
        got.len(),
        sizes.len(),
        "every frame comes back from the pcap file"
    );
    for (i, m) in got.iter().enumerate() {
        assert_eq!(m.data(), &frame(40 + i as u8, sizes[i])[..]);
    }
    drop((rx, got, port));
    let _ = std::fs::remove_file(path);
}

fn lcore_launch() {
    let workers = lcore::worker_ids();
    assert_eq!(lcore::count() as usize, workers.len() + 1);
    assert_eq!(lcore::current(), Some(lcore::main_id()));
    let Some(&worker) = workers.first() else {
        println!("lcore_launch: one CPU only, no worker lcore to launch on");
        return;
    };
    assert!(
        lcore::launch(lcore::main_id(), || ()).is_err(),
        "not on the main lcore"
    );
    let handle = lcore::launch(worker, || (lcore::current(), 6 * 7)).unwrap();
    assert_eq!(handle.wait().unwrap(), (Some(worker), 42));
    let handle = lcore::launch(worker, || -> u32 { panic!("worker panic is caught") }).unwrap();
    assert!(handle.wait().is_err(), "a panic comes back as Err");
    // The lcore is usable again after a panic.
    assert_eq!(lcore::launch(worker, || 1).unwrap().wait().unwrap(), 1);
    let _unused: Option<Error> = None;
}

fn registered_thread_uses_the_pool(pool: &Mempool) {
    let pool = pool.clone();
    let in_use = pool.in_use();
    let worker_pool = pool.clone();
    let (id, len) = std::thread::spawn(move || {
        assert_eq!(lcore::current(), None, "a plain thread has no lcore id");
        let id = lcore::register_thread().expect("register");
        let mut m = worker_pool.alloc().expect("alloc on a registered thread");
        m.extend_from_slice(b"x").unwrap();
        let len = m.len();
        drop(m);
        lcore::unregister_thread();
        (id, len)
    })
    .join()
    .unwrap();
    assert!(
        id != lcore::main_id() && !lcore::worker_ids().contains(&id),
        "a fresh lcore id: {id}"
    );
    assert_eq!(len, 1);
    assert_eq!(pool.in_use(), in_use, "the mbuf went back to the pool");
}

/// net_null can hash IP/UDP/TCP: with two RX queues RSS must be switched on,
/// masked to what the device supports; with one it stays off.
fn null_port_gets_rss_with_two_queues(pool: &Mempool) {
    let mut port = Port::open("net_null0,size=100").expect("hot-plug net_null0");
    assert!(port.attached_by_open());
    let info = port.info().unwrap();
    let cfg = PortConfig {
        rx_queues: 2,
        tx_queues: 2,
        ..PortConfig::default()
    };
    port.configure(&cfg, pool).expect("two queues with RSS");
    let rss = port.rss_flow_types();
    assert_ne!(rss, 0, "net_null supports RSS: {info:?}");
    assert_eq!(rss & !info.rss_offloads, 0, "only what the device supports");
    // The ESP header's SPI is hashed exactly where the device offers it
    // (net_null offers RTE_ETH_RSS_PROTO_MASK, which has no ESP: asked for,
    // masked off; that it is asked for is port.rs's unit test).
    let esp = dpdk::sys::RTE_ETH_RSS_ESP as u64;
    assert_eq!(
        rss & esp,
        info.rss_offloads & esp,
        "SPI hashed where offered: {info:?}"
    );
    let no_rss = PortConfig {
        rss: false,
        ..cfg.clone()
    };
    port.configure(&no_rss, pool).unwrap();
    assert_eq!(port.rss_flow_types(), 0, "RSS off when not asked for");
    port.configure(&cfg, pool).unwrap();
    port.start().unwrap();

    // net_null makes up packets of `size` bytes from the queue's pool.
    let mut rx1 = port.rx_queue(1).unwrap();
    let mut tx1 = port.tx_queue(1).unwrap();
    assert!(port.rx_queue(2).is_err(), "only two RX queues");
    let in_use = pool.in_use();
    let mut burst: Burst<32> = Burst::new();
    assert_eq!(rx1.rx_burst(&mut burst), 32);
    assert!(burst.iter().all(|m| m.len() == 100 && m.nb_segs() == 1));
    assert_eq!(
        pool.in_use(),
        in_use + 32,
        "RX mbufs come from the configured pool"
    );
    assert_eq!(tx1.tx_burst(&mut burst), 32, "net_null takes everything");
    assert_eq!(pool.in_use(), in_use, "and frees it");
    let stats = port.stats().unwrap();
    assert_eq!((stats.rx_packets, stats.tx_packets), (32, 32), "{stats:?}");
}

/// net_null has no flow API: validating, creating and flushing ESP steering
/// rules fail with an error that names the call and the port (what
/// `espgw run` falls back to RSS on), and nothing else on the port changes.
fn flow_rules_refused_without_a_flow_api(pool: &Mempool) {
    let mut port = Port::open("net_null2,size=64").expect("hot-plug net_null2");
    let cfg = PortConfig {
        rx_queues: 2,
        tx_queues: 2,
        ..PortConfig::default()
    };
    port.configure(&cfg, pool).unwrap();
    port.start().unwrap();
    for udp_dst_port in [None, Some(4500)] {
        let steer = dpdk::EspSteer {
            v6: udp_dst_port.is_some(),
            udp_dst_port,
            spi: 0x1000_0001,
            queue: 1,
        };
        let err = port.validate_esp_steer(&steer).expect_err("no flow API");
        assert!(
            err.context().starts_with("rte_flow_validate(net_null2)"),
            "{err}"
        );
        assert_ne!(err.errno(), 0, "{err}");
        let err = port.create_esp_steer(&steer).expect_err("no flow API");
        assert!(
            err.context().starts_with("rte_flow_create(net_null2)"),
            "{err}"
        );
        assert_ne!(err.errno(), 0, "{err}");
    }
    let err = port.flush_flows().expect_err("no flow API");
    assert!(
        err.context().starts_with("rte_flow_flush(net_null2)"),
        "{err}"
    );
    // The port still works.
    let mut rx = port.rx_queue(1).unwrap();
    let mut burst: Burst<32> = Burst::new();
    assert_eq!(rx.rx_burst(&mut burst), 32);
}

fn port_opens_once() {
    let port = Port::open("net_null1").unwrap();
    let err = Port::open("net_null1").expect_err("second owner of one port");
    assert_eq!(err.errno(), 16, "{err}");
    drop(port);
    let again = Port::open("net_null1").expect("free again once dropped");
    assert!(
        again.attached_by_open(),
        "the device was detached and attached anew"
    );
}

fn ip(args: &str) -> bool {
    std::process::Command::new("ip")
        .args(args.split_whitespace())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

/// Two net_af_packet ports on the ends of a veth pair: what one sends, the
/// other receives (the demo topology's kind of port).
fn af_packet_over_veth(pool: &Mempool) {
    let tag = std::process::id() % 100_000;
    let (a, b) = (format!("egwA{tag}"), format!("egwB{tag}"));
    if !ip(&format!("link add {a} type veth peer name {b}")) {
        skip(
            "eal_suite af_packet_over_veth",
            "cannot create a veth pair here (ip link add failed)",
        );
        return;
    }
    assert!(ip(&format!("link set {a} up")) && ip(&format!("link set {b} up")));
    let run = || {
        let mut pa = Port::open(&format!("net_af_packet0,iface={a}")).expect("open A");
        let mut pb = Port::open(&format!("net_af_packet1,iface={b}")).expect("open B");
        for p in [&mut pa, &mut pb] {
            p.configure(&PortConfig::default(), pool).unwrap();
            p.start().unwrap();
        }
        let mut tx = pa.tx_queue(0).unwrap();
        let mut rx = pb.rx_queue(0).unwrap();
        // EtherType 0x88b5 (IEEE local experimental): nothing else sends it,
        // so kernel chatter on the veth (IPv6 ND, MLD) is filtered out.
        let ours = |len: usize, i: u8| {
            let mut f = frame(i, len);
            f[12..14].copy_from_slice(&[0x88, 0xb5]);
            f
        };
        let sizes = [60usize, 600, 1514];
        let mut burst: Burst<8> = Burst::new();
        for (i, &len) in sizes.iter().enumerate() {
            let mut m = pool.alloc().unwrap();
            m.extend_from_slice(&ours(len, i as u8)).unwrap();
            burst.push(m).unwrap();
        }
        assert_eq!(tx.tx_burst(&mut burst), 3);
        let mut got = Vec::new();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
        while got.len() < sizes.len() && std::time::Instant::now() < deadline {
            let mut b: Burst<8> = Burst::new();
            rx.rx_burst(&mut b);
            got.extend(
                b.iter()
                    .filter(|m| m.data().get(12..14) == Some(&[0x88, 0xb5][..]))
                    .map(|m| m.data().to_vec()),
            );
        }
        let want: Vec<Vec<u8>> = sizes
            .iter()
            .enumerate()
            .map(|(i, &len)| ours(len, i as u8))
            .collect();
        assert_eq!(got, want, "B receives exactly what A sent");
        assert!(pa.stats().unwrap().tx_packets >= 3);
    };
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(run));
    ip(&format!("link del {a}"));
    if let Err(panic) = result {
        std::panic::resume_unwind(panic);
    }
}

/// A helper on the kernel side of a veth end: an AF_PACKET socket (Python's
/// standard library; Rust's has none) that either sends the frame in a file
/// or waits for the first frame of EtherType 0x88b5 and writes it to the file.
const KERNEL_SIDE_PY: &str = r#"
import socket, sys
mode, iface, path = sys.argv[1:4]
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
s.bind((iface, 0))
s.settimeout(5)
if mode == "send":
    s.send(open(path, "rb").read())
else:
    print("ready", flush=True)
    while True:
        f = s.recv(65535)
        if f[12:14] == b"\x88\xb5":
            open(path, "wb").write(f)
            break
"#;

fn kernel_side(mode: &str, iface: &str, path: &std::path::Path) -> std::process::Child {
    std::process::Command::new("python3")
        .args(["-c", KERNEL_SIDE_PY, mode, iface])
        .arg(path)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3 for the kernel side of the veth")
}

/// The kernel side of a tap: waits for the first IPv6 UDP frame to port
/// 4500 (the tap also carries the kernel's own ND and MLD) and writes it
/// to the file.
const TAP_KERNEL_SIDE_PY: &str = r#"
import socket, sys
iface, path = sys.argv[1:3]
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
s.bind((iface, 0))
s.settimeout(5)
print("ready", flush=True)
while True:
    f = s.recv(65535)
    if f[12:14] == b"\x86\xdd" and f[20] == 17 and f[56:58] == b"\x11\x94":
        open(path, "wb").write(f)
        break
"#;

/// TX UDP checksum offload on a net_tap port (the virtual device here that
/// offers it; it computes the checksum in software in its TX path, as a
/// NIC would in hardware): configured only when asked for, the mbuf's
/// flags and lengths set as DPDK documents them, and an ESP-in-UDP-shaped
/// IPv6 frame sent with only the pseudo-header seed in its checksum field
/// reaches the kernel with a checksum that verifies. net_null offers no
/// such offload, so it stays off there.
fn tap_port_completes_the_udp_checksum_left_to_it(pool: &Mempool) {
    use espgw_wire::checksum;
    use std::io::BufRead;
    use std::net::Ipv6Addr;

    let mut null = Port::open("net_null2").unwrap();
    // net_tap fills every RX descriptor from the pool at set-up: few of
    // them, so that this test's small pool suffices.
    let plain = PortConfig {
        rx_descriptors: 64,
        tx_descriptors: 64,
        ..PortConfig::default()
    };
    let want = PortConfig {
        tx_udp_checksum: true,
        ..plain.clone()
    };
    null.configure(&want, pool).unwrap();
    assert!(
        !null.tx_udp_checksum(),
        "net_null offers no TX checksum offload"
    );
    drop(null);

    let iface = format!("egt{}", std::process::id() % 100_000);
    let Ok(mut port) = Port::open(&format!("net_tap0,iface={iface}")) else {
        skip(
            "eal_suite tap_port_completes_the_udp_checksum_left_to_it",
            "cannot create a tap device here (net_tap failed to open)",
        );
        return;
    };
    port.configure(&plain, pool).unwrap();
    assert!(!port.tx_udp_checksum(), "off unless asked for");
    port.configure(&want, pool).unwrap();
    assert!(port.tx_udp_checksum(), "net_tap offers it");
    port.start().unwrap();
    assert!(ip(&format!("link set {iface} up")));

    // Ethernet, IPv6 (fd00:99::1 -> fd00:99::2, UDP), UDP 4500 -> 4500, an
    // odd-length payload standing for the ESP packet.
    let (src, dst): (Ipv6Addr, Ipv6Addr) =
        ("fd00:99::1".parse().unwrap(), "fd00:99::2".parse().unwrap());
    let payload: Vec<u8> = (0..1001u32).map(|i| (i * 13 + 5) as u8).collect();
    let udp_len = (8 + payload.len()) as u16;
    let mut f = vec![0u8; 14 + 40];
    f[..6].copy_from_slice(&[0x33, 0x33, 0, 0, 0, 2]);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0x99, 1]);
    f[12..14].copy_from_slice(&[0x86, 0xdd]);
    f[14] = 0x60;
    f[18..20].copy_from_slice(&udp_len.to_be_bytes());
    f[20] = 17;
    f[21] = 64;
    f[22..38].copy_from_slice(&src.octets());
    f[38..54].copy_from_slice(&dst.octets());
    let seed = checksum::offload_seed(checksum::pseudo_header_v6(src, dst, 17, 0), udp_len);
    f.extend_from_slice(&4500u16.to_be_bytes());
    f.extend_from_slice(&4500u16.to_be_bytes());
    f.extend_from_slice(&udp_len.to_be_bytes());
    f.extend_from_slice(&seed.to_be_bytes());
    f.extend_from_slice(&payload);

    let path = std::env::temp_dir().join(format!("{iface}.frame"));
    let _ = std::fs::remove_file(&path);
    let mut child = std::process::Command::new("python3")
        .args(["-c", TAP_KERNEL_SIDE_PY, &iface])
        .arg(&path)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3 for the kernel side of the tap");
    let mut ready = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut ready)
        .unwrap();
    assert_eq!(ready.trim(), "ready");

    let mut m = pool.alloc().unwrap();
    m.extend_from_slice(&f).unwrap();
    m.offload_udp_checksum(14, 40, true);
    assert_eq!(
        m.ol_flags() & (dpdk::sys::RTE_MBUF_F_TX_L4_MASK | dpdk::sys::RTE_MBUF_F_TX_IPV6),
        dpdk::sys::RTE_MBUF_F_TX_UDP_CKSUM | dpdk::sys::RTE_MBUF_F_TX_IPV6
    );
    assert_eq!(m.tx_offload(), 14 | (40 << 7), "l2_len 14, l3_len 40");
    let mut tx = port.tx_queue(0).unwrap();
    let mut burst: Burst<8> = Burst::new();
    burst.push(m).unwrap();
    assert_eq!(tx.tx_burst(&mut burst), 1);
    let status = child.wait().unwrap();
    let got = std::fs::read(&path).unwrap_or_default();
    let _ = std::fs::remove_file(&path);
    assert!(
        status.success() && !got.is_empty(),
        "the kernel saw the frame"
    );
    assert_eq!(got.len(), f.len());
    assert_eq!(got[..60], f[..60], "headers as sent but the checksum");
    assert_eq!(got[62..], f[62..], "payload as sent");
    let pseudo = checksum::pseudo_header_v6(src, dst, 17, u32::from(udp_len));
    assert_eq!(
        checksum::add(pseudo, checksum::sum(&got[54..])),
        0xFFFF,
        "the UDP checksum verifies"
    );
}

/// A 9000-byte IPv4 packet (protocol 253, experimental) in an Ethernet frame.
fn jumbo_ipv4_frame() -> Vec<u8> {
    let mut f = frame(0x5a, 9014);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0x90, 0x00]);
    let total: u16 = 9000;
    let mut ip = [0u8; 20];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&total.to_be_bytes());
    ip[8] = 64;
    ip[9] = 253;
    ip[12..16].copy_from_slice(&[192, 0, 2, 1]);
    ip[16..20].copy_from_slice(&[192, 0, 2, 2]);
    let mut sum: u32 = ip
        .chunks(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    ip[10..12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
    f[14..34].copy_from_slice(&ip);
    f
}

/// MTU 9000 over net_af_packet, which advertises a 1518-byte max frame:
/// with a big enough ring (framesz) the port is configured anyway at the
/// MTU DPDK accepts, reports 9000 as its MTU, and 9000-byte packets cross
/// whole both ways between DPDK and the kernel; with the default ring or
/// too small mbufs it is refused with what to change.
fn af_packet_jumbo_over_veth(small_pool: &Mempool) {
    let tag = std::process::id() % 100_000;
    let (a, b) = (format!("egjA{tag}"), format!("egjB{tag}"));
    if !ip(&format!(
        "link add {a} mtu 9000 type veth peer name {b} mtu 9000"
    )) {
        skip(
            "eal_suite af_packet_jumbo_over_veth",
            "cannot create a veth pair here (ip link add failed)",
        );
        return;
    }
    assert!(ip(&format!("link set {a} up")) && ip(&format!("link set {b} up")));
    let dir = std::env::temp_dir();
    let (sent_path, got_path) = (
        dir.join(format!("espgw-jumbo-{tag}.sent")),
        dir.join(format!("espgw-jumbo-{tag}.got")),
    );
    let run = || {
        let jumbo = PortConfig {
            mtu: 9000,
            ..PortConfig::default()
        };
        // framesz 9216 - 32 bytes past the headroom, as the PMD demands.
        let room = 9216 - 32 + dpdk::MBUF_HEADROOM;
        let big = Mempool::new("af_jumbo_pool", 255, 0, room, SOCKET_ANY).unwrap();

        let mut default_ring = Port::open(&format!("net_af_packet5,iface={a}")).unwrap();
        let info = default_ring.info().unwrap();
        assert_eq!(
            info.max_rx_pktlen, 1518,
            "what net_af_packet advertises: {info:?}"
        );
        let err = default_ring
            .configure(&jumbo, &big)
            .expect_err("2048-byte ring frames cannot carry 9000");
        assert_eq!(err.errno(), 22, "{err}");
        assert!(
            err.to_string().contains("framesz=9216,blocksz=36864"),
            "names the framesz to use: {err}"
        );
        drop(default_ring);

        let device = format!("net_af_packet5,iface={a},framesz=9216,blocksz=36864");
        let mut port = Port::open(&device).unwrap();
        let err = port
            .configure(&PortConfig::default(), small_pool)
            .expect_err("2 KiB mbufs cannot take 9216-byte ring frames");
        assert!(err.to_string().contains("data room >= 9312"), "{err}");
        port.configure(&jumbo, &big).expect("jumbo over a big ring");
        assert_eq!(port.mtu(), 9000);
        let note = port.mtu_note().expect("a note that DPDK was told less");
        assert!(
            note.contains("1518") && note.contains("MTU 9000") && note.contains("framesz=9216"),
            "{note}"
        );
        println!("{note}");
        port.start().unwrap();
        let mut rx = port.rx_queue(0).unwrap();
        let mut tx = port.tx_queue(0).unwrap();

        // Kernel -> DPDK: a 9000-byte IP packet arrives whole in one mbuf.
        let want = jumbo_ipv4_frame();
        std::fs::write(&sent_path, &want).unwrap();
        let status = kernel_side("send", &b, &sent_path).wait().unwrap();
        assert!(status.success(), "kernel side could not send 9014 bytes");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(3);
        let mut got = None;
        while got.is_none() && std::time::Instant::now() < deadline {
            let mut burst: Burst<8> = Burst::new();
            rx.rx_burst(&mut burst);
            got = burst
                .iter()
                .find(|m| m.data().get(6..12) == Some(&want[6..12]))
                .map(|m| m.data().to_vec());
        }
        let got = got.expect("the 9014-byte frame reached DPDK");
        assert_eq!(got.len(), 9014);
        assert!(got == want, "the frame arrived changed");

        // DPDK -> kernel: a 9014-byte frame leaves whole.
        let mut listener = kernel_side("recv", &b, &got_path);
        let mut ready = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(listener.stdout.take().unwrap()),
            &mut ready,
        )
        .unwrap();
        assert_eq!(ready.trim(), "ready");
        let mut out = frame(0xa5, 9014);
        out[12..14].copy_from_slice(&[0x88, 0xb5]);
        let mut burst: Burst<1> = Burst::new();
        let mut m = big.alloc().unwrap();
        m.extend_from_slice(&out).unwrap();
        burst.push(m).unwrap();
        assert_eq!(tx.tx_burst(&mut burst), 1);
        assert!(
            listener.wait().unwrap().success(),
            "kernel side got no frame"
        );
        let seen = std::fs::read(&got_path).unwrap();
        assert_eq!(seen.len(), 9014);
        assert!(seen == out, "the frame left changed");
        let stats = port.stats().unwrap();
        assert_eq!(stats.tx_errors, 0, "{stats:?}");
        println!("af_packet_jumbo_over_veth: 9014-byte frames both ways");
    };
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(run));
    ip(&format!("link del {a}"));
    let _ = std::fs::remove_file(&sent_path);
    let _ = std::fs::remove_file(&got_path);
    if let Err(panic) = result {
        std::panic::resume_unwind(panic);
    }
}

#[allow(dead_code)]
fn assert_send<T: Send>() {}
#[allow(dead_code)]
fn send_bounds() {
    assert_send::<Mbuf>();
    assert_send::<Burst<32>>();
    assert_send::<dpdk::RxQueue>();
    assert_send::<dpdk::TxQueue>();
    assert_send::<dpdk::RingProducer>();
    assert_send::<Mempool>();
}

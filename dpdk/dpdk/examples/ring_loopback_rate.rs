//! Measures the binding's per-burst overhead on a net_ring loopback port:
//! alloc_bulk -> set length -> tx_burst -> rx_burst -> free, 32 packets per
//! burst, on one core. No NIC involved: this is the cost of the wrapper plus
//! DPDK's mempool and ring, the floor under any real port.
//!
//! Run as root: `cargo run --release -p dpdk --example ring_loopback_rate [seconds]`

use std::time::{Duration, Instant};

use dpdk::{Burst, Eal, Mempool, Port, PortConfig, SOCKET_ANY};
use espgw_wire::PacketBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let seconds: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    let args: Vec<String> = [
        "-l",
        "0",
        "-m",
        "256",
        "--no-huge",
        "--no-shconf",
        "--no-pci",
        "--no-telemetry",
        "--log-level=lib.eal:warning",
        "--vdev=net_ring0",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let _eal = Eal::init(&args)?;
    let pool = Mempool::new(
        "bench",
        8191,
        256,
        Mempool::data_room_for_mtu(1500) as u16,
        SOCKET_ANY,
    )?;
    let mut port = Port::open("net_ring0")?;
    port.configure(&PortConfig::default(), &pool)?;
    port.start()?;
    let (mut rx, mut tx) = (port.rx_queue(0)?, port.tx_queue(0)?);

    let mut out: Burst<32> = Burst::new();
    let mut back: Burst<32> = Burst::new();
    let mut packets = 0u64;
    let start = Instant::now();
    let until = start + Duration::from_secs(seconds);
    while Instant::now() < until {
        for _ in 0..1024 {
            pool.alloc_bulk(&mut out, 32)?;
            for m in out.iter_mut() {
                m.append(64).map_err(|e| e.to_string())?;
                m.data_mut()[0] = 0x02;
            }
            tx.tx_burst(&mut out);
            out.clear();
            packets += rx.rx_burst(&mut back) as u64;
            back.clear();
        }
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "ring loopback, 64 B, burst 32, 1 core: {:.2} Mpps ({} packets in {:.2} s); port stats {:?}",
        packets as f64 / secs / 1e6,
        packets,
        secs,
        port.stats()?
    );
    drop((rx, tx));
    Ok(())
}

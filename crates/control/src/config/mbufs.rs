//! How many packet buffers (`[dataplane] mbufs`) a config needs: every
//! descriptor of a PCI port's RX and TX rings may hold one, every lcore's
//! mempool cache keeps up to one and a half of its size, and every worker
//! has a burst in hand per port. A PCI NIC's driver fills its RX rings from
//! the pool when the port starts (ixgbe, i40e: the start fails with ENOMEM
//! when the pool runs dry), so with many workers the rings alone outgrow a
//! fixed default: 2 ports x 16 workers x 1024 descriptors are 32768 mbufs
//! against the default 8191.
//!
//! Without `mbufs` in the config the pool is sized to the need; with it,
//! a smaller value is kept and warned about.

use super::lints::{fan_out_reach, reach_explained};
use super::model::{Dataplane, Mode, Port};
use super::reader::Ctx;
use super::sections::dataplane::{DEFAULT_MBUFS, MAX_MBUFS};

/// Descriptors per RX and per TX queue: enough for bursts at 10G without
/// tying up most of a small pool (af_packet keeps its own ring and ignores
/// them). 512 RX descriptors hold 34 µs of line-rate 64-byte traffic.
pub const QUEUE_DESCRIPTORS: u16 = 512;

/// Buffers DPDK 22.11's af_xdp PMD takes from the pool for each RX
/// queue's fill ring when the queue is set up (half its default ring of
/// 2048; with XDP_UMEM_UNALIGNED_CHUNK_FLAG the pool is the umem).
pub const AF_XDP_FILL_BUFFERS: u16 = 1024;

/// Frames each pipeline-mode ring holds (between the I/O lcore and a
/// worker, each way).
pub const PIPELINE_RING_SLOTS: u32 = 1024;

/// EAL memory without hugepages when `-m` does not say (DPDK's
/// `MEMSIZE_IF_NO_HUGE_PAGE`), in MiB.
const NO_HUGE_DEFAULT_MB: u64 = 64;

/// A PCI address such as `0000:01:00.0` or `01:00.0` (as opposed to a
/// vdev), with or without devargs after a comma.
pub fn is_pci_device(device: &str) -> bool {
    let name = device.split(',').next().unwrap_or(device);
    let parts: Vec<&str> = name.split(':').collect();
    let hex = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_hexdigit());
    let func_ok = |s: &str| {
        s.split_once('.').is_some_and(|(dev, func)| {
            hex(dev) && func.len() == 1 && func.chars().all(|c| c.is_ascii_digit())
        })
    };
    match parts.as_slice() {
        [dom, bus, devfn] => hex(dom) && hex(bus) && func_ok(devfn),
        [bus, devfn] => hex(bus) && func_ok(devfn),
        _ => false,
    }
}

/// The mbufs a config needs, by what holds them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MbufNeed {
    /// PCI ports x queues x (RX + TX descriptors), and af_xdp ports x
    /// queues x their fill ring's buffers. Other virtual devices copy into
    /// mbufs per burst and hold none in rings (not counted).
    pub rings: u64,
    /// Lcores x 1.5 x the mempool cache (DPDK lets a cache grow to 1.5x).
    pub caches: u64,
    /// Ports x queues x burst: what the workers hold between RX and TX.
    pub bursts: u64,
    /// Pipeline mode: the rings between the I/O lcore and each worker
    /// (one in, one per port out), full when a worker stalls.
    pub pipeline_rings: u64,
    /// What the decrypt fan-out may hold for one receiving worker (0 with
    /// it off; [`fan_out_reach`]).
    pub fan_out: u64,
}

impl MbufNeed {
    pub fn total(&self) -> u64 {
        self.rings + self.caches + self.bursts + self.pipeline_rings + self.fan_out
    }

    /// The smallest 2^n - 1 (the mempool's best size) that covers
    /// [`MbufNeed::total`], at least the default, at most `MAX_MBUFS`.
    pub fn pool_size(&self) -> u32 {
        let n = self.total().max(u64::from(DEFAULT_MBUFS));
        let size = (n + 1).next_power_of_two() - 1;
        size.min(u64::from(MAX_MBUFS)) as u32
    }

    fn explained(&self, dp: &Dataplane) -> String {
        let mut s = format!(
            "{} in the ports' rings ({} descriptors per queue of a PCI port, RX and TX; {} per \
             RX queue of an af_xdp port), {} in {} lcores' caches, {} in bursts",
            self.rings,
            QUEUE_DESCRIPTORS,
            AF_XDP_FILL_BUFFERS,
            self.caches,
            dp.lcores_needed(),
            self.bursts
        );
        if self.pipeline_rings > 0 {
            s += &format!(
                ", {} in the pipeline's rings ({PIPELINE_RING_SLOTS} each)",
                self.pipeline_rings
            );
        }
        if self.fan_out > 0 {
            s += &format!(
                ", {} the decrypt fan-out may hold for one receiving worker ({})",
                self.fan_out,
                reach_explained(dp, self.fan_out)
            );
        }
        s
    }
}

/// What `dp` with `ports` needs, for a pool of `dp.mbufs` (whose size sets
/// the caches' size).
pub fn mbufs_needed(dp: &Dataplane, ports: &[Port]) -> MbufNeed {
    let queues = dp.queues_per_port() as u64;
    let pci = ports.iter().filter(|p| is_pci_device(&p.device)).count() as u64;
    let af_xdp = ports
        .iter()
        .filter(|p| p.device.starts_with("net_af_xdp"))
        .count() as u64;
    let pipeline_rings = match dp.mode {
        Mode::Pipeline => dp.workers as u64 * (1 + ports.len() as u64),
        Mode::RunToCompletion => 0,
    } * u64::from(PIPELINE_RING_SLOTS);
    MbufNeed {
        rings: pci * queues * 2 * u64::from(QUEUE_DESCRIPTORS)
            + af_xdp * queues * u64::from(AF_XDP_FILL_BUFFERS),
        caches: dp.lcores_needed() as u64 * u64::from(dp.mempool_cache()) * 3 / 2,
        bursts: ports.len() as u64 * queues * u64::from(dp.burst),
        pipeline_rings,
        fan_out: fan_out_reach(dp),
    }
}

/// With `--no-huge` in `eal`: the EAL's memory (`-m N`, else DPDK's 64
/// MiB) in bytes; `None` with hugepages (sized by `espgw setup`).
fn no_huge_memory(dp: &Dataplane) -> Option<u64> {
    if !dp.eal.iter().any(|a| a == "--no-huge") {
        return None;
    }
    let mut mb = NO_HUGE_DEFAULT_MB;
    let mut args = dp.eal.iter();
    while let Some(a) = args.next() {
        let value = match a.strip_prefix("-m") {
            Some("") => args.next().map(String::as_str),
            Some(rest) => Some(rest),
            None => None,
        };
        if let Some(n) = value.and_then(|v| v.parse::<u64>().ok()) {
            mb = n;
        }
    }
    Some(mb << 20)
}

/// About what one mbuf of the run's pool takes (its data room as the
/// runtime sizes it, at least 2176 bytes, plus the mbuf header and the
/// mempool's own): for the `--no-huge` cap, not an exact figure.
fn bytes_per_mbuf(dp: &Dataplane) -> u64 {
    (u64::from(dp.mtu) + 282).max(2176) + 192
}

/// The largest 2^n - 1 pool that three quarters of `memory` hold (the
/// rest is the EAL's, the rings' and the ports'), at least the default.
fn pool_cap(dp: &Dataplane, memory: u64) -> u32 {
    let fits = memory * 3 / 4 / bytes_per_mbuf(dp);
    let pow = (fits + 1).checked_next_power_of_two().unwrap_or(u64::MAX);
    let size = if pow > fits + 1 { pow / 2 - 1 } else { pow - 1 };
    size.clamp(u64::from(DEFAULT_MBUFS), u64::from(MAX_MBUFS)) as u32
}

/// Sizes `dp.mbufs` to the need when the config did not set it (held to
/// what `--no-huge` memory holds, and warned about then); warns at
/// `dataplane.mbufs` when it set fewer than the need.
pub(crate) fn size_pool(ctx: &mut Ctx, dp: &mut Dataplane, ports: &[Port]) {
    if !dp.mbufs_set {
        // The caches are sized from the pool (an eighth, at most 256): at
        // the sizes where this matters they are 256.
        let mut probe = dp.clone();
        probe.mbufs = MAX_MBUFS;
        let need = mbufs_needed(&probe, ports);
        dp.mbufs = need.pool_size();
        if let Some(memory) = no_huge_memory(dp) {
            let cap = pool_cap(dp, memory);
            if dp.mbufs > cap {
                ctx.warn(
                    "dataplane.mbufs",
                    format!(
                        "sized to {cap}, not the {} the ports and workers may hold ({}): \
                         `--no-huge` gives the EAL {} MiB; more with `-m` in eal (or hugepages)",
                        need.pool_size(),
                        need.explained(&probe),
                        memory >> 20
                    ),
                );
                dp.mbufs = cap;
            }
        }
        return;
    }
    let need = mbufs_needed(dp, ports);
    if u64::from(dp.mbufs) >= need.total() {
        return;
    }
    ctx.warn(
        "dataplane.mbufs",
        format!(
            "{} is fewer than the {} the ports and workers may hold ({}): a PCI NIC fills its RX \
             rings from the pool when it starts (the start fails when it runs dry), a pool short \
             of buffers drops on receive (rx_nombuf), and a stalled fan-out helper could leave \
             the RX queues without any; {} or more, or leave mbufs out to have it sized",
            dp.mbufs,
            need.total(),
            need.explained(dp),
            need.pool_size(),
        ),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pci_addresses_and_vdevs() {
        assert!(is_pci_device("0000:01:00.0"));
        assert!(is_pci_device("01:00.1"));
        assert!(is_pci_device("0000:af:00.0,txq_inline=1"));
        assert!(!is_pci_device("net_af_packet0,iface=eth0"));
        assert!(!is_pci_device("net_pcap0,rx_pcap=a.pcap"));
        assert!(!is_pci_device("0000:01:00"));
        assert!(!is_pci_device("0000:01:00.10"));
    }

    #[test]
    fn no_huge_memory_reads_dash_m() {
        let mut dp = crate::config::sections::dataplane::defaults();
        assert_eq!(no_huge_memory(&dp), None, "hugepages: not capped here");
        dp.eal = vec!["--no-huge".into()];
        assert_eq!(no_huge_memory(&dp), Some(64 << 20));
        dp.eal = vec!["--no-huge".into(), "-m".into(), "512".into()];
        assert_eq!(no_huge_memory(&dp), Some(512 << 20));
        dp.eal = vec!["-m1024".into(), "--no-huge".into()];
        assert_eq!(no_huge_memory(&dp), Some(1024 << 20));
    }

    #[test]
    fn the_no_huge_cap_is_two_to_the_n_minus_one_within_the_memory() {
        let dp = crate::config::sections::dataplane::defaults();
        // 2368 bytes a buffer at MTU 1500: 3/4 of 256 MiB holds 85019.
        assert_eq!(bytes_per_mbuf(&dp), 2368);
        assert_eq!(pool_cap(&dp, 256 << 20), 65535);
        // 64 MiB holds 21254: 16383.
        assert_eq!(pool_cap(&dp, 64 << 20), 16383);
        // Never below the default (what such a config got before sizing).
        assert_eq!(pool_cap(&dp, 1 << 20), DEFAULT_MBUFS);
    }

    #[test]
    fn pool_size_is_two_to_the_n_minus_one_and_at_least_the_default() {
        let need = |total: u64| MbufNeed {
            rings: total,
            caches: 0,
            bursts: 0,
            pipeline_rings: 0,
            fan_out: 0,
        };
        assert_eq!(need(0).pool_size(), DEFAULT_MBUFS);
        assert_eq!(need(8191).pool_size(), 8191);
        assert_eq!(need(8192).pool_size(), 16383);
        assert_eq!(need(40_000).pool_size(), 65535);
        assert_eq!(need(u64::MAX / 4).pool_size(), MAX_MBUFS);
    }
}

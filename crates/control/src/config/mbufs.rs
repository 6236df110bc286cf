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
use super::model::{Dataplane, Port};
use super::reader::Ctx;
use super::sections::dataplane::{DEFAULT_MBUFS, MAX_MBUFS};

/// Descriptors per RX and per TX queue: enough for bursts at 10G without
/// tying up most of a small pool (af_packet keeps its own ring and ignores
/// them). 512 RX descriptors hold 34 µs of line-rate 64-byte traffic.
pub const QUEUE_DESCRIPTORS: u16 = 512;

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
    /// PCI ports x queues x (RX + TX descriptors). Virtual devices copy
    /// into mbufs per burst and hold none in rings (not counted).
    pub rings: u64,
    /// Lcores x 1.5 x the mempool cache (DPDK lets a cache grow to 1.5x).
    pub caches: u64,
    /// Ports x queues x burst: what the workers hold between RX and TX.
    pub bursts: u64,
    /// What the decrypt fan-out may hold for one receiving worker (0 with
    /// it off; [`fan_out_reach`]).
    pub fan_out: u64,
}

impl MbufNeed {
    pub fn total(&self) -> u64 {
        self.rings + self.caches + self.bursts + self.fan_out
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
            "{} in PCI ports' rings ({} descriptors per queue, RX and TX), {} in {} lcores' \
             caches, {} in bursts",
            self.rings,
            QUEUE_DESCRIPTORS,
            self.caches,
            dp.lcores_needed(),
            self.bursts
        );
        if self.fan_out > 0 {
            s += &format!(
                ", {} the fan-out may hold ({})",
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
    MbufNeed {
        rings: pci * queues * 2 * u64::from(QUEUE_DESCRIPTORS),
        caches: dp.lcores_needed() as u64 * u64::from(dp.mempool_cache()) * 3 / 2,
        bursts: ports.len() as u64 * queues * u64::from(dp.burst),
        fan_out: fan_out_reach(dp),
    }
}

/// Sizes `dp.mbufs` to the need when the config did not set it; warns at
/// `dataplane.mbufs` when it set fewer.
pub(crate) fn size_pool(ctx: &mut Ctx, dp: &mut Dataplane, ports: &[Port]) {
    if !dp.mbufs_set {
        // The caches are sized from the pool (an eighth, at most 256): at
        // the sizes where this matters they are 256.
        let mut probe = dp.clone();
        probe.mbufs = MAX_MBUFS;
        dp.mbufs = mbufs_needed(&probe, ports).pool_size();
        return;
    }
    let need = mbufs_needed(dp, ports);
    if u64::from(dp.mbufs) >= need.total() {
        return;
    }
    // The fan-out's own share has its own warning (`warn_mbufs_under_fan_out`).
    let without_fan_out = need.total() - need.fan_out;
    if u64::from(dp.mbufs) >= without_fan_out {
        return;
    }
    ctx.warn(
        "dataplane.mbufs",
        format!(
            "{} is fewer than the {} the ports and workers may hold ({}): a PCI NIC fills its RX \
             rings from the pool when it starts (the start fails when it runs dry), and a pool \
             short of buffers drops on receive (rx_nombuf); {} or more, or leave mbufs out to \
             have it sized",
            dp.mbufs,
            without_fan_out,
            MbufNeed { fan_out: 0, ..need }.explained(dp),
            MbufNeed { fan_out: 0, ..need }.pool_size(),
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
    fn pool_size_is_two_to_the_n_minus_one_and_at_least_the_default() {
        let need = |total: u64| MbufNeed {
            rings: total,
            caches: 0,
            bursts: 0,
            fan_out: 0,
        };
        assert_eq!(need(0).pool_size(), DEFAULT_MBUFS);
        assert_eq!(need(8191).pool_size(), 8191);
        assert_eq!(need(8192).pool_size(), 16383);
        assert_eq!(need(40_000).pool_size(), 65535);
        assert_eq!(need(u64::MAX / 4).pool_size(), MAX_MBUFS);
    }
}

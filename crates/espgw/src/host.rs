//! What this machine offers DPDK: PCI devices and their drivers, hugepages,
//! CPU flags, IOMMU groups. Read from sysfs and procfs under a root
//! directory (`/` in use; a fake tree in the tests), so that `espgw setup`
//! and the warnings of `espgw check` can be tested without real NICs.

use std::fs;
use std::path::PathBuf;

use espgw_control::Config;

/// Drivers a DPDK poll-mode driver can use a PCI device through: the
/// user-space I/O drivers DPDK's own `dpdk-devbind.py` binds to.
pub const DPDK_DRIVERS: &[&str] = &["vfio-pci", "uio_pci_generic", "igb_uio"];

/// Kernel drivers whose devices DPDK drives while they stay bound (the
/// Mellanox "bifurcated" model): no binding needed.
pub const BIFURCATED_DRIVERS: &[&str] = &["mlx5_core", "mlx4_core"];

/// The size of the hugepages `espgw setup` reserves, in KiB (2 MiB: every
/// x86-64 kernel has it, and Debian's dpdk.conf reserves them by count).
pub const HUGEPAGE_KB: u64 = 2048;

/// A PCI address in sysfs form (`0000:03:00.0`) when `device` (a `[[port]]`
/// `device`, possibly with `,devargs`) names a PCI device rather than a
/// vdev; the domain defaults to 0000 as in DPDK.
pub fn pci_address(device: &str) -> Option<String> {
    let addr = device.split(',').next().unwrap_or("");
    let parts: Vec<&str> = addr.split(':').collect();
    let (domain, bus, devfn) = match parts.as_slice() {
        [d, b, df] => (*d, *b, *df),
        [b, df] => ("0000", *b, *df),
        _ => return None,
    };
    let (dev, func) = devfn.split_once('.')?;
    let hex = |s: &str, n: usize| s.len() == n && s.bytes().all(|c| c.is_ascii_hexdigit());
    let func_ok = func.len() == 1 && matches!(func.as_bytes()[0], b'0'..=b'7');
    if hex(domain, 4) && hex(bus, 2) && hex(dev, 2) && func_ok {
        Some(format!("{domain}:{bus}:{dev}.{func}").to_ascii_lowercase())
    } else {
        None
    }
}

/// Paths of the host, relative to a root directory.
#[derive(Debug, Clone)]
pub struct Host {
    root: PathBuf,
}

/// A PCI device as sysfs shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PciDevice {
    pub address: String,
    /// The bound driver, if any.
    pub driver: Option<String>,
    /// Kernel network interfaces on it (a kernel driver's), e.g. `enp3s0f0`.
    pub interfaces: Vec<String>,
    /// Its NUMA node, when the kernel knows it (`-1` is reported as none).
    pub numa_node: Option<u32>,
    /// `vendor:device` ids, e.g. `8086:10fb` (82599ES).
    pub id: String,
}

impl Host {
    pub fn new(root: impl Into<PathBuf>) -> Host {
        Host { root: root.into() }
    }

    /// `rel` (an absolute path like `/sys/...`) under the root.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel.trim_start_matches('/'))
    }

    fn read(&self, rel: &str) -> Option<String> {
        fs::read_to_string(self.path(rel))
            .ok()
            .map(|s| s.trim().to_string())
    }

    /// The PCI device at `address` (sysfs form), or None when this machine
    /// has no such device.
    pub fn pci_device(&self, address: &str) -> Option<PciDevice> {
        let dir = format!("/sys/bus/pci/devices/{address}");
        if !self.path(&dir).is_dir() {
            return None;
        }
        // `driver` is a symlink to /sys/bus/pci/drivers/NAME; its last
        // component is the name (the fake trees use a file holding it).
        let driver_path = self.path(&format!("{dir}/driver"));
        let driver = match fs::read_link(&driver_path) {
            Ok(target) => target.file_name().map(|n| n.to_string_lossy().into_owned()),
            Err(_) => self.read(&format!("{dir}/driver")),
        };
        let mut interfaces: Vec<String> = fs::read_dir(self.path(&format!("{dir}/net")))
            .map(|rd| {
                rd.filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        interfaces.sort();
        let numa_node = self
            .read(&format!("{dir}/numa_node"))
            .and_then(|s| s.parse::<i64>().ok())
            .and_then(|n| u32::try_from(n).ok());
        let id = format!(
            "{}:{}",
            self.read(&format!("{dir}/vendor"))
                .unwrap_or_default()
                .trim_start_matches("0x"),
            self.read(&format!("{dir}/device"))
                .unwrap_or_default()
                .trim_start_matches("0x"),
        );
        Some(PciDevice {
            address: address.to_string(),
            driver,
            interfaces,
            numa_node,
            id,
        })
    }

    /// Hugepages reserved now, in KiB over every page size.
    pub fn hugepages_kb(&self) -> u64 {
        let Ok(rd) = fs::read_dir(self.path("/sys/kernel/mm/hugepages")) else {
            return 0;
        };
        rd.filter_map(|e| e.ok())
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                let kb: u64 = name
                    .strip_prefix("hugepages-")?
                    .strip_suffix("kB")?
                    .parse()
                    .ok()?;
                let n: u64 = self
                    .read(&format!("/sys/kernel/mm/hugepages/{name}/nr_hugepages"))?
                    .parse()
                    .ok()?;
                Some(kb * n)
            })
            .sum()
    }

    /// The number of 2 MiB hugepages reserved now (None: the kernel has none).
    pub fn hugepages_2m(&self) -> Option<u64> {
        self.read(&format!(
            "/sys/kernel/mm/hugepages/hugepages-{HUGEPAGE_KB}kB/nr_hugepages"
        ))?
        .parse()
        .ok()
    }

    /// The flags of the first CPU in /proc/cpuinfo.
    pub fn cpu_flags(&self) -> Vec<String> {
        self.read("/proc/cpuinfo")
            .and_then(|info| {
                info.lines()
                    .find(|l| l.starts_with("flags"))
                    .and_then(|l| l.split_once(':'))
                    .map(|(_, f)| f.split_whitespace().map(str::to_string).collect())
            })
            .unwrap_or_default()
    }

    /// Whether the kernel has IOMMU groups (an IOMMU is on): vfio-pci needs
    /// one unless its unsafe no-IOMMU mode is enabled.
    pub fn iommu_groups(&self) -> usize {
        fs::read_dir(self.path("/sys/kernel/iommu_groups")).map_or(0, |rd| rd.count())
    }

    /// Whether vfio's unsafe no-IOMMU mode is on.
    pub fn vfio_noiommu(&self) -> bool {
        self.read("/sys/module/vfio/parameters/enable_unsafe_noiommu_mode")
            .is_some_and(|v| v == "Y" || v == "1")
    }

    /// Whether a driver is loaded (has a directory under the PCI bus).
    pub fn driver_loaded(&self, driver: &str) -> bool {
        self.path(&format!("/sys/bus/pci/drivers/{driver}"))
            .is_dir()
    }

    /// The kernel command line.
    pub fn cmdline(&self) -> String {
        self.read("/proc/cmdline").unwrap_or_default()
    }
}

/// Whether DPDK needs hugepages for this config: not when its EAL arguments
/// say `--no-huge`.
pub fn needs_hugepages(config: &Config) -> bool {
    !config.dataplane.eal.iter().any(|a| a == "--no-huge")
}

/// Warnings about this machine for a config that is otherwise valid, in the
/// format of the config's own warnings (`espgw check` prints them after its
/// own): PCI ports not bound to a DPDK-capable driver, or missing, and
/// missing hugepages.
pub fn check_warnings(config: &Config, host: &Host) -> Vec<String> {
    let file = config.source.display();
    let mut out = Vec::new();
    for (k, port) in config.ports.iter().enumerate() {
        let Some(addr) = pci_address(&port.device) else {
            continue;
        };
        let at = format!("warning: {file}: port[{k}].device");
        match host.pci_device(&addr) {
            None => out.push(format!("{at}: this machine has no PCI device {addr}")),
            Some(d) => match d.driver.as_deref() {
                Some(drv) if DPDK_DRIVERS.contains(&drv) || BIFURCATED_DRIVERS.contains(&drv) => {}
                Some(drv) => out.push(format!(
                    "{at}: {addr} is bound to the kernel driver {drv}, which DPDK cannot use \
                     (expected vfio-pci, uio_pci_generic or igb_uio; run: espgw setup --config {file})"
                )),
                None => out.push(format!(
                    "{at}: {addr} is bound to no driver (expected vfio-pci, uio_pci_generic or \
                     igb_uio; run: espgw setup --config {file})"
                )),
            },
        }
    }
    if needs_hugepages(config) && host.hugepages_kb() == 0 {
        out.push(format!(
            "warning: {file}: dataplane.eal: no hugepages are reserved and `eal` has no \
             --no-huge: DPDK cannot allocate its memory (run: espgw setup --config {file}, \
             or add \"--no-huge\" for a test machine)"
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pci_addresses_are_told_from_vdevs() {
        assert_eq!(pci_address("0000:03:00.0").as_deref(), Some("0000:03:00.0"));
        assert_eq!(pci_address("03:00.1").as_deref(), Some("0000:03:00.1"));
        assert_eq!(
            pci_address("0000:0A:00.1,rx_low_latency=1").as_deref(),
            Some("0000:0a:00.1")
        );
        for vdev in [
            "net_af_packet0,iface=gwa-prot",
            "net_ring0",
            "0000:03:00.8",
            "03:00",
            "0000:3:00.0",
            "zz:00.0",
            "",
        ] {
            assert_eq!(pci_address(vdev), None, "{vdev}");
        }
    }
}

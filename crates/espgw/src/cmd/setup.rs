//! `espgw setup --config FILE [--dry-run] [--hugepages N]`: prepares this
//! machine for a config the way Debian runs DPDK (docs/install.md): checks
//! the CPU flags, the IOMMU and vfio-pci, binds the PCI devices of the
//! config's ports to vfio-pci (through sysfs, as dpdk-devbind.py does) and
//! lists them in /etc/dpdk/interfaces so that dpdk.service binds them at
//! boot, and reserves 2 MiB hugepages now and in /etc/dpdk/dpdk.conf.
//!
//! It first finds everything to do, prints it, and changes nothing when a
//! check failed (a missing device, no IOMMU): the machine is never left
//! half set up. `--dry-run` prints the plan only.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use espgw_control::Config;

use super::{print_diagnostics, EXIT_INVALID};
use crate::host::{
    needs_hugepages, pci_address, Host, BIFURCATED_DRIVERS, DPDK_DRIVERS, HUGEPAGE_KB,
};

/// The file Debian's dpdk.service (dpdk-init) reads the hugepage counts from.
pub const DPDK_CONF: &str = "/etc/dpdk/dpdk.conf";
/// The file dpdk-init binds devices from at boot: `pci ADDRESS DRIVER` lines.
pub const DPDK_INTERFACES: &str = "/etc/dpdk/interfaces";
/// Loads vfio-pci at boot (systemd-modules-load).
pub const MODULES_LOAD: &str = "/etc/modules-load.d/espgw-vfio.conf";
/// The user-space driver the ports are bound to.
pub const BIND_DRIVER: &str = "vfio-pci";

/// One finding of the plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Already as needed.
    Ok(String),
    /// A note that needs no change and blocks nothing.
    Note(String),
    /// Something to change, and how.
    Change(String, Action),
    /// A check that failed: nothing is changed while one remains.
    Problem(String),
}

/// A change to the machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Write `contents` to the file at `path` (under the root), creating
    /// its directory; sysfs attribute writes are these too.
    Write { path: String, contents: String },
    /// `modprobe MODULE`.
    Modprobe(String),
}

/// Everything `espgw setup` would do for `config` on `host`.
pub fn plan(config: &Config, host: &Host, hugepages: Option<u64>) -> Vec<Step> {
    let mut steps = Vec::new();
    cpu(host, &mut steps);
    if needs_hugepages(config) {
        let pages = hugepages.unwrap_or_else(|| hugepages_for(config));
        hugepage_steps(host, pages, &mut steps);
    } else {
        steps.push(Step::Ok(
            "hugepages: not needed (dataplane.eal has --no-huge)".into(),
        ));
    }
    let pci: Vec<(String, String)> = config
        .ports
        .iter()
        .filter_map(|p| pci_address(&p.device).map(|a| (p.name.clone(), a)))
        .collect();
    if pci.is_empty() {
        steps.push(Step::Ok(
            "NICs: no port is a PCI device (vdevs need no binding, IOMMU or vfio-pci)".into(),
        ));
    } else {
        vfio_steps(host, &mut steps);
        for (name, addr) in &pci {
            port_steps(host, name, addr, &mut steps);
        }
        let addrs: Vec<&str> = pci.iter().map(|(_, a)| a.as_str()).collect();
        interfaces_entries(host, &addrs, &mut steps);
    }
    steps
}

/// 2 MiB pages for the config: the mbuf pool (about 2.5 KiB an mbuf at MTU
/// 1500, 10.5 KiB at 9000) and 256 MiB for the EAL, rings and descriptors,
/// at least 512 pages (1 GiB).
pub fn hugepages_for(config: &Config) -> u64 {
    let per_mbuf = u64::from(config.dataplane.mtu) + 1024;
    let bytes = u64::from(config.dataplane.mbufs) * per_mbuf + (256 << 20);
    bytes.div_ceil(HUGEPAGE_KB * 1024).max(512)
}

fn cpu(host: &Host, steps: &mut Vec<Step>) {
    let flags = host.cpu_flags();
    if flags.is_empty() {
        steps.push(Step::Note(
            "CPU: /proc/cpuinfo has no flags line (not x86?): not checked".into(),
        ));
        return;
    }
    let has = |f: &str| flags.iter().any(|x| x == f);
    // Debian builds DPDK for the x86-64 baseline DPDK requires (SSE4.2).
    if has("sse4_2") {
        steps.push(Step::Ok("CPU: sse4_2 (DPDK's baseline)".into()));
    } else {
        steps.push(Step::Problem(
            "CPU: no sse4_2: Debian's DPDK build needs SSE4.2".into(),
        ));
    }
    let fast: Vec<&str> = ["aes", "pclmulqdq", "avx2"]
        .into_iter()
        .filter(|f| has(f))
        .collect();
    let slow: Vec<&str> = ["aes", "pclmulqdq"]
        .into_iter()
        .filter(|f| !has(f))
        .collect();
    if slow.is_empty() {
        steps.push(Step::Ok(format!(
            "CPU: {} (AES-GCM in hardware)",
            fast.join(" ")
        )));
    } else {
        steps.push(Step::Note(format!(
            "CPU: no {}: AES-GCM runs in software, several times slower (docs/crypto.md)",
            slow.join(", ")
        )));
    }
}

fn hugepage_steps(host: &Host, pages: u64, steps: &mut Vec<Step>) {
    let sys = format!("/sys/kernel/mm/hugepages/hugepages-{HUGEPAGE_KB}kB/nr_hugepages");
    match host.hugepages_2m() {
        None => steps.push(Step::Problem(format!(
            "hugepages: this kernel has no 2 MiB hugepages ({sys} missing)"
        ))),
        Some(now) if now >= pages => steps.push(Step::Ok(format!(
            "hugepages: {now} x 2 MiB reserved (need {pages})"
        ))),
        Some(now) => steps.push(Step::Change(
            format!("hugepages: reserve {pages} x 2 MiB now (reserved: {now})"),
            Action::Write {
                path: sys,
                contents: format!("{pages}\n"),
            },
        )),
    }
    let conf = host.path(DPDK_CONF);
    match fs::read_to_string(&conf) {
        Err(_) => steps.push(Step::Note(format!(
            "hugepages: {DPDK_CONF} missing (Debian's dpdk package is not installed): the \
             reservation does not survive a reboot; apt install dpdk and run again"
        ))),
        Ok(text) => {
            let value = format!("NR_2M_PAGES={pages}");
            if text.lines().any(|l| l.trim() == value) {
                steps.push(Step::Ok(format!(
                    "hugepages: {DPDK_CONF} has {value} (dpdk.service reserves them at boot)"
                )));
            } else {
                steps.push(Step::Change(
                    format!("hugepages: set {value} in {DPDK_CONF} (dpdk.service reserves them at boot)"),
                    Action::Write {
                        path: DPDK_CONF.into(),
                        contents: set_conf_line(&text, "NR_2M_PAGES", &value),
                    },
                ));
            }
        }
    }
}

/// `text` with its first `KEY=...` assignment replaced by `line` and any
/// later one dropped (dpdk-init sources the file: the last assignment would
/// win), or `line` appended when there is none. Comments, including
/// commented-out examples, stay as they are.
fn set_conf_line(text: &str, key: &str, line: &str) -> String {
    let mut done = false;
    let mut out = String::with_capacity(text.len() + line.len() + 1);
    for l in text.lines() {
        let bare = l.trim_start();
        if bare.starts_with(key) && bare[key.len()..].trim_start().starts_with('=') {
            if !done {
                out.push_str(line);
                out.push('\n');
                done = true;
            }
            continue;
        }
        out.push_str(l);
        out.push('\n');
    }
    if !done {
        out.push_str(line);
        out.push('\n');
    }
    out
}

fn vfio_steps(host: &Host, steps: &mut Vec<Step>) {
    let groups = host.iommu_groups();
    if groups > 0 {
        steps.push(Step::Ok(format!("IOMMU: on ({groups} groups)")));
    } else if host.vfio_noiommu() {
        steps.push(Step::Note(
            "IOMMU: off, vfio runs in its unsafe no-IOMMU mode (no DMA isolation)".into(),
        ));
    } else {
        let cmdline = host.cmdline();
        let asked = cmdline
            .split_whitespace()
            .any(|w| w == "intel_iommu=on" || w == "amd_iommu=on");
        steps.push(Step::Problem(if asked {
            "IOMMU: off although the kernel command line asks for it: enable VT-d \
             (AMD-Vi) in the firmware set-up"
                .into()
        } else {
            "IOMMU: off (no /sys/kernel/iommu_groups): vfio-pci needs it; add intel_iommu=on \
             iommu=pt (AMD: amd_iommu=on) to GRUB_CMDLINE_LINUX in /etc/default/grub, run \
             update-grub and reboot"
                .into()
        }));
    }
    if host.driver_loaded(BIND_DRIVER) {
        steps.push(Step::Ok(format!("{BIND_DRIVER}: loaded")));
    } else {
        steps.push(Step::Change(
            format!("{BIND_DRIVER}: load the module"),
            Action::Modprobe(BIND_DRIVER.into()),
        ));
    }
    let boot = format!("{BIND_DRIVER}\n");
    if fs::read_to_string(host.path(MODULES_LOAD)).ok().as_deref() == Some(boot.as_str()) {
        steps.push(Step::Ok(format!(
            "{BIND_DRIVER}: loaded at boot ({MODULES_LOAD})"
        )));
    } else {
        steps.push(Step::Change(
            format!("{BIND_DRIVER}: load it at boot ({MODULES_LOAD})"),
            Action::Write {
                path: MODULES_LOAD.into(),
                contents: boot,
            },
        ));
    }
}

fn port_steps(host: &Host, name: &str, addr: &str, steps: &mut Vec<Step>) {
    let Some(dev) = host.pci_device(addr) else {
        steps.push(Step::Problem(format!(
            "port {name}: this machine has no PCI device {addr} (lspci -D lists them)"
        )));
        return;
    };
    let numa = dev
        .numa_node
        .map_or(String::new(), |n| format!(", NUMA node {n}"));
    let what = format!("port {name}: {addr} [{}]{numa}", dev.id);
    match dev.driver.as_deref() {
        Some(d) if DPDK_DRIVERS.contains(&d) => {
            steps.push(Step::Ok(format!("{what} bound to {d}")));
        }
        Some(d) if BIFURCATED_DRIVERS.contains(&d) => steps.push(Step::Ok(format!(
            "{what} stays on {d} (DPDK drives it through the kernel driver)"
        ))),
        driver => {
            let up: Vec<&String> = dev
                .interfaces
                .iter()
                .filter(|i| {
                    fs::read_to_string(host.path(&format!("/sys/class/net/{i}/operstate")))
                        .is_ok_and(|s| s.trim() == "up")
                })
                .collect();
            if !up.is_empty() {
                steps.push(Step::Problem(format!(
                    "{what}: its kernel interface {} is up; if it is not in use, take it \
                     down (ip link set DEV down) and run again",
                    up.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
                )));
                return;
            }
            let dir = format!("/sys/bus/pci/devices/{addr}");
            steps.push(Step::Change(
                format!("{what}: driver_override {BIND_DRIVER}"),
                Action::Write {
                    path: format!("{dir}/driver_override"),
                    contents: format!("{BIND_DRIVER}\n"),
                },
            ));
            if let Some(d) = driver {
                let ifs = if dev.interfaces.is_empty() {
                    String::new()
                } else {
                    format!(" (interface {} goes away)", dev.interfaces.join(", "))
                };
                steps.push(Step::Change(
                    format!("{what}: unbind from {d}{ifs}"),
                    Action::Write {
                        path: format!("/sys/bus/pci/drivers/{d}/unbind"),
                        contents: addr.to_string(),
                    },
                ));
            }
            steps.push(Step::Change(
                format!("{what}: bind to {BIND_DRIVER}"),
                Action::Write {
                    path: "/sys/bus/pci/drivers_probe".into(),
                    contents: addr.to_string(),
                },
            ));
        }
    }
}

/// The /etc/dpdk/interfaces lines that make dpdk.service bind `addrs` at
/// boot: one change for them all (the file is written whole).
/// Whether two lines hold the same words (the file separates them by tabs).
fn same_words(a: &str, b: &str) -> bool {
    a.split_whitespace().eq(b.split_whitespace())
}

fn interfaces_entries(host: &Host, addrs: &[&str], steps: &mut Vec<Step>) {
    let line = |addr: &str| format!("pci {addr} {BIND_DRIVER}");
    let path = host.path(DPDK_INTERFACES);
    let text = match fs::read_to_string(&path) {
        Ok(text) => text,
        Err(_) if !path.parent().is_some_and(Path::is_dir) => {
            steps.push(Step::Note(
                "NICs: /etc/dpdk missing (Debian's dpdk package is not installed): the \
                 binding does not survive a reboot; apt install dpdk and run again"
                    .into(),
            ));
            return;
        }
        Err(_) => String::new(),
    };
    let missing: Vec<&str> = addrs
        .iter()
        .copied()
        .filter(|a| !text.lines().any(|l| same_words(l, &line(a))))
        .collect();
    if missing.is_empty() {
        steps.push(Step::Ok(format!(
            "NICs: {} bound at boot ({DPDK_INTERFACES})",
            addrs.join(", ")
        )));
        return;
    }
    // A line for the same device with another driver is replaced, not doubled.
    let other = |l: &str| {
        let l = l.trim();
        !l.starts_with('#')
            && l.split_whitespace()
                .nth(1)
                .is_some_and(|a| missing.contains(&a))
    };
    let mut out: String = text
        .lines()
        .filter(|l| !other(l))
        .map(|l| format!("{l}\n"))
        .collect();
    for a in &missing {
        out.push_str(&line(a));
        out.push('\n');
    }
    steps.push(Step::Change(
        format!(
            "NICs: bind {} at boot ({DPDK_INTERFACES}: {})",
            missing.join(", "),
            missing
                .iter()
                .map(|a| line(a))
                .collect::<Vec<_>>()
                .join("; ")
        ),
        Action::Write {
            path: DPDK_INTERFACES.into(),
            contents: out,
        },
    ));
}

/// Carries out one action under `host`'s root.
pub fn apply(host: &Host, root: &Path, action: &Action) -> Result<(), String> {
    match action {
        Action::Write { path, contents } => {
            let full = host.path(path);
            if !path.starts_with("/sys/") {
                if let Some(dir) = full.parent() {
                    fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
                }
            }
            fs::write(&full, contents).map_err(|e| format!("{}: {e}", full.display()))
        }
        Action::Modprobe(module) => {
            if root != Path::new("/") {
                return Err(format!(
                    "modprobe {module}: not under --root {}",
                    root.display()
                ));
            }
            let status = std::process::Command::new("modprobe")
                .arg(module)
                .status()
                .map_err(|e| format!("modprobe {module}: {e}"))?;
            if status.success() {
                Ok(())
            } else {
                Err(format!("modprobe {module}: {status}"))
            }
        }
    }
}

pub fn run(config: &Path, dry_run: bool, hugepages: Option<u64>, root: PathBuf) -> ExitCode {
    let config: Config = match espgw_control::load(config) {
        Ok((config, warnings)) => {
            print_diagnostics(&warnings);
            config
        }
        Err(diags) => {
            print_diagnostics(&diags);
            return ExitCode::from(EXIT_INVALID);
        }
    };
    // Changing the real machine needs root; say so before planning rather
    // than failing every write. /proc/self belongs to the effective uid.
    if !dry_run && root == Path::new("/") {
        use std::os::unix::fs::MetadataExt;
        if fs::metadata("/proc/self").is_ok_and(|m| m.uid() != 0) {
            eprintln!("espgw setup: changes the machine and must run as root (or use --dry-run)");
            return ExitCode::from(EXIT_INVALID);
        }
    }
    let host = Host::new(&root);
    let steps = plan(&config, &host, hugepages);
    let problems = steps
        .iter()
        .filter(|s| matches!(s, Step::Problem(_)))
        .count();
    let changes = steps
        .iter()
        .filter(|s| matches!(s, Step::Change(..)))
        .count();
    let mut out = std::io::stdout().lock();
    let apply_now = !dry_run && problems == 0;
    let mut failed = false;
    for step in &steps {
        let line = match step {
            Step::Ok(s) => format!("ok:       {s}"),
            Step::Note(s) => format!("note:     {s}"),
            Step::Problem(s) => format!("problem:  {s}"),
            Step::Change(s, action) if apply_now => match apply(&host, &root, action) {
                Ok(()) => format!("changed:  {s}"),
                Err(e) => {
                    failed = true;
                    format!("failed:   {s}: {e}")
                }
            },
            Step::Change(s, _) => format!("would:    {s}"),
        };
        let _ = writeln!(out, "{line}");
    }
    let summary = if failed {
        "setup: a change failed (listed above)".to_string()
    } else if problems > 0 {
        format!("setup: {problems} problem(s) to fix first; nothing was changed")
    } else if dry_run {
        format!("setup: dry run, {changes} change(s) to make, nothing was changed")
    } else {
        format!("setup: {changes} change(s) made")
    };
    let _ = writeln!(out, "{summary}");
    if failed || problems > 0 {
        ExitCode::from(EXIT_INVALID)
    } else {
        ExitCode::SUCCESS
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    /// A fake root: an 82599 at 0000:03:00.0 on ixgbe (interface down), a
    /// second one already on vfio-pci, 64 x 2 MiB hugepages, an IOMMU, and
    /// Debian's dpdk.conf with its commented default.
    fn fake_root(dir: &Path) {
        let w = |p: &str, s: &str| {
            let f = dir.join(p);
            fs::create_dir_all(f.parent().unwrap()).unwrap();
            fs::write(f, s).unwrap();
        };
        w(
            "proc/cpuinfo",
            "processor\t: 0\nflags\t\t: fpu sse4_2 aes pclmulqdq avx2\n",
        );
        w("proc/cmdline", "root=/dev/sda1\n");
        w(
            "sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages",
            "64\n",
        );
        w("sys/kernel/iommu_groups/0/type", "DMA\n");
        w("sys/bus/pci/drivers/ixgbe/unbind", "");
        w("sys/bus/pci/drivers/vfio-pci/unbind", "");
        w("sys/bus/pci/drivers_probe", "");
        for (addr, drv) in [("0000:03:00.0", "ixgbe"), ("0000:03:00.1", "vfio-pci")] {
            let d = format!("sys/bus/pci/devices/{addr}");
            w(&format!("{d}/vendor"), "0x8086\n");
            w(&format!("{d}/device"), "0x10fb\n");
            w(&format!("{d}/numa_node"), "0\n");
            w(&format!("{d}/driver_override"), "(null)\n");
            symlink(
                dir.join(format!("sys/bus/pci/drivers/{drv}")),
                dir.join(format!("{d}/driver")),
            )
            .unwrap();
        }
        w("sys/bus/pci/devices/0000:03:00.0/net/enp3s0f0/x", "");
        w("sys/class/net/enp3s0f0/operstate", "down\n");
        w(
            "etc/dpdk/dpdk.conf",
            "# NR_1G_PAGES=1\n#NR_2M_PAGES=1024\n# DROPCACHE_BEFORE_HP_ALLOC=0\n",
        );
        // Debian's own lines are tab-separated; 03:00.1 is listed already.
        w(
            "etc/dpdk/interfaces",
            "# <bus> <id> <driver>\npci\t0000:03:00.1\tvfio-pci\n",
        );
    }

    fn config(dir: &Path, ports: &str, eal: &str) -> Config {
        let text = format!(
            "[dataplane]\nmbufs = 8191\neal = {eal}\n\
             [[port]]\nname = \"prot\"\nside = \"protected\"\ndevice = \"{}\"\naddress = \"10.1.0.1/24\"\n\
             [[port]]\nname = \"unprot\"\nside = \"unprotected\"\ndevice = \"{}\"\naddress = \"192.0.2.1/24\"\n",
            ports.split(' ').next().unwrap(),
            ports.split(' ').nth(1).unwrap(),
        );
        let path = dir.join("gw.toml");
        let host = espgw_control::HostFacts::assumed(4);
        espgw_control::parse_str(&path, text, &host)
            .expect("valid test config")
            .0
    }

    fn tempdir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("espgw-setup-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn binds_the_kernel_bound_port_reserves_hugepages_and_persists_both() {
        let root = tempdir("bind");
        fake_root(&root);
        let host = Host::new(&root);
        let cfg = config(&root, "0000:03:00.0 03:00.1", "[]");
        let steps = plan(&cfg, &host, None);
        assert!(
            !steps.iter().any(|s| matches!(s, Step::Problem(_))),
            "{steps:#?}"
        );
        let changes: Vec<&Action> = steps
            .iter()
            .filter_map(|s| match s {
                Step::Change(_, a) => Some(a),
                _ => None,
            })
            .collect();
        let writes = |p: &str| {
            changes
                .iter()
                .any(|a| matches!(a, Action::Write { path, .. } if path == p))
        };
        // 8191 mbufs at MTU 1500 need far less than the 512-page floor.
        assert!(changes.contains(&&Action::Write {
            path: "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages".into(),
            contents: "512\n".into()
        }));
        assert!(changes.contains(&&Action::Write {
            path: DPDK_CONF.into(),
            contents: "# NR_1G_PAGES=1\n#NR_2M_PAGES=1024\n# DROPCACHE_BEFORE_HP_ALLOC=0\nNR_2M_PAGES=512\n".into()
        }));
        assert!(changes.contains(&&Action::Write {
            path: "/sys/bus/pci/drivers/ixgbe/unbind".into(),
            contents: "0000:03:00.0".into()
        }));
        assert!(writes("/sys/bus/pci/devices/0000:03:00.0/driver_override"));
        assert!(writes("/sys/bus/pci/drivers_probe"));
        // vfio-pci is loaded in the fake tree (a device is on it), so no
        // modprobe; it is loaded at boot; the port already on it is left
        // alone (no unbind of vfio-pci).
        assert!(!changes.iter().any(|a| matches!(a, Action::Modprobe(_))));
        assert!(writes(MODULES_LOAD));
        assert!(!writes("/sys/bus/pci/drivers/vfio-pci/unbind"));

        // Applying the file writes (modprobe is refused under a fake root)
        // and planning again finds the persistent files done.
        for a in &changes {
            apply(&host, &root, a).unwrap();
        }
        assert!(apply(&host, &root, &Action::Modprobe("vfio-pci".into())).is_err());
        let interfaces = fs::read_to_string(root.join("etc/dpdk/interfaces")).unwrap();
        // Debian's tab-separated line for 03:00.1 is kept, not doubled.
        assert_eq!(
            interfaces,
            "# <bus> <id> <driver>\npci\t0000:03:00.1\tvfio-pci\npci 0000:03:00.0 vfio-pci\n"
        );
        let again = plan(&cfg, &host, None);
        for s in &again {
            if let Step::Change(what, _) = s {
                // Only what the fake kernel cannot do remains: its driver
                // symlink does not move to vfio-pci.
                assert!(what.contains("0000:03:00.0"), "{what}");
            }
        }
        assert!(again.contains(&Step::Ok(
            "hugepages: 512 x 2 MiB reserved (need 512)".into()
        )));
        fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn problems_block_every_change() {
        let root = tempdir("problems");
        fake_root(&root);
        fs::remove_dir_all(root.join("sys/kernel/iommu_groups")).unwrap();
        fs::write(root.join("sys/class/net/enp3s0f0/operstate"), "up\n").unwrap();
        let host = Host::new(&root);
        let cfg = config(&root, "0000:03:00.0 0000:04:00.0", "[]");
        let problems: Vec<String> = plan(&cfg, &host, Some(1024))
            .into_iter()
            .filter_map(|s| match s {
                Step::Problem(p) => Some(p),
                _ => None,
            })
            .collect();
        assert_eq!(problems.len(), 3, "{problems:#?}");
        assert!(problems[0].starts_with("IOMMU: off"));
        assert!(problems[1].contains("enp3s0f0 is up"));
        assert!(problems[2].contains("no PCI device 0000:04:00.0"));
        fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn vdev_configs_without_hugepages_need_nothing() {
        let root = tempdir("vdev");
        fake_root(&root);
        let host = Host::new(&root);
        let cfg = config(
            &root,
            "net_af_packet0,iface=a net_af_packet1,iface=b",
            "[\"--no-huge\", \"--no-pci\"]",
        );
        let steps = plan(&cfg, &host, None);
        assert!(steps.iter().all(|s| matches!(s, Step::Ok(_))), "{steps:#?}");
        fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn check_warns_about_kernel_bound_missing_devices_and_hugepages() {
        let root = tempdir("check");
        fake_root(&root);
        fs::write(
            root.join("sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages"),
            "0\n",
        )
        .unwrap();
        let host = Host::new(&root);
        let cfg = config(&root, "0000:03:00.0 0000:03:00.1", "[]");
        let w = crate::host::check_warnings(&cfg, &host);
        assert_eq!(w.len(), 2, "{w:#?}");
        assert!(w[0].contains("port[0].device: 0000:03:00.0 is bound to the kernel driver ixgbe"));
        assert!(w[1].contains("no hugepages are reserved"));
        let cfg = config(&root, "0000:05:00.0 0000:03:00.1", "[\"--no-huge\"]");
        let w = crate::host::check_warnings(&cfg, &host);
        assert_eq!(w.len(), 1, "{w:#?}");
        assert!(w[0].contains("this machine has no PCI device 0000:05:00.0"));
        fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn hugepages_follow_mbufs_and_mtu_above_the_floor() {
        let root = tempdir("pages");
        let mut cfg = config(&root, "0000:03:00.0 0000:03:00.1", "[]");
        assert_eq!(hugepages_for(&cfg), 512);
        cfg.dataplane.mbufs = 262_143;
        cfg.dataplane.mtu = 9000;
        // 262143 x 10024 B + 256 MiB = 2,896,156,888 B: 1380 pages hold
        // 2,894,069,760 B, so 1381.
        assert_eq!(hugepages_for(&cfg), 1381);
        fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn a_port_on_no_driver_is_bound_and_warned_about() {
        let root = tempdir("nodriver");
        fake_root(&root);
        fs::remove_file(root.join("sys/bus/pci/devices/0000:03:00.0/driver")).unwrap();
        let host = Host::new(&root);
        let cfg = config(&root, "0000:03:00.0 0000:03:00.1", "[]");
        let w = crate::host::check_warnings(&cfg, &host);
        assert_eq!(w.len(), 1, "{w:#?}");
        assert!(
            w[0].contains("0000:03:00.0 is bound to no driver"),
            "{}",
            w[0]
        );
        let steps = plan(&cfg, &host, None);
        let port: Vec<&str> = steps
            .iter()
            .filter_map(|s| match s {
                Step::Change(what, _) if what.starts_with("port prot") => Some(what.as_str()),
                _ => None,
            })
            .collect();
        // Nothing to unbind from: override and probe only.
        assert_eq!(port.len(), 2, "{port:#?}");
        assert!(port[0].ends_with("driver_override vfio-pci"));
        assert!(port[1].ends_with("bind to vfio-pci"));
        fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn conf_lines_are_replaced_or_appended() {
        assert_eq!(
            set_conf_line("a=1\n", "NR_2M_PAGES", "NR_2M_PAGES=8"),
            "a=1\nNR_2M_PAGES=8\n"
        );
        assert_eq!(
            set_conf_line(
                "NR_2M_PAGES = 4\nNR_2M_PAGES=5\n",
                "NR_2M_PAGES",
                "NR_2M_PAGES=8"
            ),
            "NR_2M_PAGES=8\n"
        );
        // A longer key with the same prefix is not it.
        assert_eq!(
            set_conf_line("NR_2M_PAGES_X=1\n", "NR_2M_PAGES", "NR_2M_PAGES=8"),
            "NR_2M_PAGES_X=1\nNR_2M_PAGES=8\n"
        );
    }
}

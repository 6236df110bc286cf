//! `espgw setup` through the binary, on a fake /sys, /proc and /etc (the
//! hidden `--root`): what it prints, its exit status, and the files it
//! writes; `--dry-run` writes nothing.

use std::fs;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

fn write(root: &Path, rel: &str, text: &str) {
    let f = root.join(rel);
    fs::create_dir_all(f.parent().unwrap()).unwrap();
    fs::write(f, text).unwrap();
}

/// An 82599 port on ixgbe (interface down), no hugepages, an IOMMU,
/// vfio-pci loaded, Debian's dpdk.conf and interfaces files.
fn fake_machine(name: &str) -> PathBuf {
    let root = std::env::temp_dir().join(format!("espgw-setup-cli-{name}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&root);
    write(&root, "proc/cpuinfo", "flags\t: sse4_2 aes pclmulqdq\n");
    write(
        &root,
        "sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages",
        "0\n",
    );
    write(&root, "sys/kernel/iommu_groups/7/type", "DMA\n");
    write(&root, "sys/bus/pci/drivers/ixgbe/unbind", "");
    write(&root, "sys/bus/pci/drivers/vfio-pci/new_id", "");
    write(&root, "sys/bus/pci/drivers_probe", "");
    let dev = "sys/bus/pci/devices/0000:03:00.0";
    write(&root, &format!("{dev}/vendor"), "0x8086\n");
    write(&root, &format!("{dev}/device"), "0x1528\n");
    write(&root, &format!("{dev}/numa_node"), "-1\n");
    write(&root, &format!("{dev}/driver_override"), "(null)\n");
    write(&root, &format!("{dev}/net/eno1/type"), "1\n");
    write(&root, "sys/class/net/eno1/operstate", "down\n");
    symlink(
        root.join("sys/bus/pci/drivers/ixgbe"),
        root.join(format!("{dev}/driver")),
    )
    .unwrap();
    write(&root, "etc/dpdk/dpdk.conf", "# NR_2M_PAGES=64\n");
    write(&root, "etc/dpdk/interfaces", "# <bus> <id> <driver>\n");
    let config = root.join("gw.toml");
    fs::write(
        &config,
        "[dataplane]\nmbufs = 8191\n\
         [[port]]\nname = \"inside\"\nside = \"protected\"\ndevice = \"0000:03:00.0\"\naddress = \"10.1.0.1/24\"\n\
         [[port]]\nname = \"outside\"\nside = \"unprotected\"\ndevice = \"net_af_packet0,iface=x\"\naddress = \"192.0.2.1/24\"\n",
    )
    .unwrap();
    fs::set_permissions(&config, fs::Permissions::from_mode(0o600)).unwrap();
    root
}

fn setup(root: &Path, extra: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_espgw"))
        .arg("setup")
        .arg("--config")
        .arg(root.join("gw.toml"))
        .arg("--root")
        .arg(root)
        .args(extra)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn dry_run_prints_the_plan_and_writes_nothing() {
    let root = fake_machine("dry");
    let (code, out) = setup(&root, &["--dry-run"]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("would:    hugepages: reserve 512 x 2 MiB now (reserved: 0)"),
        "{out}"
    );
    assert!(out.contains("would:    port inside: 0000:03:00.0 [8086:1528]: unbind from ixgbe (interface eno1 goes away)"), "{out}");
    assert!(
        out.contains("setup: dry run, 7 change(s) to make, nothing was changed"),
        "{out}"
    );
    assert!(!out.contains("changed:"), "{out}");
    let pages =
        fs::read_to_string(root.join("sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages"))
            .unwrap();
    assert_eq!(pages, "0\n");
    assert_eq!(
        fs::read_to_string(root.join("etc/dpdk/dpdk.conf")).unwrap(),
        "# NR_2M_PAGES=64\n"
    );
    fs::remove_dir_all(&root).unwrap();
}

#[test]
fn setup_writes_every_change_and_prints_it() {
    let root = fake_machine("apply");
    let (code, out) = setup(&root, &["--hugepages", "600"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("setup: 7 change(s) made"), "{out}");
    assert_eq!(out.matches("changed:").count(), 7, "{out}");
    let read = |rel: &str| fs::read_to_string(root.join(rel)).unwrap();
    assert_eq!(
        read("sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages"),
        "600\n"
    );
    assert_eq!(
        read("etc/dpdk/dpdk.conf"),
        "# NR_2M_PAGES=64\nNR_2M_PAGES=600\n"
    );
    assert_eq!(read("etc/modules-load.d/espgw-vfio.conf"), "vfio-pci\n");
    assert_eq!(
        read("sys/bus/pci/devices/0000:03:00.0/driver_override"),
        "vfio-pci\n"
    );
    assert_eq!(read("sys/bus/pci/drivers/ixgbe/unbind"), "0000:03:00.0");
    assert_eq!(read("sys/bus/pci/drivers_probe"), "0000:03:00.0");
    assert_eq!(
        read("etc/dpdk/interfaces"),
        "# <bus> <id> <driver>\npci 0000:03:00.0 vfio-pci\n"
    );
    fs::remove_dir_all(&root).unwrap();
}

#[test]
fn a_missing_device_changes_nothing_and_exits_1() {
    let root = fake_machine("missing");
    fs::remove_dir_all(root.join("sys/bus/pci/devices/0000:03:00.0")).unwrap();
    let (code, out) = setup(&root, &[]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("problem:  port inside: this machine has no PCI device 0000:03:00.0"),
        "{out}"
    );
    assert!(
        out.contains("setup: 1 problem(s) to fix first; nothing was changed"),
        "{out}"
    );
    assert!(!out.contains("changed:"), "{out}");
    assert_eq!(
        fs::read_to_string(root.join("etc/dpdk/dpdk.conf")).unwrap(),
        "# NR_2M_PAGES=64\n"
    );
    fs::remove_dir_all(&root).unwrap();
}

//! The EAL command line for a config: lcores for the workers, one device
//! argument per port, then the config's own `eal` list passed through.

use espgw_control::config::{Dataplane, Port};
use espgw_esp::crypto::provider::SimdWidth;

/// True when `arg` (or `arg=...`) is one of `flags`.
fn is_flag(arg: &str, flags: &[&str]) -> bool {
    flags.iter().any(|f| {
        arg == *f
            || arg
                .strip_prefix(f)
                .is_some_and(|rest| rest.starts_with('='))
    })
}

/// A PCI address such as `0000:01:00.0` or `01:00.0` (as opposed to a vdev).
pub use espgw_control::config::is_pci_device as is_pci;

/// Worker lcores a config needs: one per worker, plus the I/O lcore in
/// pipeline mode.
pub fn lcores_needed(dp: &Dataplane) -> usize {
    dp.lcores_needed()
}

/// RX/TX queue pairs per port: one per worker, or the I/O lcore's one.
pub fn queues_per_port(dp: &Dataplane) -> usize {
    dp.queues_per_port()
}

/// DPDK's `RTE_MAX_LCORE` in Debian's 22.11 build: its `--lcores` parser
/// takes a CPU of this number at the start of a range in a group as "no
/// start yet", so `(128-255)` would mean CPU 255 alone.
const EAL_RANGE_QUIRK_CPU: u32 = 128;

/// A CPU list as the EAL's `--lcores` groups write it: ascending runs
/// as `a-b`, joined by commas (`0-3,8,10-11`); `0` for an empty list; a
/// run that starts at CPU 128 written `128,129-..` (see
/// [`EAL_RANGE_QUIRK_CPU`]).
pub fn cpu_list(cpus: &[usize]) -> String {
    let cpus: Vec<u32> = cpus.iter().filter_map(|&c| u32::try_from(c).ok()).collect();
    let list = espgw_control::config::format_cpu_list(&cpus);
    if list.is_empty() {
        return "0".into();
    }
    let quirk = format!("{EAL_RANGE_QUIRK_CPU}-");
    list.split(',')
        .map(|run| match run.strip_prefix(&quirk) {
            Some(end) if end == (EAL_RANGE_QUIRK_CPU + 1).to_string() => {
                format!("{EAL_RANGE_QUIRK_CPU},{end}")
            }
            Some(end) => format!("{EAL_RANGE_QUIRK_CPU},{}-{end}", EAL_RANGE_QUIRK_CPU + 1),
            None => run.to_string(),
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// The `--lcores` value: lcore 0 is the main (control) lcore, lcores
/// 1..=workers run the workers (and workers+1 the I/O lcore in pipeline
/// mode). With `lcores` in the config each worker is pinned to its core
/// (the I/O lcore floats); without, every lcore floats over `cpus`, the
/// CPUs this process may run on (the kernel places them: right for small
/// shared machines). `cpus` is the affinity mask, not a count: a gateway
/// started with `taskset -c 2,3` or systemd's `CPUAffinity=2 3` keeps its
/// lcores on CPUs 2 and 3 (before session 20 they were sent to CPUs 0
/// and 1, as many as it had, outside the mask).
pub fn lcore_map(dp: &Dataplane, cpus: &[usize]) -> String {
    let all = format!("({})", cpu_list(cpus));
    let needed = lcores_needed(dp);
    match &dp.lcores {
        Some(cores) => {
            let mut parts = vec![format!("0@{all}")];
            for (k, core) in cores.iter().take(dp.workers).enumerate() {
                parts.push(format!("{}@{core}", k + 1));
            }
            if needed > dp.workers {
                parts.push(format!("{}@{all}", dp.workers + 1));
            }
            parts.join(",")
        }
        None if needed == 0 => format!("0@{all}"),
        None => format!("(0-{needed})@{all}"),
    }
}

/// The device argument of a port. af_packet gets one queue pair per
/// worker, sends through the qdisc layer (`qdisc_bypass=0`) so that packet
/// taps (tcpdump on the gateway's own interface) see what espgw sends, and
/// rings of 4096 frames; each can be set in the device string instead.
pub fn device_arg(device: &str, workers: usize) -> String {
    let name = device.split(',').next().unwrap_or(device);
    if !name.starts_with("net_af_packet") {
        return device.to_string();
    }
    let mut arg = device.to_string();
    if workers > 1 && !device.contains("qpairs=") {
        arg.push_str(&format!(",qpairs={workers}"));
    }
    if !device.contains("qdisc_bypass=") {
        arg.push_str(",qdisc_bypass=0");
    }
    // The default ring of 512 frames overflows under bursts on a shared
    // machine (the spot measurement is in docs/dataplane.md, EAL section).
    if !device.contains("framecnt=") {
        arg.push_str(",framecnt=4096");
    }
    arg
}

/// The whole EAL argument list (without the program name).
pub fn eal_args(dp: &Dataplane, ports: &[Port], gateway: &str, cpus: &[usize]) -> Vec<String> {
    let user = &dp.eal;
    let has = |flags: &[&str]| user.iter().any(|a| is_flag(a, flags));
    let mut args = Vec::new();
    if !has(&["-l", "-c", "--lcores"]) {
        args.push(format!("--lcores={}", lcore_map(dp, cpus)));
    }
    if !has(&["--in-memory", "--file-prefix"]) {
        // Several gateways on one machine must not share DPDK's runtime files.
        let name: String = gateway
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        args.push(format!("--file-prefix=espgw_{name}"));
    }
    // `max_simd_bitwidth` below 512: DPDK's own vector code (drivers'
    // RX/TX paths, lookups) is held to the same width as the ciphers.
    if dp.max_simd_bitwidth != SimdWidth::Bits512 && !has(&["--force-max-simd-bitwidth"]) {
        args.push(format!(
            "--force-max-simd-bitwidth={}",
            dp.max_simd_bitwidth.bits()
        ));
    }
    for p in ports {
        if is_pci(&p.device) {
            args.push("-a".into());
            args.push(p.device.clone());
        } else {
            args.push(format!(
                "--vdev={}",
                device_arg(&p.device, queues_per_port(dp))
            ));
        }
    }
    args.extend(user.iter().cloned());
    args
}

#[cfg(test)]
mod tests {
    use super::*;
    use espgw_control::config::Mode;
    use espgw_control::config::{Poll, Side};

    fn dp(workers: usize, lcores: Option<Vec<u32>>, eal: &[&str]) -> Dataplane {
        Dataplane {
            workers,
            lcores,
            mode: Mode::RunToCompletion,
            burst: 32,
            mbufs: 4095,
            mbufs_set: true,
            mtu: 1500,
            poll: Poll::Adaptive,
            idle_sleep_us: 100,
            eal: eal.iter().map(|s| s.to_string()).collect(),
            spread_decrypt: espgw_control::config::SpreadDecrypt::Off,
            spread_late: espgw_control::config::SpreadLate::Drop,
            spread_wait_us: 100,
            spread_max_round_trip_ns: 120,
            spread_recheck_ms: 2_000,
            per_cpu_handoff: false,
            max_simd_bitwidth: SimdWidth::Bits512,
            steer_esp: espgw_control::config::SteerEsp::Auto,
            tx_checksum_offload: true,
        }
    }

    fn port(device: &str) -> Port {
        Port {
            name: "p".into(),
            side: Side::Protected,
            device: device.into(),
            addresses: vec![],
            mac: None,
        }
    }

    #[test]
    fn lcores_float_or_pin() {
        assert_eq!(lcore_map(&dp(1, None, &[]), &[0, 1]), "(0-1)@(0-1)");
        assert_eq!(lcore_map(&dp(6, None, &[]), &[0, 1]), "(0-6)@(0-1)");
        let eight: Vec<usize> = (0..8).collect();
        assert_eq!(
            lcore_map(&dp(2, Some(vec![2, 5]), &[]), &eight),
            "0@(0-7),1@2,2@5"
        );
    }

    /// The process's affinity mask, not its size: `taskset -c 2,3` keeps
    /// every floating lcore on CPUs 2 and 3.
    #[test]
    fn floating_lcores_stay_in_the_affinity_mask() {
        assert_eq!(lcore_map(&dp(2, None, &[]), &[2, 3]), "(0-2)@(2-3)");
        assert_eq!(
            lcore_map(&dp(1, None, &[]), &[1, 3, 4, 5, 9]),
            "(0-1)@(1,3-5,9)"
        );
        assert_eq!(
            lcore_map(&dp(2, Some(vec![4, 5]), &[]), &[4, 5, 6]),
            "0@(4-6),1@4,2@5"
        );
    }

    #[test]
    fn cpu_lists_are_runs() {
        assert_eq!(cpu_list(&[]), "0");
        assert_eq!(cpu_list(&[3]), "3");
        assert_eq!(cpu_list(&[0, 1, 2, 3]), "0-3");
        assert_eq!(cpu_list(&[11, 0, 2, 1, 8, 10, 8]), "0-2,8,10-11");
        // The EAL's parser would read (128-255) as CPU 255 alone.
        let high: Vec<usize> = (128..256).collect();
        assert_eq!(cpu_list(&high), "128,129-255");
        assert_eq!(cpu_list(&[128, 129]), "128,129");
        assert_eq!(cpu_list(&[127, 128, 129]), "127-129");
    }

    #[test]
    fn args_cover_ports_and_pass_user_args_through() {
        let ports = [port("net_af_packet0,iface=a"), port("0000:01:00.0")];
        let a = eal_args(&dp(2, None, &["--no-huge"]), &ports, "gw a", &[0, 1, 2, 3]);
        assert_eq!(
            a,
            [
                "--lcores=(0-2)@(0-3)",
                "--file-prefix=espgw_gw_a",
                "--vdev=net_af_packet0,iface=a,qpairs=2,qdisc_bypass=0,framecnt=4096",
                "-a",
                "0000:01:00.0",
                "--no-huge"
            ]
        );
        let a = eal_args(
            &dp(1, None, &["--in-memory", "-l", "0-3"]),
            &ports[..1],
            "g",
            &[0, 1, 2, 3],
        );
        assert_eq!(
            a,
            [
                "--vdev=net_af_packet0,iface=a,qdisc_bypass=0,framecnt=4096",
                "--in-memory",
                "-l",
                "0-3"
            ]
        );
        // A width cap reaches DPDK too, unless the user's EAL list sets it.
        let mut capped = dp(1, None, &["--in-memory"]);
        capped.max_simd_bitwidth = SimdWidth::Bits256;
        let a = eal_args(&capped, &ports[..1], "g", &[0, 1, 2, 3]);
        assert!(
            a.iter().any(|x| x == "--force-max-simd-bitwidth=256"),
            "{a:?}"
        );
        capped.eal.push("--force-max-simd-bitwidth=128".into());
        let a = eal_args(&capped, &ports[..1], "g", &[0, 1, 2, 3]);
        let given: Vec<_> = a.iter().filter(|x| x.contains("simd")).collect();
        assert_eq!(given, ["--force-max-simd-bitwidth=128"]);
        assert_eq!(
            device_arg("net_af_packet0,iface=a,qdisc_bypass=1,framecnt=64", 1),
            "net_af_packet0,iface=a,qdisc_bypass=1,framecnt=64"
        );
    }
}

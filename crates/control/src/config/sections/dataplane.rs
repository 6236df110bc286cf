//! `[dataplane]`: workers, cores, mode, burst, mbufs, MTU, polling, EAL args.

use crate::config::model::{
    Dataplane, Mode, Poll, SpreadDecrypt, SpreadLate, SteerEsp, DEFAULT_MAX_SIMD_BITWIDTH,
};
use crate::config::net::parse_lcores;
use crate::config::reader::{Ctx, Table};
use crate::config::HostFacts;
use espgw_esp::crypto::provider::SimdWidth;

pub(crate) const KEYS: &[&str] = &[
    "workers",
    "lcores",
    "mode",
    "burst",
    "mbufs",
    "mtu",
    "poll",
    "idle_sleep_us",
    "eal",
    "spread_decrypt",
    "spread_late",
    "spread_wait_us",
    "spread_max_round_trip_ns",
    "spread_recheck_ms",
    "per_cpu_handoff",
    "max_simd_bitwidth",
    "steer_esp",
    "tx_checksum_offload",
];

pub const DEFAULT_BURST: u16 = 32;
/// DPDK drivers take at most a few hundred packets per burst call.
pub const MAX_BURST: u16 = 512;
pub const DEFAULT_MBUFS: u32 = 8191;
pub const MIN_MBUFS: u32 = 512;
pub const MAX_MBUFS: u32 = 16 * 1024 * 1024;
pub const DEFAULT_MTU: u16 = 1500;
/// RFC 791: every IPv4 host must accept 576-byte datagrams.
pub const MIN_MTU_V4: u16 = 576;
/// RFC 8200: the IPv6 minimum link MTU.
pub const MIN_MTU_V6: u16 = 1280;
pub const MAX_MTU: u16 = 9000;
/// `idle_sleep_us`: the default, and its range (the first sleep is 10 µs;
/// above 100 ms an idle gateway would answer its first packet too late).
pub const DEFAULT_IDLE_SLEEP_US: u32 = 100;
pub const MIN_IDLE_SLEEP_US: u32 = 10;
/// `spread_wait_us`: the default is the fan-out's own
/// (`espgw_dataplane::worker::spread_consts::MAX_WAIT_NS`, 100 µs); from a
/// few parts' decryption (a part of 32 packets of 1420 bytes takes 5-10
/// µs here, and two may be queued before it) to 1 ms (beyond that a stalled worker stalls
/// the tunnel for longer than any gateway should delay a packet, and the
/// parts held waiting, and the job boxes and rings sized for them, grow
/// with it: 10 x the default's at 1 ms).
pub const DEFAULT_SPREAD_WAIT_US: u32 = 100;
pub const MIN_SPREAD_WAIT_US: u32 = 50;
pub const MAX_SPREAD_WAIT_US: u32 = 1_000;
pub const MAX_IDLE_SLEEP_US: u32 = 100_000;
/// `spread_max_round_trip_ns`: the start-up probe's limit for
/// `spread_decrypt = "auto"`. Between what was measured: on the 2-vCPU
/// Zen 5 machine the probe read 71-83 ns while its two vCPUs sit close
/// (the fan-out then ran 1.2x one worker at 64 B and 1.4-1.6x at 1420 B)
/// and about 330 ns while the host places them apart (0.57x one worker at
/// 64 B); the 16-vCPU Xeon guest's cores measured 146-192 ns with
/// bench/c2c-latency.c (which reads lower than this probe), where the
/// fan-out never paid (docs/multicore.md, "The cores' round trip
/// decides"). 0 skips the probe; 100 µs is the ceiling (a round trip that
/// slow is a core busy with something else).
pub const DEFAULT_SPREAD_MAX_ROUND_TRIP_NS: u32 = 120;
pub const MAX_SPREAD_MAX_ROUND_TRIP_NS: u32 = 100_000;
/// `spread_recheck_ms`: how often, in each receiving worker's loop time,
/// `spread_decrypt = "auto"` checks while the worker is behind whether
/// the fan-out makes it deliver more than alone (a trial of
/// [`SPREAD_TRIAL_MS`], half of it the worse way;
/// `espgw_dataplane::spread_trial`). Every 2 s a trial costs, by its
/// timing (not measured), 0.75 % of the worker's rate where the fan-out
/// halves it (or doubles it), 1.5 % at most; 0 turns the check off; from 100 ms (shorter, a trial would run
/// more often than the gateway holds its verdict) to an hour.
pub const DEFAULT_SPREAD_RECHECK_MS: u32 = 2_000;
pub const MIN_SPREAD_RECHECK_MS: u32 = 100;
pub const MAX_SPREAD_RECHECK_MS: u32 = 3_600_000;
/// How long one trial of the live check takes (six windows of 10 ms).
pub const SPREAD_TRIAL_MS: u32 = 60;

/// `spread_recheck_ms` (and `espgw bench --spread-recheck-ms`): 0, or
/// [`MIN_SPREAD_RECHECK_MS`] to [`MAX_SPREAD_RECHECK_MS`]; the error says
/// what is wrong and what is accepted.
pub fn check_spread_recheck_ms(ms: i128) -> Result<u32, String> {
    let range = format!("0 (no check) or {MIN_SPREAD_RECHECK_MS} to {MAX_SPREAD_RECHECK_MS}");
    if ms == 0
        || (i128::from(MIN_SPREAD_RECHECK_MS)..=i128::from(MAX_SPREAD_RECHECK_MS)).contains(&ms)
    {
        Ok(ms as u32)
    } else if (1..i128::from(MIN_SPREAD_RECHECK_MS)).contains(&ms) {
        Err(format!(
            "{ms} ms is too short (each check is a {SPREAD_TRIAL_MS} ms trial): {range}"
        ))
    } else {
        Err(format!("{ms} is out of range: {range}"))
    }
}

/// EAL options that select cores; espgw derives them from `lcores`.
const EAL_CORE_OPTIONS: &[&str] = &["-l", "-c", "--lcores", "--main-lcore", "--master-lcore"];

/// `workers` as written: a count or `"all"`.
enum Workers {
    Count(usize),
    All,
}

/// `[dataplane]` as a config without one gets it (before `mbufs` is sized
/// to the ports).
pub(crate) fn defaults() -> Dataplane {
    Dataplane {
        workers: 1,
        lcores: None,
        mode: Mode::RunToCompletion,
        burst: DEFAULT_BURST,
        mbufs: DEFAULT_MBUFS,
        mbufs_set: false,
        mtu: DEFAULT_MTU,
        poll: Poll::Busy,
        idle_sleep_us: DEFAULT_IDLE_SLEEP_US,
        eal: Vec::new(),
        spread_decrypt: SpreadDecrypt::Off,
        spread_late: SpreadLate::Drop,
        spread_wait_us: DEFAULT_SPREAD_WAIT_US,
        spread_max_round_trip_ns: DEFAULT_SPREAD_MAX_ROUND_TRIP_NS,
        spread_recheck_ms: DEFAULT_SPREAD_RECHECK_MS,
        per_cpu_handoff: false,
        max_simd_bitwidth: DEFAULT_MAX_SIMD_BITWIDTH,
        steer_esp: SteerEsp::Auto,
        tx_checksum_offload: true,
    }
}

pub(crate) fn read(ctx: &mut Ctx, table: Option<Table>, host: &HostFacts) -> Dataplane {
    let mut dp = defaults();
    let Some(t) = table else { return dp };

    let workers = t.get(ctx, "workers").and_then(|f| {
        if f.is_int() {
            f.int(ctx, 1, 4096).map(|n| Workers::Count(n as usize))
        } else {
            f.choice(ctx, &[("all", ())]).map(|_| Workers::All)
        }
    });
    if let Some(f) = t.get(ctx, "lcores") {
        dp.lcores = if f.is_int() {
            f.int(ctx, 0, i128::from(crate::config::net::MAX_LCORE) - 1)
                .map(|c| vec![c as u32])
        } else {
            f.parse_with(ctx, "a core list like \"1-3,5\"", parse_lcores)
        };
    }
    dp.workers = match (workers, &dp.lcores) {
        (Some(Workers::Count(n)), _) => n,
        (Some(Workers::All), Some(lcores)) => lcores.len(),
        (Some(Workers::All), None) => host.cpus.max(1),
        (None, Some(lcores)) => lcores.len(),
        (None, None) => 1,
    };
    if let Some(lcores) = &dp.lcores {
        if dp.workers > lcores.len() {
            ctx.error(
                "dataplane.workers",
                format!(
                    "{} workers but lcores lists only {} cores",
                    dp.workers,
                    lcores.len()
                ),
                Some(&format!(
                    "at most {} workers, or more cores in lcores",
                    lcores.len()
                )),
            );
        }
        match &host.allowed_cpus {
            // The affinity mask known: every core must be in it (under
            // `taskset -c 2,3` core 3 is fine and core 0 is not, whatever
            // the count says).
            Some(allowed) => {
                let outside: Vec<String> = lcores
                    .iter()
                    .filter(|c| !allowed.contains(c))
                    .map(u32::to_string)
                    .collect();
                if !outside.is_empty() {
                    ctx.warn(
                        "dataplane.lcores",
                        format!(
                            "{} {} {} outside the CPUs this process may run on ({}: its affinity \
                             mask, from taskset or systemd's CPUAffinity=)",
                            if outside.len() == 1 { "core" } else { "cores" },
                            outside.join(", "),
                            if outside.len() == 1 { "is" } else { "are" },
                            crate::config::format_cpu_list(allowed)
                        ),
                    );
                }
            }
            None => {
                if let Some(&max) = lcores.last() {
                    if max as usize >= host.cpus {
                        ctx.warn(
                            "dataplane.lcores",
                            format!(
                                "core {max} does not exist on this machine ({} cores)",
                                host.cpus
                            ),
                        );
                    }
                }
            }
        }
    } else if dp.workers > host.cpus {
        ctx.warn(
            "dataplane.workers",
            format!(
                "{} workers on {} cores: workers will share cores",
                dp.workers, host.cpus
            ),
        );
    }
    if let Some(f) = t.get(ctx, "mode") {
        dp.mode = f
            .choice(
                ctx,
                &[
                    ("run-to-completion", Mode::RunToCompletion),
                    ("pipeline", Mode::Pipeline),
                ],
            )
            .unwrap_or(dp.mode);
    }
    if let Some(f) = t.get(ctx, "burst") {
        dp.burst = f
            .int(ctx, 1, i128::from(MAX_BURST))
            .map_or(dp.burst, |v| v as u16);
    }
    if let Some(f) = t.get(ctx, "mbufs") {
        if let Some(v) = f.int(ctx, i128::from(MIN_MBUFS), i128::from(MAX_MBUFS)) {
            dp.mbufs = v as u32;
            dp.mbufs_set = true;
        }
    }
    if let Some(f) = t.get(ctx, "mtu") {
        dp.mtu = f
            .int(ctx, i128::from(MIN_MTU_V4), i128::from(MAX_MTU))
            .map_or(dp.mtu, |v| v as u16);
    }
    if let Some(f) = t.get(ctx, "poll") {
        dp.poll = f
            .choice(ctx, &[("busy", Poll::Busy), ("adaptive", Poll::Adaptive)])
            .unwrap_or(dp.poll);
    }
    if let Some(f) = t.get(ctx, "idle_sleep_us") {
        dp.idle_sleep_us = f
            .int(
                ctx,
                i128::from(MIN_IDLE_SLEEP_US),
                i128::from(MAX_IDLE_SLEEP_US),
            )
            .map_or(dp.idle_sleep_us, |v| v as u32);
        if dp.poll == Poll::Busy {
            ctx.warn(
                "dataplane.idle_sleep_us",
                "has no effect with poll = \"busy\" (busy workers never sleep)".to_string(),
            );
        }
    }
    if let Some(f) = t.get(ctx, "spread_decrypt") {
        dp.spread_decrypt = f
            .choice(
                ctx,
                &[
                    ("off", SpreadDecrypt::Off),
                    ("auto", SpreadDecrypt::Auto),
                    ("always", SpreadDecrypt::Always),
                ],
            )
            .unwrap_or(dp.spread_decrypt);
        // What the runtime does with it anyway (each worker decrypts what
        // it receives), said where the operator looks.
        if dp.spread_decrypt != SpreadDecrypt::Off {
            if dp.mode == Mode::Pipeline {
                ctx.warn(
                    "dataplane.spread_decrypt",
                    "has no effect with mode = \"pipeline\" (the fan-out is run-to-completion's)"
                        .to_string(),
                );
            } else if dp.workers < 2 {
                ctx.warn(
                    "dataplane.spread_decrypt",
                    "has no effect with 1 worker (no other worker to spread to)".to_string(),
                );
            }
        }
    }
    if let Some(f) = t.get(ctx, "spread_late") {
        dp.spread_late = f
            .choice(ctx, &SpreadLate::ALL.map(|l| (l.name(), l)))
            .unwrap_or(dp.spread_late);
        warn_without_fan_out(ctx, &dp, "spread_late", "no reorder stage");
    }
    if let Some(f) = t.get(ctx, "spread_wait_us") {
        dp.spread_wait_us = f
            .int(
                ctx,
                i128::from(MIN_SPREAD_WAIT_US),
                i128::from(MAX_SPREAD_WAIT_US),
            )
            .map_or(dp.spread_wait_us, |v| v as u32);
        warn_without_fan_out(ctx, &dp, "spread_wait_us", "no reorder stage");
    }
    if let Some(f) = t.get(ctx, "spread_max_round_trip_ns") {
        dp.spread_max_round_trip_ns = f
            .int(ctx, 0, i128::from(MAX_SPREAD_MAX_ROUND_TRIP_NS))
            .map_or(dp.spread_max_round_trip_ns, |v| v as u32);
        if dp.spread_decrypt == SpreadDecrypt::Always {
            ctx.warn(
                "dataplane.spread_max_round_trip_ns",
                "has no effect with spread_decrypt = \"always\" (only \"auto\" probes the cores)"
                    .to_string(),
            );
        } else {
            warn_without_fan_out(ctx, &dp, "spread_max_round_trip_ns", "nothing to probe for");
        }
    }
    if let Some(f) = t.get(ctx, "spread_recheck_ms") {
        let ok = f
            .int(ctx, 0, i128::from(MAX_SPREAD_RECHECK_MS))
            .and_then(|v| match check_spread_recheck_ms(v) {
                Ok(ms) => Some(ms),
                Err(e) => {
                    ctx.error("dataplane.spread_recheck_ms", e, None);
                    None
                }
            });
        dp.spread_recheck_ms = ok.unwrap_or(dp.spread_recheck_ms);
        if dp.spread_decrypt == SpreadDecrypt::Always {
            ctx.warn(
                "dataplane.spread_recheck_ms",
                "has no effect with spread_decrypt = \"always\" (only \"auto\" checks whether \
                 the fan-out pays)"
                    .to_string(),
            );
        } else {
            warn_without_fan_out(ctx, &dp, "spread_recheck_ms", "nothing to check");
        }
    }
    if let Some(f) = t.get(ctx, "per_cpu_handoff") {
        dp.per_cpu_handoff = f.bool(ctx).unwrap_or(dp.per_cpu_handoff);
        if dp.per_cpu_handoff {
            warn_without_fan_out(
                ctx,
                &dp,
                "per_cpu_handoff",
                "the handoff runs on the fan-out's rings",
            );
        }
    }
    if let Some(f) = t.get(ctx, "steer_esp") {
        dp.steer_esp = f
            .choice(ctx, &SteerEsp::ALL.map(|s| (s.name(), s)))
            .unwrap_or(dp.steer_esp);
        if dp.steer_esp == SteerEsp::Auto && !dp.steers_esp() {
            let why = if dp.mode == Mode::Pipeline {
                "mode = \"pipeline\" (one RX queue per port)"
            } else {
                "1 worker (one RX queue per port)"
            };
            ctx.warn("dataplane.steer_esp", format!("has no effect with {why}"));
        }
    }
    if let Some(f) = t.get(ctx, "tx_checksum_offload") {
        dp.tx_checksum_offload = f
            .choice(ctx, &[("auto", true), ("off", false)])
            .unwrap_or(dp.tx_checksum_offload);
    }
    if let Some(f) = t.get(ctx, "max_simd_bitwidth") {
        // The widths the ciphers can be held to (the 128-bit AES-GCM is
        // only espgw-aesgcm's short-packet half; ring picks its own code).
        const WIDTHS: &str = "256 (no AVX-512 code) or 512 (whatever the CPU has, the default)";
        if !f.is_int() {
            f.error(ctx, "not an integer", Some(WIDTHS));
        } else if let Some(bits) = f.int(ctx, i128::from(i64::MIN), i128::from(i64::MAX)) {
            match u16::try_from(bits).ok().and_then(SimdWidth::from_bits) {
                Some(w) => dp.max_simd_bitwidth = w,
                None => f.error(
                    ctx,
                    format!("{bits} is not a vector width espgw runs at"),
                    Some(WIDTHS),
                ),
            }
        }
    }
    if let Some(f) = t.get(ctx, "eal") {
        let items = f.array(ctx, "a list of strings").unwrap_or_default();
        for item in &items {
            let Some(arg) = item.str(ctx) else { continue };
            // espgw places workers itself; EAL core options would fight it.
            let option = arg.split('=').next().unwrap_or(arg);
            if EAL_CORE_OPTIONS.contains(&option) {
                item.error(
                    ctx,
                    format!("{option:?} chooses cores, which espgw does itself"),
                    Some("dataplane.lcores and dataplane.workers instead"),
                );
                continue;
            }
            dp.eal.push(arg.to_string());
        }
    }
    // DPDK's own width cap given in `eal` and the ciphers' key disagree:
    // the ciphers follow `max_simd_bitwidth`, which operators who cap
    // DPDK the usual way may not know (espgw passes the flag to DPDK
    // itself when the key is 256).
    if let Some(raw) = eal_simd_bitwidth(&dp.eal) {
        let dpdk_capped = raw != 0 && raw < 512;
        let ciphers_capped = dp.max_simd_bitwidth == SimdWidth::Bits256;
        if dpdk_capped && !ciphers_capped {
            ctx.warn(
                "dataplane.eal",
                format!(
                    "--force-max-simd-bitwidth={raw} holds DPDK's code to {raw} bits but not the \
                     ciphers, which follow max_simd_bitwidth: add max_simd_bitwidth = 256 to hold \
                     them too"
                ),
            );
        } else if ciphers_capped && !dpdk_capped {
            ctx.warn(
                "dataplane.eal",
                format!(
                    "--force-max-simd-bitwidth={raw} lets DPDK's code use more than the 256 bits \
                     max_simd_bitwidth holds the ciphers to"
                ),
            );
        }
    }
    t.finish(ctx);
    dp
}

/// The value of DPDK's `--force-max-simd-bitwidth` in an EAL argument list
/// (`--force-max-simd-bitwidth=N` or `--force-max-simd-bitwidth N`; DPDK
/// reads 0 as no limit).
fn eal_simd_bitwidth(eal: &[String]) -> Option<u16> {
    const FLAG: &str = "--force-max-simd-bitwidth";
    let value = eal.iter().enumerate().find_map(|(i, a)| {
        if a == FLAG {
            eal.get(i + 1).map(String::as_str)
        } else {
            a.strip_prefix(FLAG)?.strip_prefix('=')
        }
    })?;
    value.parse::<u16>().ok()
}

/// Warns that `[dataplane] key` does nothing while the decrypt fan-out is
/// off (`why`: what it would act on).
fn warn_without_fan_out(ctx: &mut Ctx, dp: &Dataplane, key: &str, why: &str) {
    if dp.spread_decrypt == SpreadDecrypt::Off {
        ctx.warn(
            &format!("dataplane.{key}"),
            format!("has no effect with spread_decrypt = \"off\" ({why})"),
        );
    }
}

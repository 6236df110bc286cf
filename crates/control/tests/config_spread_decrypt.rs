//! `[dataplane] spread_decrypt`: the decrypt fan-out (docs/multicore.md).

mod common;
use common::*;

use espgw_control::config::{Mode, SpreadDecrypt, SpreadLate, SpreadWhen};

#[test]
fn off_by_default_and_auto_only_spreads_with_several_workers_in_run_to_completion() {
    let (config, _) = parse(&base()).unwrap_or_else(|d| panic!("{}", render(&d)));
    assert_eq!(config.dataplane.spread_decrypt, SpreadDecrypt::Off);
    assert!(!config.dataplane.spreads_decrypt());
    assert_eq!(config.dataplane.spread_when(), None);
    let (behind, always) = (Some(SpreadWhen::Behind), Some(SpreadWhen::Always));
    for (workers, lines, want, when) in [
        (2, "spread_decrypt = \"off\"", SpreadDecrypt::Off, None),
        (1, "spread_decrypt = \"auto\"", SpreadDecrypt::Auto, None),
        (2, "spread_decrypt = \"auto\"", SpreadDecrypt::Auto, behind),
        (
            2,
            "spread_decrypt = \"always\"",
            SpreadDecrypt::Always,
            always,
        ),
        (
            1,
            "spread_decrypt = \"always\"",
            SpreadDecrypt::Always,
            None,
        ),
        (
            2,
            "spread_decrypt = \"auto\"\nmode = \"pipeline\"",
            SpreadDecrypt::Auto,
            None,
        ),
        (
            2,
            "spread_decrypt = \"always\"\nmode = \"pipeline\"",
            SpreadDecrypt::Always,
            None,
        ),
    ] {
        let text = with_workers_dp(workers, lines);
        let (config, diags) = parse(&text).unwrap_or_else(|d| panic!("{}", render(&d)));
        // Set where it does nothing (1 worker, pipeline mode): warned
        // about, by its key, saying why.
        let shown = render(&diags);
        let warned = shown.contains("dataplane.spread_decrypt") && shown.contains("no effect");
        assert_eq!(
            warned,
            when.is_none() && want != SpreadDecrypt::Off,
            "{lines}: {shown}"
        );
        if warned {
            let why = if workers == 1 { "1 worker" } else { "pipeline" };
            assert!(shown.contains(why), "{shown}");
        }
        assert_eq!(config.dataplane.workers, workers as usize);
        assert_eq!(config.dataplane.spread_decrypt, want, "{lines}");
        assert_eq!(config.dataplane.spread_when(), when, "{lines}");
        assert_eq!(
            config.dataplane.spreads_decrypt(),
            when.is_some(),
            "{lines}"
        );
        if lines.contains("pipeline") {
            assert_eq!(config.dataplane.mode, Mode::Pipeline);
        }
    }
}

#[test]
fn another_value_names_the_choices() {
    let text = with_workers_dp(2, "spread_decrypt = \"on\"");
    let shown = render(&errors(&text));
    assert!(
        shown.contains("dataplane.spread_decrypt")
            && shown.contains("auto")
            && shown.contains("always"),
        "{shown}"
    );
}

/// The `[dataplane]` of 2 workers with `lines`, and whether `key` was
/// warned about as having no effect.
fn parse_warned(lines: &str, key: &str) -> (espgw_control::config::Config, bool) {
    let (config, diags) =
        parse(&with_workers_dp(2, lines)).unwrap_or_else(|d| panic!("{}", render(&d)));
    let shown = render(&diags);
    let warned = shown.contains(&format!("dataplane.{key}")) && shown.contains("no effect");
    (config, warned)
}

/// `spread_late`: late parts dropped by default, sent with `"send"`; a
/// third value is refused with the choices named; set without the fan-out
/// it is kept but warned about, by its key.
#[test]
fn spread_late_drops_by_default_sends_when_asked_and_is_warned_about_without_the_fan_out() {
    let (config, _) = parse(&base()).unwrap_or_else(|d| panic!("{}", render(&d)));
    assert_eq!(config.dataplane.spread_late, SpreadLate::Drop);
    for (lines, want, warned) in [
        ("spread_decrypt = \"auto\"", SpreadLate::Drop, false),
        (
            "spread_decrypt = \"auto\"\nspread_late = \"drop\"",
            SpreadLate::Drop,
            false,
        ),
        (
            "spread_decrypt = \"auto\"\nspread_late = \"send\"",
            SpreadLate::Send,
            false,
        ),
        ("spread_late = \"send\"", SpreadLate::Send, true),
    ] {
        let (config, was_warned) = parse_warned(lines, "spread_late");
        assert_eq!(config.dataplane.spread_late, want, "{lines}");
        assert_eq!(was_warned, warned, "{lines}");
    }
    let shown = render(&errors(&with_workers_dp(
        2,
        "spread_decrypt = \"auto\"\nspread_late = \"reorder\"",
    )));
    assert!(
        shown.contains("dataplane.spread_late") && shown.contains("send"),
        "{shown}"
    );
}

/// `per_cpu_handoff`: off by default; `true` kept, and warned about
/// without the fan-out; not a boolean: an error naming the key; `espgw
/// check`'s plan says what it does.
#[test]
fn per_cpu_handoff_is_off_by_default_and_needs_the_fan_out() {
    let (config, _) = parse(&base()).unwrap_or_else(|d| panic!("{}", render(&d)));
    assert!(!config.dataplane.per_cpu_handoff);
    for (lines, want, warned) in [
        (
            "spread_decrypt = \"auto\"\nper_cpu_handoff = true",
            true,
            false,
        ),
        (
            "spread_decrypt = \"auto\"\nper_cpu_handoff = false",
            false,
            false,
        ),
        ("per_cpu_handoff = true", true, true),
    ] {
        let (config, was_warned) = parse_warned(lines, "per_cpu_handoff");
        assert_eq!(config.dataplane.per_cpu_handoff, want, "{lines}");
        assert_eq!(was_warned, warned, "{lines}");
        let plan = espgw_control::config::Summary(&config).to_string();
        assert_eq!(
            plan.contains("per_cpu_handoff = true"),
            want && !warned,
            "{lines}: {plan}"
        );
    }
    let shown = render(&errors(&with_workers_dp(
        2,
        "spread_decrypt = \"auto\"\nper_cpu_handoff = \"yes\"",
    )));
    assert!(shown.contains("dataplane.per_cpu_handoff"), "{shown}");
}

/// `espgw check` prints the queue and core plan (issue 15): queues per
/// port, where the workers run, and where one peer's ESP is decrypted, as
/// the runtime will do it for each mode.
#[test]
fn check_prints_the_queue_and_core_plan() {
    let plan = |workers: u32, lines: &str| queue_plan(&with_workers_dp(workers, lines));
    let one = plan(1, "");
    assert!(one.contains("1 worker (not pinned"), "{one}");
    assert!(one.contains("1 RX + 1 TX queues"), "{one}");
    assert!(!one.contains("one peer's ESP"), "{one}");

    let off = plan(2, "");
    assert!(
        off.contains("2 RX + 2 TX queues, one pair per worker"),
        "{off}"
    );
    assert!(off.contains("qpairs=2"), "{off}");
    assert!(
        off.contains("arrives on one queue: the worker polling that queue decrypts all of it"),
        "{off}"
    );

    let auto = plan(2, "spread_decrypt = \"auto\"");
    assert!(
        auto.contains(
            "splits each SA group of 16 or more packets, while it is behind (a receive filled \
             a whole burst), over all 2 workers"
        ),
        "{auto}"
    );
    let always = plan(2, "spread_decrypt = \"always\"");
    assert!(
        always.contains("splits each SA group of 16 or more packets over all 2 workers")
            && always.contains("spread_decrypt = \"always\""),
        "{always}"
    );
    assert!(auto.contains("100 us bound is dropped"), "{auto}");
    let send = plan(2, "spread_decrypt = \"auto\"\nspread_late = \"send\"");
    assert!(send.contains("100 us bound is sent out of order"), "{send}");
    let longer = plan(2, "spread_decrypt = \"auto\"\nspread_wait_us = 400");
    assert!(longer.contains("400 us bound is dropped"), "{longer}");

    let pinned = plan(2, "lcores = \"3,5\"");
    assert!(
        pinned.contains("2 workers (pinned to cores 3,5)"),
        "{pinned}"
    );

    let pipeline = plan(2, "mode = \"pipeline\"\nspread_decrypt = \"auto\"");
    assert!(pipeline.contains("1 I/O lcore"), "{pipeline}");
    assert!(
        pipeline.contains("steers each flow to one of 2 workers"),
        "{pipeline}"
    );
    assert!(!pipeline.contains("splits each"), "{pipeline}");
}

/// `spread_wait_us`: 100 by default, kept when in range (50 to 1000),
/// an error naming the key and the range otherwise; set without the
/// fan-out it is kept but warned about.
#[test]
fn spread_wait_us_defaults_to_100_is_ranged_and_needs_the_fan_out() {
    let (config, _) = parse(&base()).unwrap_or_else(|d| panic!("{}", render(&d)));
    assert_eq!(config.dataplane.spread_wait_us, 100);
    for (lines, want, warned) in [
        (
            "spread_decrypt = \"auto\"\nspread_wait_us = 400",
            400,
            false,
        ),
        ("spread_decrypt = \"auto\"\nspread_wait_us = 50", 50, false),
        (
            "spread_decrypt = \"auto\"\nspread_wait_us = 1000",
            1_000,
            false,
        ),
        ("spread_wait_us = 400", 400, true),
    ] {
        let (config, was_warned) = parse_warned(lines, "spread_wait_us");
        assert_eq!(config.dataplane.spread_wait_us, want, "{lines}");
        assert_eq!(was_warned, warned, "{lines}");
    }
    for bad in ["49", "1001", "\"400\""] {
        let shown = render(&errors(&with_workers_dp(
            2,
            &format!("spread_decrypt = \"auto\"\nspread_wait_us = {bad}"),
        )));
        assert!(shown.contains("dataplane.spread_wait_us"), "{bad}: {shown}");
    }
}

/// `mbufs` fewer than what one receiving worker's fan-out may hold (16
/// job boxes x workers x burst per 100 µs of `spread_wait_us`), with the
/// caches and bursts, is warned about at `dataplane.mbufs`; the sized
/// default holds 2 workers' 1024 and 4096 at 400 µs; without the fan-out
/// 1023 is enough for two workers on virtual devices.
#[test]
fn mbufs_fewer_than_the_fan_out_may_hold_are_warned_about() {
    let warned = |lines: &str| {
        let (_, diags) =
            parse(&with_workers_dp(2, lines)).unwrap_or_else(|d| panic!("{}", render(&d)));
        let shown = render(&diags);
        shown.contains("dataplane.mbufs") && shown.contains("the decrypt fan-out may hold")
    };
    assert!(!warned("spread_decrypt = \"auto\""));
    assert!(!warned("spread_decrypt = \"auto\"\nspread_wait_us = 400"));
    assert!(warned("spread_decrypt = \"auto\"\nmbufs = 1023"));
    // The fan-out's 1024 plus the caches and bursts (since session 19 one
    // warning counts them all).
    assert!(warned("spread_decrypt = \"auto\"\nmbufs = 1024"));
    assert!(!warned("spread_decrypt = \"auto\"\nmbufs = 2047"));
    assert!(warned(
        "spread_decrypt = \"auto\"\nspread_wait_us = 400\nmbufs = 4095"
    ));
    assert!(!warned("mbufs = 1023"));
}

/// With the fan-out, workers on cores the kernel also schedules other
/// tasks on make parts late (docs/multicore.md, "Who makes parts late"):
/// warned about where this host's isolated CPUs are known, at `lcores`
/// naming the shared cores, or at `spread_decrypt` when the workers are
/// not pinned; nothing without the fan-out or where the host is unknown.
#[test]
fn fan_out_workers_on_cores_not_isolated_are_warned_about() {
    let on_host = |lines: &str, isolated: Option<Vec<u32>>| {
        let host = espgw_control::HostFacts {
            isolated_cpus: isolated,
            ..host()
        };
        let text = with_workers_dp(2, lines);
        let (_, diags) = espgw_control::parse_str(std::path::Path::new("test.toml"), text, &host)
            .unwrap_or_else(|d| panic!("{}", render(&d)));
        let shown = render(&diags);
        shown
            .contains("makes that worker's fan-out parts late")
            .then_some(shown)
    };
    let fan_out = "spread_decrypt = \"auto\"";
    // Not pinned.
    let shown = on_host(fan_out, Some(vec![2, 3])).expect("warned");
    assert!(
        shown.contains("dataplane.spread_decrypt") && shown.contains("not pinned"),
        "{shown}"
    );
    // Pinned, one of the two on a shared core.
    let pinned = format!("{fan_out}\nlcores = \"2,4\"");
    let shown = on_host(&pinned, Some(vec![2, 3])).expect("warned");
    assert!(
        shown.contains("dataplane.lcores") && shown.contains("worker cores 4 are not isolated"),
        "{shown}"
    );
    assert!(
        shown.contains("100 us") && shown.contains("isolcpus="),
        "{shown}"
    );
    // Pinned to isolated cores; no fan-out; an unknown host.
    assert_eq!(
        on_host(&format!("{fan_out}\nlcores = \"2-3\""), Some(vec![2, 3])),
        None
    );
    assert_eq!(on_host("lcores = \"2,4\"", Some(vec![2, 3])), None);
    assert_eq!(on_host(&pinned, None), None);
    // No core isolated at all (the file is empty).
    assert!(on_host(&pinned, Some(vec![])).is_some());
}

/// The kernel's CPU list format, as /sys/devices/system/cpu/isolated has it.
#[test]
fn isolated_cpu_lists_parse_as_the_kernel_writes_them() {
    use espgw_control::config::parse_cpu_list;
    assert_eq!(parse_cpu_list("\n"), Some(vec![]));
    assert_eq!(parse_cpu_list("2-3\n"), Some(vec![2, 3]));
    assert_eq!(parse_cpu_list("1,4-6,9\n"), Some(vec![1, 4, 5, 6, 9]));
    assert_eq!(parse_cpu_list("3-1"), None);
    assert_eq!(parse_cpu_list("x"), None);
}

/// `spread_max_round_trip_ns`: 120 by default, 0 (no probe) to 100000,
/// an error naming the key otherwise; warned about where nothing is
/// probed (the fan-out off, or `"always"`); `espgw check` says what
/// `"auto"` does with it.
#[test]
fn spread_max_round_trip_ns_defaults_to_120_is_ranged_and_only_auto_probes() {
    let (config, _) = parse(&base()).unwrap_or_else(|d| panic!("{}", render(&d)));
    assert_eq!(config.dataplane.spread_max_round_trip_ns, 120);
    for (lines, want, warned) in [
        (
            "spread_decrypt = \"auto\"\nspread_max_round_trip_ns = 250",
            250,
            false,
        ),
        (
            "spread_decrypt = \"auto\"\nspread_max_round_trip_ns = 0",
            0,
            false,
        ),
        (
            "spread_decrypt = \"auto\"\nspread_max_round_trip_ns = 100000",
            100_000,
            false,
        ),
        ("spread_max_round_trip_ns = 250", 250, true),
        (
            "spread_decrypt = \"always\"\nspread_max_round_trip_ns = 250",
            250,
            true,
        ),
    ] {
        let (config, was_warned) = parse_warned(lines, "spread_max_round_trip_ns");
        assert_eq!(config.dataplane.spread_max_round_trip_ns, want, "{lines}");
        assert_eq!(was_warned, warned, "{lines}");
    }
    for bad in ["-1", "100001", "\"100\""] {
        let shown = render(&errors(&with_workers_dp(
            2,
            &format!("spread_decrypt = \"auto\"\nspread_max_round_trip_ns = {bad}"),
        )));
        assert!(
            shown.contains("dataplane.spread_max_round_trip_ns"),
            "{bad}: {shown}"
        );
    }
    let plan = |lines: &str| queue_plan(&with_workers_dp(2, lines));
    let auto = plan("spread_decrypt = \"auto\"");
    assert!(
        auto.contains("starts the fan-out off above 120 ns"),
        "{auto}"
    );
    let unchecked = plan("spread_decrypt = \"auto\"\nspread_recheck_ms = 0");
    assert!(
        unchecked.contains("leaves the fan-out off above 120 ns"),
        "{unchecked}"
    );
    let unprobed = plan("spread_decrypt = \"auto\"\nspread_max_round_trip_ns = 0");
    assert!(unprobed.contains("not probed"), "{unprobed}");
    for lines in ["spread_decrypt = \"always\"", ""] {
        let shown = plan(lines);
        assert!(!shown.contains("round trip"), "{lines}: {shown}");
    }
}

/// `spread_recheck_ms`: 2000 by default, 0 (no live check) or 100 to
/// 3600000, an error naming the key otherwise; warned about where nothing
/// is checked (the fan-out off, or `"always"`); `espgw check` says what
/// `"auto"` does with it.
#[test]
fn spread_recheck_ms_defaults_to_2000_is_ranged_and_only_auto_checks() {
    let (config, _) = parse(&base()).unwrap_or_else(|d| panic!("{}", render(&d)));
    assert_eq!(config.dataplane.spread_recheck_ms, 2000);
    for (lines, want, warned) in [
        (
            "spread_decrypt = \"auto\"\nspread_recheck_ms = 500",
            500,
            false,
        ),
        ("spread_decrypt = \"auto\"\nspread_recheck_ms = 0", 0, false),
        (
            "spread_decrypt = \"auto\"\nspread_recheck_ms = 100",
            100,
            false,
        ),
        (
            "spread_decrypt = \"auto\"\nspread_recheck_ms = 3600000",
            3_600_000,
            false,
        ),
        ("spread_recheck_ms = 500", 500, true),
        (
            "spread_decrypt = \"always\"\nspread_recheck_ms = 500",
            500,
            true,
        ),
    ] {
        let (config, was_warned) = parse_warned(lines, "spread_recheck_ms");
        assert_eq!(config.dataplane.spread_recheck_ms, want, "{lines}");
        assert_eq!(was_warned, warned, "{lines}");
    }
    for bad in ["-1", "1", "99", "3600001", "\"2s\""] {
        let shown = render(&errors(&with_workers_dp(
            2,
            &format!("spread_decrypt = \"auto\"\nspread_recheck_ms = {bad}"),
        )));
        assert!(
            shown.contains("dataplane.spread_recheck_ms"),
            "{bad}: {shown}"
        );
    }
    // The whole summary: the plan's line on the check is its seventh.
    let plan = |lines: &str| {
        let (config, _) =
            parse(&with_workers_dp(2, lines)).unwrap_or_else(|d| panic!("{}", render(&d)));
        espgw_control::config::Summary(&config).to_string()
    };
    let auto = plan("spread_decrypt = \"auto\"");
    assert!(auto.contains("checks every 2000 ms"), "{auto}");
    let unchecked = plan("spread_decrypt = \"auto\"\nspread_recheck_ms = 0");
    assert!(
        unchecked.contains("not checked while it runs"),
        "{unchecked}"
    );
    for lines in ["spread_decrypt = \"always\"", ""] {
        let shown = plan(lines);
        assert!(!shown.contains("spread_recheck_ms"), "{lines}: {shown}");
    }
}

/// `lcores` against the process's affinity mask (`taskset`, systemd's
/// `CPUAffinity=`) where it is known: a core outside it is warned about,
/// whatever the count of CPUs says; without the mask, against the count.
#[test]
fn lcores_outside_the_affinity_mask_are_warned_about() {
    let on_host = |lines: &str, allowed: Option<Vec<u32>>, cpus: usize| {
        let host = espgw_control::HostFacts {
            allowed_cpus: allowed,
            ..espgw_control::HostFacts::assumed(cpus)
        };
        let text = with_workers_dp(2, lines);
        let (_, diags) = espgw_control::parse_str(std::path::Path::new("test.toml"), text, &host)
            .unwrap_or_else(|d| panic!("{}", render(&d)));
        let shown = render(&diags);
        shown.contains("dataplane.lcores").then_some(shown)
    };
    // taskset -c 2,3: cores 2 and 3 fine (core 3 beyond the count of 2).
    assert_eq!(on_host("lcores = \"2-3\"", Some(vec![2, 3]), 2), None);
    let shown = on_host("lcores = \"0,3\"", Some(vec![2, 3]), 2).expect("warned");
    assert!(
        shown.contains("core 0 is outside the CPUs this process may run on (2-3"),
        "{shown}"
    );
    let shown = on_host("lcores = \"0-1\"", Some(vec![2, 3]), 2).expect("warned");
    assert!(shown.contains("cores 0, 1 are outside"), "{shown}");
    // The mask unknown: the count decides, as before.
    let shown = on_host("lcores = \"2-3\"", None, 2).expect("warned");
    assert!(
        shown.contains("core 3 does not exist on this machine (2 cores)"),
        "{shown}"
    );
}

/// The affinity mask as the process has it, and the kernel's list format
/// back.
#[test]
fn affinity_masks_read_and_write_as_cpu_lists() {
    use espgw_control::config::{format_cpu_list, parse_cpu_list, process_cpus};
    assert_eq!(format_cpu_list(&[8, 2, 3, 3]), "2-3,8");
    assert_eq!(format_cpu_list(&[]), "");
    let mine = process_cpus();
    assert!(!mine.is_empty());
    assert!(mine.windows(2).all(|w| w[0] < w[1]), "{mine:?}");
    // What /proc says of this process is the same mask.
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    if let Some(list) = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
    {
        assert_eq!(parse_cpu_list(list), Some(mine.clone()));
        assert_eq!(format_cpu_list(&mine), list.trim());
    }
}

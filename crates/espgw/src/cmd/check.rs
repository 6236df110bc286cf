//! `espgw check --config FILE`: report every problem, or summarize.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use espgw_control::config::Summary;

use super::{print_diagnostics, EXIT_INVALID};

pub fn run(config: &Path, probe_cores: bool) -> ExitCode {
    match espgw_control::load(config) {
        Ok((config, warnings)) => {
            print_diagnostics(&warnings);
            // This machine against the config (PCI ports' drivers,
            // hugepages): warnings, since the config may be meant for
            // another machine.
            for w in crate::host::check_warnings(&config, &crate::host::Host::new("/")) {
                eprintln!("{w}");
            }
            // Through `write!`, not `print!`: a reader that stops early
            // (`espgw check ... | head`) is not a reason to panic.
            let _ = write!(std::io::stdout(), "{}", Summary(&config));
            // Which code each suite's ESP runs on this machine, at the
            // config's vector width.
            config.dataplane.apply_simd_width();
            let mut out = std::io::stdout().lock();
            if let Some(note) = espgw_esp::crypto::provider::simd_width_note() {
                let _ = writeln!(out, "{note}");
            }
            for suite in espgw_esp::Suite::ALL {
                let described = espgw_esp::crypto::provider::describe(suite);
                let _ = writeln!(out, "cipher {suite}: {described}");
            }
            if probe_cores {
                let _ = writeln!(out, "{}", probe_report(&config.dataplane));
            }
            ExitCode::SUCCESS
        }
        Err(diags) => {
            print_diagnostics(&diags);
            ExitCode::from(EXIT_INVALID)
        }
    }
}

/// `--probe-cores`: the round trips between the workers' CPUs on this
/// machine, pair by pair, and what `spread_decrypt = "auto"` makes of them
/// (whatever `spread_decrypt` says: the operator asks before turning it on).
fn probe_report(dp: &espgw_control::config::Dataplane) -> String {
    use espgw_dataplane::core_probe::{self, FanOutGate};
    let limit = if dp.spread_max_round_trip_ns == 0 {
        espgw_control::config::DEFAULT_SPREAD_MAX_ROUND_TRIP_NS
    } else {
        dp.spread_max_round_trip_ns
    };
    let gate = core_probe::probe_workers(dp, limit);
    let mut text = String::new();
    if let FanOutGate::Probed { pairs, .. } = &gate {
        for p in pairs {
            let ns = p.ns.map_or(
                format!(
                    "no answer within {} ms",
                    core_probe::ROUND_LIMIT.as_millis()
                ),
                |v| format!("{v:.1} ns"),
            );
            text.push_str(&format!("cores {} <-> {}: round trip {ns}\n", p.a, p.b));
        }
    }
    if dp.spread_max_round_trip_ns == 0 {
        text.push_str(&format!(
            "spread_max_round_trip_ns = 0: `espgw run` does not probe and spread_decrypt = \"auto\" \
             runs the fan-out; against the default limit: {}",
            gate.describe()
        ));
    } else {
        text.push_str(&format!(
            "with spread_decrypt = \"auto\" on this machine: {}",
            gate.describe()
        ));
    }
    text
}

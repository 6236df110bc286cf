//! The log lines of the decrypt fan-out's live check
//! ([`crate::spread_trial`]): the main lcore reads each worker's published
//! counters now and then and says when a worker's fan-out went off or
//! came back on, with the rates that decided it. Workers do not log (their
//! loop has no time for it); a trial that confirms the state in effect is
//! not logged either (the counters and metrics keep every trial).

use std::sync::{Arc, Mutex};

use crate::counters::WorkerCounters;

/// What the log last said of each worker.
pub(super) struct TrialLog {
    /// Per worker: trials seen so far and whether the fan-out was off.
    seen: Vec<(u64, bool)>,
}

impl TrialLog {
    /// For `workers` workers whose fan-out starts off (`starts_off`: the
    /// start-up probe was over its limit) or on.
    pub(super) fn new(workers: usize, starts_off: bool) -> TrialLog {
        TrialLog {
            seen: vec![(0, starts_off); workers],
        }
    }

    /// Logs each worker whose fan-out turned off or on since the last
    /// call.
    pub(super) fn poll(&mut self, lives: &[Arc<Mutex<WorkerCounters>>]) {
        for (k, live) in lives.iter().enumerate().take(self.seen.len()) {
            let Ok(c) = live
                .lock()
                .map(|c| (c.spread_trials, c.spread_trial_pps, c.spread_off))
            else {
                continue;
            };
            if let Some(line) = self.change(k, c.0, c.1, c.2 != 0) {
                tracing::info!(worker = k, "{line}");
            }
        }
    }

    /// The line for worker `k`'s counts, when they say its fan-out changed.
    /// (Only an `off` verdict turns it off and only an `on` verdict back
    /// on: the others leave the decision in effect, so the last rates are
    /// the ones that decided.)
    fn change(&mut self, k: usize, trials: [u64; 4], pps: [u64; 2], off: bool) -> Option<String> {
        let total: u64 = trials.iter().sum();
        let (seen, was_off) = self.seen[k];
        if total == seen {
            return None;
        }
        self.seen[k] = (total, off);
        if off == was_off {
            return None;
        }
        let mpps = |p: u64| p as f64 / 1e6;
        Some(if off {
            format!(
                "spread_decrypt \"auto\": the fan-out delivered {:.2} Mpps against {:.2} alone: \
                 off for this worker until its next check (spread_recheck_ms)",
                mpps(pps[0]),
                mpps(pps[1])
            )
        } else {
            format!(
                "spread_decrypt \"auto\": the fan-out delivered {:.2} Mpps against {:.2} alone: \
                 on again for this worker",
                mpps(pps[0]),
                mpps(pps[1])
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_changes_are_logged() {
        let mut log = TrialLog::new(2, false);
        // Nothing yet, then a trial that keeps it on: no line.
        assert_eq!(log.change(0, [0; 4], [0; 2], false), None);
        assert_eq!(
            log.change(0, [1, 0, 0, 0], [3_000_000, 2_000_000], false),
            None
        );
        // Off: one line, with the rates.
        let off = log
            .change(0, [1, 1, 0, 0], [1_500_000, 2_600_000], true)
            .unwrap();
        assert!(off.contains("1.50 Mpps against 2.60 alone: off"), "{off}");
        // Off again: nothing new; the other worker is apart.
        assert_eq!(
            log.change(0, [1, 2, 0, 0], [1_400_000, 2_600_000], true),
            None
        );
        assert!(log.change(1, [0, 1, 0, 0], [1, 2], true).is_some());
        // Back on.
        let on = log
            .change(0, [2, 2, 0, 0], [3_100_000, 2_600_000], false)
            .unwrap();
        assert!(on.contains("on again"), "{on}");
    }

    /// A fan-out that starts off (the probe over its limit): its first
    /// trial turning it on is logged; one that keeps it off is not.
    #[test]
    fn a_fan_out_that_starts_off_is_logged_when_a_trial_turns_it_on() {
        let mut log = TrialLog::new(1, true);
        assert_eq!(log.change(0, [0, 0, 1, 0], [30_000, 30_000], true), None);
        assert_eq!(log.change(0, [0, 1, 1, 0], [1, 2], true), None);
        let on = log
            .change(0, [1, 1, 1, 0], [12_000_000, 10_000_000], false)
            .unwrap();
        assert!(
            on.contains("12.00 Mpps against 10.00 alone: on again"),
            "{on}"
        );
    }
}

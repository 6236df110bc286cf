//! The decrypt fan-out's live check (`spread_decrypt = "auto"` with
//! `[dataplane] spread_recheck_ms`): does handing parts to other workers
//! make this owner deliver more, now, on these cores?
//!
//! The start-up probe ([`crate::core_probe`]) reads the cores' round trip
//! once; what it cannot see is what changes while the gateway runs (a
//! hypervisor that moves the vCPUs apart: on the 2-vCPU Zen 5 guest the
//! same fan-out ran 1.2x one worker with them close and 0.57x with them
//! apart, and the host moved them every few minutes), other work on the
//! helpers' cores, or a fan-out that loses although the round trip is
//! short (session 20's first round, 0.43 / 0.51). So an owner that needs
//! help measures both ways in turn, while it needs the help: six windows
//! of [`WINDOW_NS`], alternately with the fan-out and alone (in the order
//! [`PATTERN`], which a load that rises or falls steadily over the trial
//! affects equally), and counts in each the packets it received: a
//! saturated owner receives as fast as it gets through its polls. Every
//! packet its reorder stages dropped as late in the counted part of any
//! window is charged to the windows with the fan-out, whichever window it
//! was dropped in (only the fan-out makes late parts, and a part handed
//! out in one window may come back late in the next). The fan-out stays on for the
//! next [`SpreadTrial::new`]'s `recheck_ns` when it delivered at least
//! [`ON_AT_LEAST`] of what the owner delivered alone (a margin for the
//! noise of a shared machine, on the side of the fan-out: off is the
//! change that needs the clear case), and off otherwise; then the next
//! trial. Two trials say nothing about the fan-out's rate and leave the
//! decision in effect: one in which the owner kept up alone (fewer than
//! half its polls in the windows without the fan-out filled a burst; the
//! per-poll gate, `SpreadWhen::Behind`, keeps it unused then anyway), and
//! one whose windows with the fan-out handed nothing out (every other
//! worker busy with its own traffic: both ways were the same).
//!
//! Time is the owner's loop time with gaps over [`MAX_GAP_NS`] left out
//! (a loop that was not polled, as `espgw bench` pauses a layer between
//! its slices), so that windows are time the owner ran. A scheduler's
//! slice given to another thread on the same core (milliseconds) counts:
//! that is a cost the fan-out may cause.
//!
//! The cost, estimated from the trial's timing (not measured: below the
//! run-to-run spread of the machine it was built on): half of a trial's
//! time on the worse way, i.e. with the default recheck of 2 s, 30 ms of
//! it in 2 s: 0.75 % of the owner's rate where the fan-out halves it,
//! 1.5 % at most (where the worse way delivers nothing); and nothing per
//! packet (one call per poll).

/// One window of a trial, in loop time.
pub const WINDOW_NS: u64 = 10_000_000;
/// The start of each window that is not counted: parts handed out in the
/// window before come back and their packets are released (the other
/// way's work).
pub const SETTLE_NS: u64 = 1_000_000;
/// A gap between two polls longer than this is not loop time (the loop
/// was not run); shorter ones, a scheduler's slices included, are.
pub const MAX_GAP_NS: u64 = 50_000_000;
/// The fan-out stays (or goes back) on when its windows delivered at
/// least this share of what the windows without it did.
pub const ON_AT_LEAST: f64 = 0.97;

/// How an owner decrypts the groups it would spread (its value indexes a
/// trial's tallies).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arm {
    /// With the fan-out (the per-poll gate still applies).
    Spread = 0,
    /// Alone, as without the fan-out.
    Solo = 1,
}

/// The order of a trial's windows: each way first, middle and last
/// equally (ABBAAB), so that a steady drift in the load weighs on both.
pub const PATTERN: [Arm; 6] = [
    Arm::Solo,
    Arm::Spread,
    Arm::Spread,
    Arm::Solo,
    Arm::Solo,
    Arm::Spread,
];

/// What a trial decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrialVerdict {
    /// The fan-out delivered as much (at least [`ON_AT_LEAST`]): on.
    On,
    /// It delivered less: off until the next trial.
    Off,
    /// Alone, the owner kept up (its receives mostly did not fill a
    /// burst): no rate to compare; the decision in effect stays.
    KeepingUp,
    /// The windows with the fan-out handed nothing out (no other worker
    /// was free): no rate to compare; the decision in effect stays.
    NoHelper,
}

impl TrialVerdict {
    /// Every verdict, in the order of [`Self::index`].
    pub const ALL: [TrialVerdict; 4] = [
        TrialVerdict::On,
        TrialVerdict::Off,
        TrialVerdict::KeepingUp,
        TrialVerdict::NoHelper,
    ];

    /// Index of the verdict in counters kept per verdict.
    pub fn index(self) -> usize {
        self as usize
    }

    /// The verdict as the stats JSON, the log and the metrics name it.
    pub fn name(self) -> &'static str {
        espgw_control::live::SPREAD_TRIAL_VERDICTS[self.index()]
    }
}

/// A finished trial: its verdict and the rates it compared.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TrialOutcome {
    pub verdict: TrialVerdict,
    /// Packets delivered per second of loop time, with the fan-out (its
    /// late drops taken off) and without.
    pub with_pps: f64,
    pub without_pps: f64,
}

/// What the owner has counted so far (totals since it started).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Progress {
    /// Packets received.
    pub rx: u64,
    /// Packets its reorder stages dropped as late.
    pub late: u64,
    /// Packets it handed to other workers (the fan-out's `spread_out`,
    /// which may go down: a part taken back is un-counted).
    pub spread: u64,
    /// Packets of groups it wanted help with (spread, kept for want of a
    /// free helper, or decrypted alone because a trial turned the fan-out
    /// off): no trial starts unless this grew since the last one, so a
    /// worker busy with other traffic never runs one.
    pub eligible: u64,
}

#[derive(Debug, Clone, Copy, Default)]
struct Tally {
    rx: u64,
    ns: u64,
    polls: u64,
    full: u64,
    spread: u64,
}

/// `packets` per second of `ns`.
fn pps(packets: u64, ns: u64) -> f64 {
    if ns == 0 {
        0.0
    } else {
        packets as f64 * 1e9 / ns as f64
    }
}

#[derive(Debug)]
enum Phase {
    /// The decision in effect until `until` (loop time); the next trial
    /// waits for a poll that needs help after that.
    Hold { until: u64, eligible: u64 },
    Trial {
        /// Late drops counted in the windows so far, whichever way each
        /// ran: all the fan-out's.
        late: u64,
        window: usize,
        /// Loop time the window started.
        start: u64,
        /// After the settling time: what was counted and the loop time
        /// when counting started.
        base: Option<(Progress, u64)>,
        polls: u64,
        full: u64,
        tally: [Tally; 2],
    },
}

/// One owner's live check of its fan-out (see the module).
#[derive(Debug)]
pub struct SpreadTrial {
    recheck_ns: u64,
    /// The last trial's decision (before the first: on, or off for
    /// [`SpreadTrial::starting_off`]).
    allowed: bool,
    phase: Phase,
    last_ns: Option<u64>,
    /// Loop time so far.
    active_ns: u64,
}

impl SpreadTrial {
    /// A check that runs a trial as soon as the owner needs help, and
    /// again `recheck_ns` of loop time after each.
    pub fn new(recheck_ns: u64) -> SpreadTrial {
        SpreadTrial {
            recheck_ns,
            allowed: true,
            phase: Phase::Hold {
                until: 0,
                eligible: 0,
            },
            last_ns: None,
            active_ns: 0,
        }
    }

    /// The same check with the fan-out off until a trial finds it
    /// delivers more (the start-up probe found the cores' round trip over
    /// its limit).
    pub fn starting_off(mut self) -> SpreadTrial {
        self.allowed = false;
        self
    }

    /// Whether the owner may hand out parts now: the way of the current
    /// window during a trial, the last trial's decision otherwise.
    #[inline]
    pub fn allows(&self) -> bool {
        match &self.phase {
            Phase::Trial { window, .. } => PATTERN[*window] == Arm::Spread,
            Phase::Hold { .. } => self.allowed,
        }
    }

    /// The last trial's decision (before the first: true, or false for
    /// [`SpreadTrial::starting_off`]), whatever the window of a running
    /// trial.
    pub fn decided_on(&self) -> bool {
        self.allowed
    }

    /// Whether a trial is running.
    pub fn in_trial(&self) -> bool {
        matches!(self.phase, Phase::Trial { .. })
    }

    /// Once per poll, after its work: the loop clock, the owner's counts
    /// and whether a receive of this poll filled a burst. Returns the
    /// outcome when this poll ended a trial.
    pub fn observe(&mut self, now_ns: u64, p: Progress, full: bool) -> Option<TrialOutcome> {
        let dt = match self.last_ns {
            Some(last) if now_ns >= last && now_ns - last <= MAX_GAP_NS => now_ns - last,
            _ => 0,
        };
        self.last_ns = Some(now_ns);
        self.active_ns += dt;
        let active = self.active_ns;
        match &mut self.phase {
            Phase::Hold { until, eligible } => {
                if active >= *until && full && p.eligible > *eligible {
                    self.phase = Phase::Trial {
                        late: 0,
                        window: 0,
                        start: active,
                        base: None,
                        polls: 0,
                        full: 0,
                        tally: [Tally::default(); 2],
                    };
                }
                None
            }
            Phase::Trial {
                late,
                window,
                start,
                base,
                polls,
                full: fulls,
                tally,
            } => {
                let elapsed = active - *start;
                let Some((b, b_ns)) = *base else {
                    if elapsed >= SETTLE_NS {
                        *base = Some((p, active));
                        *polls = 0;
                        *fulls = 0;
                    }
                    return None;
                };
                *polls += 1;
                *fulls += u64::from(full);
                if elapsed < WINDOW_NS {
                    return None;
                }
                let t = &mut tally[PATTERN[*window] as usize];
                t.rx += p.rx.saturating_sub(b.rx);
                *late += p.late.saturating_sub(b.late);
                t.spread += p.spread.saturating_sub(b.spread);
                t.ns += active - b_ns;
                t.polls += *polls;
                t.full += *fulls;
                *window += 1;
                if *window < PATTERN.len() {
                    *start = active;
                    *base = None;
                    return None;
                }
                let outcome = judge(
                    &tally[Arm::Spread as usize],
                    &tally[Arm::Solo as usize],
                    *late,
                );
                match outcome.verdict {
                    TrialVerdict::On => self.allowed = true,
                    TrialVerdict::Off => self.allowed = false,
                    TrialVerdict::KeepingUp | TrialVerdict::NoHelper => {}
                }
                self.phase = Phase::Hold {
                    until: active.saturating_add(self.recheck_ns),
                    eligible: p.eligible,
                };
                Some(outcome)
            }
        }
    }
}

/// A finished trial's verdict from its windows with the fan-out (`with`)
/// and without, and the late drops counted in all of them (the
/// fan-out's).
fn judge(with: &Tally, without: &Tally, late: u64) -> TrialOutcome {
    let with_pps = pps(with.rx.saturating_sub(late), with.ns);
    let without_pps = pps(without.rx, without.ns);
    let verdict = if without.full * 2 < without.polls {
        TrialVerdict::KeepingUp
    } else if with.spread == 0 {
        TrialVerdict::NoHelper
    } else if with_pps >= ON_AT_LEAST * without_pps {
        TrialVerdict::On
    } else {
        TrialVerdict::Off
    };
    TrialOutcome {
        verdict,
        with_pps,
        without_pps,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An owner polled every `poll_ns`, receiving `rate(arm)` packets
    /// per second of the way the check allows, `late_share(arm)` of as
    /// many dropped late in that poll, every poll full unless `full` says
    /// not; with the fan-out allowed it hands out what it receives unless
    /// `no_helper`.
    struct Model {
        now: u64,
        p: Progress,
        poll_ns: u64,
        no_helper: bool,
    }

    impl Model {
        fn new() -> Model {
            Model {
                now: 0,
                p: Progress::default(),
                poll_ns: 10_000,
                no_helper: false,
            }
        }

        /// Polls until a trial ends (at most `limit_ns`).
        fn run(
            &mut self,
            t: &mut SpreadTrial,
            limit_ns: u64,
            rate: impl Fn(Arm) -> f64,
            late_share: impl Fn(Arm) -> f64,
            full: impl Fn(Arm) -> bool,
        ) -> Option<TrialOutcome> {
            let end = self.now + limit_ns;
            while self.now < end {
                let arm = if t.allows() { Arm::Spread } else { Arm::Solo };
                self.now += self.poll_ns;
                let got = (rate(arm) * self.poll_ns as f64 / 1e9).round() as u64;
                self.p.rx += got;
                self.p.late += (got as f64 * late_share(arm)).round() as u64;
                self.p.eligible += got;
                if arm == Arm::Spread && !self.no_helper {
                    self.p.spread += got;
                }
                if let Some(o) = t.observe(self.now, self.p, full(arm)) {
                    return Some(o);
                }
            }
            None
        }
    }

    fn rates(with: f64, without: f64) -> impl Fn(Arm) -> f64 {
        move |a| match a {
            Arm::Spread => with,
            Arm::Solo => without,
        }
    }

    #[test]
    fn a_faster_fan_out_stays_on_a_slower_one_goes_off() {
        let mut t = SpreadTrial::new(2_000_000_000);
        let mut m = Model::new();
        assert!(t.allows(), "on before any trial");
        let o = m
            .run(
                &mut t,
                1_000_000_000,
                rates(3.2e6, 2.6e6),
                |_| 0.0,
                |_| true,
            )
            .expect("a trial ends within its six windows");
        assert_eq!(o.verdict, TrialVerdict::On);
        assert!((o.with_pps / 3.2e6 - 1.0).abs() < 0.01, "{o:?}");
        assert!((o.without_pps / 2.6e6 - 1.0).abs() < 0.01, "{o:?}");
        assert!(t.allows() && !t.in_trial());

        // The placement changes: the fan-out now delivers 0.57x.
        let mut t = SpreadTrial::new(2_000_000_000);
        let o = m
            .run(
                &mut t,
                1_000_000_000,
                rates(1.5e6, 2.6e6),
                |_| 0.0,
                |_| true,
            )
            .unwrap();
        assert_eq!(o.verdict, TrialVerdict::Off);
        assert!(!t.allows(), "off after a losing trial");
    }

    #[test]
    fn late_drops_count_against_the_fan_out() {
        // It takes in more but a third comes back late: 3.0 x 2/3 = 2.0 <
        // 2.6 delivered alone.
        let mut t = SpreadTrial::new(1_000_000_000);
        let mut m = Model::new();
        let late = |a| if a == Arm::Spread { 1.0 / 3.0 } else { 0.0 };
        let o = m
            .run(&mut t, 1_000_000_000, rates(3.0e6, 2.6e6), late, |_| true)
            .unwrap();
        assert_eq!(o.verdict, TrialVerdict::Off);
        assert!((o.with_pps / 2.0e6 - 1.0).abs() < 0.01, "{o:?}");
        // The same drops counted while the windows without the fan-out run
        // (parts handed out before, back late after the switch): still the
        // fan-out's. Equal rates, a fifth of the solo windows' worth late.
        let mut t = SpreadTrial::new(1_000_000_000);
        let late = |a| if a == Arm::Solo { 0.2 } else { 0.0 };
        let o = m
            .run(&mut t, 1_000_000_000, rates(2.6e6, 2.6e6), late, |_| true)
            .unwrap();
        assert_eq!(o.verdict, TrialVerdict::Off, "{o:?}");
        assert!((o.without_pps / 2.6e6 - 1.0).abs() < 0.01, "{o:?}");
    }

    #[test]
    fn a_margin_keeps_the_fan_out_on_when_the_ways_are_level() {
        for (with, verdict) in [
            (2.55e6, TrialVerdict::On),
            (2.6e6, TrialVerdict::On),
            (2.45e6, TrialVerdict::Off),
        ] {
            let mut t = SpreadTrial::new(1_000_000_000);
            let mut m = Model::new();
            let o = m
                .run(&mut t, 1_000_000_000, rates(with, 2.6e6), |_| 0.0, |_| true)
                .unwrap();
            assert_eq!(o.verdict, verdict, "{o:?}");
        }
    }

    #[test]
    fn a_trial_that_handed_nothing_out_keeps_the_decision() {
        let mut t = SpreadTrial::new(100_000_000);
        let mut m = Model::new();
        let o = m
            .run(
                &mut t,
                1_000_000_000,
                rates(1.0e6, 2.6e6),
                |_| 0.0,
                |_| true,
            )
            .unwrap();
        assert_eq!(o.verdict, TrialVerdict::Off);
        // Every helper busy: both ways the same, and no verdict on them.
        m.no_helper = true;
        let o = m
            .run(
                &mut t,
                1_000_000_000,
                rates(2.6e6, 2.6e6),
                |_| 0.0,
                |_| true,
            )
            .unwrap();
        assert_eq!(o.verdict, TrialVerdict::NoHelper);
        assert!(!t.allows() && !t.decided_on(), "still off");
    }

    #[test]
    fn a_trial_takes_six_windows_in_the_pattern_and_then_holds() {
        let mut t = SpreadTrial::new(500_000_000);
        let mut m = Model::new();
        let mut seen = Vec::new();
        let mut arm_log = |t: &SpreadTrial| {
            let a = if t.allows() { Arm::Spread } else { Arm::Solo };
            if t.in_trial() && seen.last() != Some(&a) {
                seen.push(a);
            }
        };
        let start = m.now;
        let mut ended = None;
        while ended.is_none() {
            arm_log(&t);
            ended = m.run(&mut t, m.poll_ns, |_| 1e6, |_| 0.0, |_| true);
        }
        // Runs of the same way merge: S, FF, SS, F.
        assert_eq!(seen, vec![Arm::Solo, Arm::Spread, Arm::Solo, Arm::Spread]);
        let took = m.now - start;
        assert!(
            (6 * WINDOW_NS..6 * WINDOW_NS + 7 * m.poll_ns).contains(&took),
            "{took}"
        );
        // Equal rates: the fan-out stays on (ties do not turn it off).
        assert_eq!(ended.unwrap().verdict, TrialVerdict::On);
        // No new trial before the recheck time, then one at once.
        assert!(m
            .run(&mut t, 499_000_000, rates(1.0, 2.0e6), |_| 0.0, |_| true)
            .is_none());
        assert!(t.allows());
        let o = m
            .run(&mut t, 200_000_000, rates(1.0e6, 2.0e6), |_| 0.0, |_| true)
            .unwrap();
        assert_eq!(o.verdict, TrialVerdict::Off);
        assert!(
            m.now - start < 6 * WINDOW_NS + 500_000_000 + 6 * WINDOW_NS + 20 * m.poll_ns,
            "the second trial starts as the hold ends"
        );
    }

    #[test]
    fn an_owner_keeping_up_alone_keeps_the_fan_out() {
        let mut t = SpreadTrial::new(1_000_000_000);
        let mut m = Model::new();
        // First poll full (a trial starts), then alone it keeps up.
        t.observe(
            1,
            Progress {
                rx: 32,
                eligible: 32,
                ..Progress::default()
            },
            true,
        );
        let o = m
            .run(
                &mut t,
                1_000_000_000,
                rates(1.0e6, 0.5e6),
                |_| 0.0,
                |a| a == Arm::Spread,
            )
            .unwrap();
        assert_eq!(o.verdict, TrialVerdict::KeepingUp);
        assert!(t.allows());
        // After an off verdict, keeping up leaves it off.
        let mut t = SpreadTrial::new(1_000_000_000);
        let o = m
            .run(
                &mut t,
                1_000_000_000,
                rates(1.0e6, 2.0e6),
                |_| 0.0,
                |_| true,
            )
            .unwrap();
        assert_eq!(o.verdict, TrialVerdict::Off);
        // The hold passes (never behind: no trial), then one full poll.
        let light = rates(1.0e6, 0.5e6);
        assert!(m
            .run(&mut t, 1_100_000_000, &light, |_| 0.0, |_| false)
            .is_none());
        m.now += m.poll_ns;
        m.p.eligible += 32;
        t.observe(m.now, m.p, true);
        assert!(t.in_trial());
        let o = m
            .run(&mut t, 1_000_000_000, &light, |_| 0.0, |a| a == Arm::Spread)
            .unwrap();
        assert_eq!(o.verdict, TrialVerdict::KeepingUp);
        assert!(!t.decided_on());
    }

    #[test]
    fn no_trial_without_a_full_poll_or_without_groups_to_spread() {
        let mut t = SpreadTrial::new(1_000_000_000);
        let mut now = 0;
        let mut p = Progress::default();
        for _ in 0..100_000 {
            now += 10_000;
            p.rx += 32;
            // Busy (full receives) but with nothing to spread: another
            // worker's encrypt traffic, say.
            assert!(t.observe(now, p, true).is_none());
            assert!(!t.in_trial());
        }
        for _ in 0..100_000 {
            now += 10_000;
            p.rx += 8;
            p.eligible += 8;
            // Groups to spread, never behind.
            t.observe(now, p, false);
            assert!(!t.in_trial());
        }
        p.eligible += 32;
        t.observe(now + 10_000, p, true);
        assert!(t.in_trial());
    }

    #[test]
    fn the_trial_is_what_the_config_says() {
        assert_eq!(
            WINDOW_NS * PATTERN.len() as u64,
            u64::from(espgw_control::config::SPREAD_TRIAL_MS) * 1_000_000
        );
    }

    #[test]
    fn long_gaps_are_not_loop_time() {
        let mut t = SpreadTrial::new(1_000_000_000);
        let mut p = Progress {
            rx: 32,
            eligible: 32,
            ..Progress::default()
        };
        t.observe(0, p, true);
        assert!(t.in_trial());
        // The loop stops for a second (a bench layer's pause): the first
        // window has not even settled.
        t.observe(1_000_000_000, p, true);
        p.rx += 32;
        t.observe(1_000_010_000, p, true);
        assert!(
            t.in_trial() && !t.allows(),
            "still in the first (solo) window"
        );
        // A clock that goes back is no time either.
        t.observe(5, p, true);
        assert!(!t.allows());
    }
}

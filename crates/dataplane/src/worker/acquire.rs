//! Acquires (IKE `start_action = "trap"`): a packet that needs a trapped
//! tunnel (its policy is installed, no CHILD_SA negotiated yet) is dropped,
//! counted `acquire`, and asks the IKE thread for SAs through the acquire
//! ring (`espgw_control::ike::PuntRings::raise_acquire`), at most once per
//! tunnel and [`ACQUIRE_INTERVAL_NS`] from each worker.
//!
//! Why a limit per worker at all: every packet of the flow finds the trap
//! until the CHILD_SA is up (two round trips at least, seconds when the
//! peer is slow or away), and a line-rate flow would otherwise fill the
//! ring with copies of one request and cost an atomic per packet. Why not
//! longer: an acquire can be lost (ring full, the driver's own 1 s
//! interval, a peer that did not answer), and the next one should follow
//! soon; the driver ignores those that arrive while the IKE SA is being set
//! up, so a few per second per worker cost the control thread nothing.

/// The shortest time between two acquires of one tunnel from one worker.
pub(super) const ACQUIRE_INTERVAL_NS: u64 = 200_000_000;

/// Slots of the limiter: tunnels hash into them by id. Two trapped tunnels
/// in one slot take it from each other, which lets more acquires through,
/// never fewer (the driver dedups).
const SLOTS: usize = 64;

/// The per-worker rate limit: a fixed table, no allocation per packet.
pub(super) struct AcquireLimiter {
    /// Per slot: the tunnel and when its last acquire was raised (ns).
    slots: [Option<(u32, u64)>; SLOTS],
}

impl AcquireLimiter {
    pub(super) fn new() -> Self {
        AcquireLimiter {
            slots: [None; SLOTS],
        }
    }

    /// True when an acquire for `tunnel` may be raised at `now_ns` (and
    /// then it is taken as raised).
    #[inline]
    pub(super) fn allow(&mut self, tunnel: u32, now_ns: u64) -> bool {
        let slot = &mut self.slots[tunnel as usize % SLOTS];
        match *slot {
            Some((t, last)) if t == tunnel && now_ns.saturating_sub(last) < ACQUIRE_INTERVAL_NS => {
                false
            }
            _ => {
                *slot = Some((tunnel, now_ns));
                true
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_acquire_per_tunnel_and_interval() {
        let mut l = AcquireLimiter::new();
        let t0 = 5_000_000_000;
        assert!(l.allow(3, t0));
        // The same tunnel within the interval: suppressed, however often.
        for dt in [0, 1, ACQUIRE_INTERVAL_NS / 2, ACQUIRE_INTERVAL_NS - 1] {
            assert!(!l.allow(3, t0 + dt), "{dt}");
        }
        // Another tunnel has its own budget.
        assert!(l.allow(4, t0 + 1));
        assert!(!l.allow(4, t0 + 2));
        // The interval over: one more, then suppressed again.
        assert!(l.allow(3, t0 + ACQUIRE_INTERVAL_NS));
        assert!(!l.allow(3, t0 + ACQUIRE_INTERVAL_NS + 1));
        // The first packet of the run (clock at 0) raises one too.
        let mut l = AcquireLimiter::new();
        assert!(l.allow(0, 0));
        assert!(!l.allow(0, 0));
    }

    #[test]
    fn tunnels_sharing_a_slot_never_suppress_each_other() {
        let mut l = AcquireLimiter::new();
        let (a, b) = (1, 1 + SLOTS as u32);
        assert!(l.allow(a, 100));
        assert!(l.allow(b, 101));
        // b took the slot: a raises again (more acquires, never fewer).
        assert!(l.allow(a, 102));
        assert!(!l.allow(a, 103));
    }

    /// Raised per tunnel over a second of packets every 1 ms: the interval
    /// is the bound.
    #[test]
    fn a_flood_raises_at_most_once_per_interval() {
        let mut l = AcquireLimiter::new();
        let raised = (0..1000u64).filter(|ms| l.allow(7, ms * 1_000_000)).count() as u64;
        assert_eq!(raised, 1_000_000_000 / ACQUIRE_INTERVAL_NS);
    }
}

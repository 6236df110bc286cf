//! Per-SA reorder stage for the one-tunnel decrypt fan-out
//! (docs/multicore.md): the worker that receives a tunnel's ESP gives each
//! packet an order ticket, hands bursts to other workers to decrypt, and
//! puts the results back in ticket order here before they leave.
//!
//! Keyed by the ticket (the arrival index at the receiving worker), not by
//! the ESP sequence number:
//! - the order to keep is the arrival order, which is not the sequence
//!   order when the peer itself sends one SA from several cores;
//! - tickets are dense: every ticketed packet comes back, decrypted or as
//!   a drop (ICV failure, replay), so a packet lost on the wire leaves no
//!   hole to wait for; only a slow or stuck worker does;
//! - a ticket is ours, so a forged or replayed packet cannot steer the
//!   stage (a sequence number far ahead would make a sequence-keyed stage
//!   skip or wait); it fails its ICV on the worker and comes back as a
//!   drop that fills its slot;
//! - dense keys index a fixed ring: no search, no allocation.
//!
//! Bounds, so that nothing stalls the SA: a ticket not back `max_wait`
//! after it was issued (in the caller's clock, `now`) is given up when it
//! reaches the head (`timed_out`); when every slot is taken, issuing a
//! ticket gives up the oldest outstanding one (`overrun`) so the ring
//! bounds the wait in packets too. A result that comes back after its
//! ticket was given up, twice, or for a ticket never issued is handed
//! back to the caller to free, and counted.
//!
//! Single-owner (`&mut self`): the ordering point is one worker; the
//! decrypting workers reach it through rings. Nothing allocates after
//! [`Reorder::new`].

/// What the stage did, for the worker's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReorderStats {
    /// Tickets issued.
    pub issued: u64,
    /// Packets released in ticket order.
    pub released: u64,
    /// Tickets that came back as a drop (the worker counted the reason).
    pub dropped: u64,
    /// Tickets given up at the head after `max_wait`.
    pub timed_out: u64,
    /// Tickets given up because the ring was full.
    pub overrun: u64,
    /// Results returned after their ticket was given up.
    pub late: u64,
    /// Results for a ticket already completed, or never issued.
    pub bogus: u64,
    /// Tickets refused: the ring was full of results not yet taken.
    pub full: u64,
}

/// Why [`Reorder::complete`] handed a result back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// The ticket was given up (timed out or overrun) before it came back.
    Late,
    /// The ticket was completed already, or never issued.
    Bogus,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// No ticket, or one given up.
    Free,
    /// Issued, not back yet.
    Pending,
    /// Back with a packet.
    Ready,
    /// Back as a drop.
    Dropped,
}

struct Slot<T> {
    state: State,
    issued_at: u64,
    item: Option<T>,
}

/// The reorder stage of one SA.
pub struct Reorder<T> {
    slots: Box<[Slot<T>]>,
    mask: u64,
    /// Oldest ticket not released or given up yet.
    head: u64,
    /// Next ticket to issue.
    tail: u64,
    max_wait: u64,
    stats: ReorderStats,
}

impl<T> core::fmt::Debug for Reorder<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Reorder")
            .field("capacity", &self.slots.len())
            .field("head", &self.head)
            .field("tail", &self.tail)
            .field("stats", &self.stats)
            .finish()
    }
}

impl<T> Reorder<T> {
    /// A stage holding up to `capacity` outstanding tickets (rounded up to
    /// a power of two, at least 1) that waits at most `max_wait` (units of
    /// `now`) for a missing one.
    pub fn new(capacity: usize, max_wait: u64) -> Self {
        let capacity = capacity.max(1).next_power_of_two();
        Reorder {
            slots: (0..capacity)
                .map(|_| Slot {
                    state: State::Free,
                    issued_at: 0,
                    item: None,
                })
                .collect(),
            mask: capacity as u64 - 1,
            head: 0,
            tail: 0,
            max_wait,
            stats: ReorderStats::default(),
        }
    }

    pub fn stats(&self) -> ReorderStats {
        self.stats
    }

    /// Tickets issued and neither released nor given up.
    pub fn outstanding(&self) -> usize {
        (self.tail - self.head) as usize
    }

    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    fn slot(&mut self, ticket: u64) -> &mut Slot<T> {
        &mut self.slots[(ticket & self.mask) as usize]
    }

    /// The next ticket, for a packet that arrived at `now`. When every slot
    /// is taken, the oldest ticket is given up if it is still out; `None`
    /// if it is back but not taken yet (the caller drains [`Self::pop`]
    /// first, or drops the packet and counts it in `full`).
    pub fn ticket(&mut self, now: u64) -> Option<u64> {
        if self.outstanding() == self.slots.len() {
            let head = self.head;
            let slot = self.slot(head);
            if slot.state != State::Pending {
                self.stats.full += 1;
                return None;
            }
            slot.state = State::Free;
            self.head += 1;
            self.stats.overrun += 1;
        }
        let t = self.tail;
        let slot = self.slot(t);
        slot.state = State::Pending;
        slot.issued_at = now;
        self.tail += 1;
        self.stats.issued += 1;
        Some(t)
    }

    /// A result for `ticket`: `Some(item)` decrypted, `None` dropped. Hands
    /// `item` back when the ticket is no longer (or never was) waited for.
    pub fn complete(&mut self, ticket: u64, item: Option<T>) -> Result<(), (Refused, Option<T>)> {
        if ticket >= self.tail {
            self.stats.bogus += 1;
            return Err((Refused::Bogus, item));
        }
        if ticket < self.head {
            self.stats.late += 1;
            return Err((Refused::Late, item));
        }
        let slot = self.slot(ticket);
        if slot.state != State::Pending {
            self.stats.bogus += 1;
            return Err((Refused::Bogus, item));
        }
        match item {
            Some(item) => {
                slot.state = State::Ready;
                slot.item = Some(item);
            }
            None => slot.state = State::Dropped,
        }
        Ok(())
    }

    /// When the oldest ticket was issued, if it is still out (the wait
    /// the SA is in right now).
    pub fn oldest_pending_since(&self) -> Option<u64> {
        if self.head == self.tail {
            return None;
        }
        let slot = &self.slots[(self.head & self.mask) as usize];
        (slot.state == State::Pending).then_some(slot.issued_at)
    }

    /// Gives up the oldest ticket if it is still out (counted as
    /// `overrun`), so that what is back behind it can leave: the owner's
    /// way out when every buffer it may hold waits here. False when the
    /// oldest is back (pop it first) or nothing is outstanding.
    pub fn give_up_oldest(&mut self) -> bool {
        if self.head == self.tail {
            return false;
        }
        let head = self.head;
        let slot = self.slot(head);
        if slot.state != State::Pending {
            return false;
        }
        slot.state = State::Free;
        self.head += 1;
        self.stats.overrun += 1;
        true
    }

    /// The next packet in ticket order, if it is back; gives up tickets at
    /// the head that are `max_wait` old at `now`, and skips drops.
    pub fn pop(&mut self, now: u64) -> Option<T> {
        while self.head < self.tail {
            let head = self.head;
            let max_wait = self.max_wait;
            let slot = self.slot(head);
            match slot.state {
                State::Ready => {
                    slot.state = State::Free;
                    let item = slot.item.take();
                    self.head += 1;
                    self.stats.released += 1;
                    return item;
                }
                State::Dropped => {
                    slot.state = State::Free;
                    self.head += 1;
                    self.stats.dropped += 1;
                }
                State::Pending if now.saturating_sub(slot.issued_at) >= max_wait => {
                    slot.state = State::Free;
                    self.head += 1;
                    self.stats.timed_out += 1;
                }
                State::Pending | State::Free => return None,
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    #[test]
    fn out_of_order_results_leave_in_ticket_order() {
        let mut r = Reorder::new(8, 100);
        let t: Vec<u64> = (0..5).map(|_| r.ticket(0).unwrap()).collect();
        assert_eq!(t, [0, 1, 2, 3, 4]);
        r.complete(2, Some("c")).unwrap();
        r.complete(1, Some("b")).unwrap();
        assert_eq!(r.pop(1), None, "ticket 0 is still out");
        r.complete(0, Some("a")).unwrap();
        r.complete(3, None).unwrap();
        let out: Vec<_> = std::iter::from_fn(|| r.pop(1)).collect();
        assert_eq!(out, ["a", "b", "c"]);
        assert_eq!(r.outstanding(), 1);
        r.complete(4, Some("e")).unwrap();
        assert_eq!(r.pop(1), Some("e"));
        assert_eq!((r.stats().released, r.stats().dropped), (4, 1));
    }

    #[test]
    fn the_oldest_pending_ticket_can_be_seen_and_given_up_early() {
        let mut r = Reorder::new(8, 100);
        assert_eq!(r.oldest_pending_since(), None);
        assert!(!r.give_up_oldest(), "nothing outstanding");
        r.ticket(5).unwrap();
        r.ticket(7).unwrap();
        r.ticket(9).unwrap();
        assert_eq!(r.oldest_pending_since(), Some(5));
        r.complete(0, Some("a")).unwrap();
        // Back but not taken: neither pending nor to be given up.
        assert_eq!(r.oldest_pending_since(), None);
        assert!(!r.give_up_oldest());
        assert_eq!(r.pop(10), Some("a"));
        assert_eq!(r.oldest_pending_since(), Some(7));
        r.complete(2, Some("c")).unwrap();
        // Ticket 1 given up long before its bound: "c" leaves at once.
        assert!(r.give_up_oldest());
        assert_eq!(r.pop(10), Some("c"));
        assert_eq!(r.complete(1, Some("b")), Err((Refused::Late, Some("b"))));
        assert_eq!(r.outstanding(), 0);
        let s = r.stats();
        assert_eq!((s.released, s.overrun, s.late, s.timed_out), (2, 1, 1, 0));
    }

    #[test]
    fn a_lost_result_stalls_the_sa_for_max_wait_only_and_is_late_after() {
        let mut r = Reorder::new(8, 100);
        for _ in 0..3 {
            r.ticket(10).unwrap();
        }
        r.complete(1, Some(1)).unwrap();
        r.complete(2, Some(2)).unwrap();
        assert_eq!(r.pop(109), None);
        assert_eq!(r.pop(110), Some(1));
        assert_eq!(r.pop(110), Some(2));
        assert_eq!(r.stats().timed_out, 1);
        assert_eq!(r.complete(0, Some(0)), Err((Refused::Late, Some(0))));
        assert_eq!(r.complete(2, Some(9)), Err((Refused::Late, Some(9))));
        assert_eq!(r.complete(7, Some(7)), Err((Refused::Bogus, Some(7))));
        assert_eq!((r.stats().late, r.stats().bogus), (2, 1));
    }

    #[test]
    fn a_full_ring_gives_up_the_oldest_outstanding_ticket() {
        let mut r = Reorder::new(4, u64::MAX);
        for _ in 0..4 {
            r.ticket(0).unwrap();
        }
        r.complete(1, Some(1)).unwrap();
        // Ticket 0 never comes back; the fifth arrival pushes it out.
        assert_eq!(r.ticket(0), Some(4));
        assert_eq!(r.stats().overrun, 1);
        assert_eq!(r.pop(0), Some(1));
        // Full again with a result at the head not taken: refused.
        r.complete(2, Some(2)).unwrap();
        r.ticket(0).unwrap();
        assert_eq!(r.ticket(0), None);
        assert_eq!(r.stats().full, 1);
        assert_eq!(r.complete(2, Some(2)), Err((Refused::Bogus, Some(2))));
    }

    #[derive(Debug, Clone)]
    enum Op {
        /// A packet arrives: ask for a ticket.
        Arrive,
        /// The result of the k-th outstanding ticket (mod their count)
        /// comes back; `true`: decrypted.
        Complete(usize, bool),
        /// A result for some ticket (maybe stale, maybe never issued).
        Stray(u64),
        /// Time passes.
        Tick(u64),
        /// The ordering point releases what it can.
        Pop,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => Just(Op::Arrive),
            4 => (any::<usize>(), prop::bool::weighted(0.8)).prop_map(|(k, ok)| Op::Complete(k, ok)),
            1 => (0u64..80).prop_map(Op::Stray),
            2 => (0u64..40).prop_map(Op::Tick),
            3 => Just(Op::Pop),
        ]
    }

    /// The obvious model: a map of outstanding tickets, searched.
    #[derive(Default)]
    struct Model {
        cap: usize,
        max_wait: u64,
        head: u64,
        tail: u64,
        issued_at: BTreeMap<u64, u64>,
        back: BTreeMap<u64, Option<u64>>,
    }

    impl Model {
        fn ticket(&mut self, now: u64) -> Option<u64> {
            if (self.tail - self.head) as usize == self.cap {
                if self.back.contains_key(&self.head) {
                    return None;
                }
                self.issued_at.remove(&self.head);
                self.head += 1;
            }
            self.issued_at.insert(self.tail, now);
            self.tail += 1;
            Some(self.tail - 1)
        }
        fn complete(&mut self, t: u64, item: Option<u64>) -> bool {
            if t < self.head || t >= self.tail || self.back.contains_key(&t) {
                return false;
            }
            self.back.insert(t, item);
            true
        }
        fn pop(&mut self, now: u64) -> Option<u64> {
            while self.head < self.tail {
                let h = self.head;
                match self.back.remove(&h) {
                    Some(item) => {
                        self.issued_at.remove(&h);
                        self.head += 1;
                        if item.is_some() {
                            return item;
                        }
                    }
                    None if now - self.issued_at[&h] >= self.max_wait => {
                        self.issued_at.remove(&h);
                        self.head += 1;
                    }
                    None => return None,
                }
            }
            None
        }
    }

    proptest! {
        #[test]
        fn matches_the_model_and_never_reorders_loses_or_duplicates(
            cap in 1usize..20,
            max_wait in 0u64..100,
            ops in proptest::collection::vec(op(), 1..300),
        ) {
            let mut r: Reorder<u64> = Reorder::new(cap, max_wait);
            let mut m = Model { cap: r.capacity(), max_wait, ..Model::default() };
            let mut now = 0u64;
            let mut released: Vec<u64> = Vec::new();
            let mut handed_back = 0u64;
            let mut completed = 0u64;
            for op in ops {
                match op {
                    Op::Arrive => prop_assert_eq!(r.ticket(now), m.ticket(now)),
                    Op::Complete(k, ok) => {
                        let out: Vec<u64> = (m.head..m.tail).filter(|t| !m.back.contains_key(t)).collect();
                        if out.is_empty() { continue; }
                        let t = out[k % out.len()];
                        let item = ok.then_some(t);
                        prop_assert!(m.complete(t, item));
                        prop_assert!(r.complete(t, item).is_ok());
                        completed += u64::from(ok);
                    }
                    Op::Stray(t) => {
                        let accepted = m.complete(t, Some(t));
                        match r.complete(t, Some(t)) {
                            Ok(()) => { prop_assert!(accepted); completed += 1; }
                            Err((_, back)) => {
                                prop_assert!(!accepted);
                                prop_assert_eq!(back, Some(t));
                                handed_back += 1;
                            }
                        }
                    }
                    Op::Tick(d) => now += d,
                    Op::Pop => {
                        let got = r.pop(now);
                        prop_assert_eq!(got, m.pop(now));
                        released.extend(got);
                    }
                }
                prop_assert_eq!(r.outstanding() as u64, m.tail - m.head);
            }
            while let Some(x) = r.pop(u64::MAX) { released.push(x); }
            // Strictly increasing tickets: in order, none twice.
            prop_assert!(released.windows(2).all(|w| w[0] < w[1]));
            let s = r.stats();
            prop_assert_eq!(s.released, released.len() as u64);
            prop_assert_eq!(s.late + s.bogus, handed_back);
            // Every decrypted result was released or is still held.
            prop_assert_eq!(s.issued, s.released + s.dropped + s.timed_out + s.overrun + r.outstanding() as u64);
            prop_assert!(completed >= s.released);
        }
    }
}

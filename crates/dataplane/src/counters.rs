//! Per-worker counters: plain `u64` fields the worker alone writes, copied
//! out for the control thread (see `runtime`), summed across workers there.
//!
//! The accounting identity every worker keeps (tested):
//!
//! `rx + generated + sa_handoff_in == tx + dropped + local + held + spreading + sa_handoff_out`
//!
//! `rx`: packets received. `generated`: packets the gateway made (ARP
//! requests and replies, ICMP echo replies and errors, ND). `tx`: packets
//! handed to a port's TX queue. `dropped`: drops, by reason. `local`:
//! received packets consumed by the gateway itself (ARP, ND, echo
//! requests: their answers count as generated). `held`: packets waiting for
//! next-hop resolution right now. `spreading`: packets this worker received
//! that are out at other workers for decryption or wait in its reorder
//! stage (the decrypt fan-out, docs/multicore.md) right now.
//! `sa_handoff_out`: packets this worker received and handed, whole, to the
//! worker that decrypts their per-CPU SA; `sa_handoff_in`: packets handed to
//! this worker so (it decrypts, forwards and counts them from then on).
//! Summed over workers the two differ by what is in the rings between them.

use crate::reason::{DropReason, GatewayDropCounts};

/// Counters of one port, as seen by one worker.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PortCounters {
    pub rx_packets: u64,
    pub rx_bytes: u64,
    pub tx_packets: u64,
    pub tx_bytes: u64,
    /// Received on this port and dropped (any reason).
    pub rx_dropped: u64,
    /// Handed to this port's TX and refused by the device queue.
    pub tx_dropped: u64,
}

impl PortCounters {
    fn merge(&mut self, o: &PortCounters) {
        self.rx_packets += o.rx_packets;
        self.rx_bytes += o.rx_bytes;
        self.tx_packets += o.tx_packets;
        self.tx_bytes += o.tx_bytes;
        self.rx_dropped += o.rx_dropped;
        self.tx_dropped += o.tx_dropped;
    }
}

/// The data plane's own per-tunnel counters (the ESP engine keeps the SAs'
/// packets, bytes and ESP drops itself).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TunnelCounters {
    /// Decrypted packets outside the SA's traffic selectors.
    pub in_policy_mismatch: u64,
    /// Packets for the tunnel too big for the outer MTU with DF set (or
    /// IPv6): dropped, answered with ICMP fragmentation needed / too big.
    pub out_mtu_exceeded: u64,
    /// IPv4 packets for the tunnel without DF, too big for the outer MTU:
    /// fragmented before encryption and forwarded (not a drop).
    pub out_fragmented: u64,
}

/// The fan-out's bucket bounds ([`WorkerCounters::spread_back`]), one
/// definition with the metrics that read them.
pub use espgw_control::live::SPREAD_BACK_BOUNDS_US;
/// One bucket per bound and one for longer.
pub const SPREAD_BACK_BUCKETS: usize = SPREAD_BACK_BOUNDS_US.len() + 1;

/// Everything one worker counts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkerCounters {
    pub rx: u64,
    pub tx: u64,
    pub generated: u64,
    pub local: u64,
    /// Packets waiting for next-hop resolution (a level, not a total).
    pub held: u64,
    /// Decrypt fan-out: packets this worker received that are out at
    /// other workers or wait in its reorder stage (a level).
    pub spreading: u64,
    /// Decrypt fan-out: packets handed to other workers to decrypt, and
    /// packets this worker decrypted for others (not in the identity:
    /// the receiving worker counts them).
    pub spread_out: u64,
    pub spread_in: u64,
    /// Decrypt fan-out: packets of groups worth spreading that this worker
    /// wanted help with but decrypted itself, whole, because every other
    /// worker was busy with its own traffic or had a full inbox (not in
    /// the identity). Many of these: the cores are saturated.
    pub spread_kept: u64,
    /// Decrypt fan-out (`"auto"`): packets of groups worth spreading that
    /// this worker decrypted itself because it kept up alone (no receive
    /// of its poll filled a burst), so no help was needed (not in the
    /// identity).
    pub spread_unneeded: u64,
    /// Decrypt fan-out's live check (`spread_recheck_ms`,
    /// [`crate::spread_trial`]): packets of groups worth spreading that
    /// this worker decrypted itself while behind because the check had
    /// the fan-out off (a trial's window without it, or the last trial
    /// found it slower; not in the identity).
    pub spread_solo: u64,
    /// The live check's trials, by verdict ([`TrialVerdict::index`]: on,
    /// off, keeping up, no helper).
    ///
    /// [`TrialVerdict::index`]: crate::spread_trial::TrialVerdict::index
    pub spread_trials: [u64; 4],
    /// The last trial's rates, packets delivered per second of loop time
    /// with the fan-out and without (0 before the first trial; a total
    /// sums them, which is the gateway's rate when each owner's tunnels
    /// are its own).
    pub spread_trial_pps: [u64; 2],
    /// 1 while the fan-out is off for this worker: its last trial found it
    /// slower, or it started off (the start-up probe over its limit) and
    /// no trial has turned it on yet (a level; a total counts the
    /// workers).
    pub spread_off: u64,
    /// Decrypt fan-out with `spread_late = "send"`: packets of parts that
    /// came back after their reorder stage gave up on them, sent out of
    /// arrival order instead of dropped (also counted in `tx` or as what
    /// became of them: not in the identity on their own).
    pub reorder_late_sent: u64,
    /// Decrypt fan-out: the parts this worker handed out that another
    /// worker decrypted, by how long they took to come back (cut to
    /// returned, microseconds, buckets [`SPREAD_BACK_BOUNDS_US`] and one
    /// over), and the sum of those times in nanoseconds: what
    /// `spread_wait_us` must cover (a part back after it is late). On the
    /// worker's loop clock, read once per poll like the bound's own
    /// checks: a time is whole poll iterations (0 for a part back within
    /// the poll that cut it), as the bound sees it.
    pub spread_back: [u64; SPREAD_BACK_BUCKETS],
    pub spread_back_ns: u64,
    /// Per-CPU SA handoff (docs/multicore.md): packets of an RFC 9611
    /// per-CPU inbound SA this worker received and handed to the SA's
    /// worker, and packets other workers handed to this one (both in the
    /// identity).
    pub sa_handoff_out: u64,
    pub sa_handoff_in: u64,
    /// Per-CPU SA handoff: packets this worker decrypted itself although
    /// their SA is another worker's, because that worker's handoff ring was
    /// full (or no job box was free) and nothing of the SA was queued there
    /// (not in the identity).
    pub sa_handoff_kept: u64,
    pub drops: GatewayDropCounts,
    /// Requests (ARP/ND) not sent for lack of a buffer: not packets, so
    /// outside the identity.
    pub alloc_failures: u64,
    /// RX bursts that brought at least one packet.
    pub bursts: u64,
    /// ICMP errors not sent because of the rate limit (their packets are
    /// counted as drops all the same).
    pub icmp_rate_limited: u64,
    /// Loop iterations of the worker (runtime), and those that moved packets.
    pub polls: u64,
    pub busy_polls: u64,
    /// TCP SYNs / SYN-ACKs whose MSS option a tunnel's `mss_clamp` lowered
    /// (forwarded as usual: not a drop, not a new packet).
    pub mss_clamped: u64,
    /// IKE datagrams handed to the control thread (also counted `local`),
    /// and those it queued that this worker sent (also `generated`).
    pub ike_punted: u64,
    pub ike_sent: u64,
    /// Acquires this worker queued for the IKE thread, and packets of a
    /// trapped tunnel that raised none because of the per-tunnel interval
    /// (both also counted as `acquire` drops, with the acquires that found
    /// the ring full).
    pub acquires_raised: u64,
    pub acquires_suppressed: u64,
    /// 1 when the worker's loop panicked (the runtime then stops the
    /// gateway; the counters are the last copy the worker published).
    pub panics: u64,
    pub ports: Vec<PortCounters>,
    pub tunnels: Vec<TunnelCounters>,
}

impl WorkerCounters {
    /// Zeroed counters for `ports` ports and `tunnels` tunnels.
    pub fn new(ports: usize, tunnels: usize) -> Self {
        WorkerCounters {
            ports: vec![PortCounters::default(); ports],
            tunnels: vec![TunnelCounters::default(); tunnels],
            ..Default::default()
        }
    }

    /// Counts a drop of a packet received on `port` (`None`: made here).
    #[inline]
    pub fn drop(&mut self, reason: DropReason, port: Option<usize>) {
        self.drops.add(reason);
        if let Some(p) = port.and_then(|p| self.ports.get_mut(p)) {
            p.rx_dropped += 1;
        }
    }

    /// The counters of tunnel `id` (grown on first use: tunnels can be
    /// added while the gateway runs).
    #[inline]
    pub fn tunnel(&mut self, id: u32) -> &mut TunnelCounters {
        let i = id as usize;
        if self.tunnels.len() <= i {
            self.tunnels.resize(i + 1, TunnelCounters::default());
        }
        &mut self.tunnels[i]
    }

    /// Counts a part back from another worker after `ns` nanoseconds.
    #[inline]
    pub fn spread_came_back(&mut self, ns: u64) {
        let bucket = SPREAD_BACK_BOUNDS_US
            .iter()
            .position(|&b| ns <= b * 1000)
            .unwrap_or(SPREAD_BACK_BOUNDS_US.len());
        self.spread_back[bucket] += 1;
        self.spread_back_ns += ns;
    }

    /// True when the accounting identity holds.
    pub fn balanced(&self) -> bool {
        self.rx + self.generated + self.sa_handoff_in
            == self.tx
                + self.drops.total()
                + self.local
                + self.held
                + self.spreading
                + self.sa_handoff_out
    }

    /// Adds `o` (another worker's counters) to these.
    pub fn merge(&mut self, o: &WorkerCounters) {
        self.rx += o.rx;
        self.tx += o.tx;
        self.generated += o.generated;
        self.local += o.local;
        self.held += o.held;
        self.spreading += o.spreading;
        self.spread_out += o.spread_out;
        self.spread_in += o.spread_in;
        self.spread_kept += o.spread_kept;
        self.spread_unneeded += o.spread_unneeded;
        self.spread_solo += o.spread_solo;
        for (a, b) in self.spread_trials.iter_mut().zip(o.spread_trials) {
            *a += b;
        }
        for (a, b) in self.spread_trial_pps.iter_mut().zip(o.spread_trial_pps) {
            *a += b;
        }
        self.spread_off += o.spread_off;
        self.reorder_late_sent += o.reorder_late_sent;
        for (a, b) in self.spread_back.iter_mut().zip(o.spread_back) {
            *a += b;
        }
        self.spread_back_ns += o.spread_back_ns;
        self.sa_handoff_out += o.sa_handoff_out;
        self.sa_handoff_in += o.sa_handoff_in;
        self.sa_handoff_kept += o.sa_handoff_kept;
        self.drops.merge(&o.drops);
        self.alloc_failures += o.alloc_failures;
        self.panics += o.panics;
        self.bursts += o.bursts;
        self.icmp_rate_limited += o.icmp_rate_limited;
        self.polls += o.polls;
        self.busy_polls += o.busy_polls;
        self.mss_clamped += o.mss_clamped;
        self.ike_punted += o.ike_punted;
        self.ike_sent += o.ike_sent;
        self.acquires_raised += o.acquires_raised;
        self.acquires_suppressed += o.acquires_suppressed;
        if self.ports.len() < o.ports.len() {
            self.ports.resize(o.ports.len(), PortCounters::default());
        }
        for (a, b) in self.ports.iter_mut().zip(&o.ports) {
            a.merge(b);
        }
        if self.tunnels.len() < o.tunnels.len() {
            self.tunnels
                .resize(o.tunnels.len(), TunnelCounters::default());
        }
        for (a, b) in self.tunnels.iter_mut().zip(&o.tunnels) {
            a.in_policy_mismatch += b.in_policy_mismatch;
            a.out_mtu_exceeded += b.out_mtu_exceeded;
            a.out_fragmented += b.out_fragmented;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_back_fall_in_their_bucket_and_merge() {
        let mut c = WorkerCounters::default();
        for ns in [
            0, 10_000, 10_001, 99_999, 100_000, 1_000_000, 1_000_001, 50_000_000,
        ] {
            c.spread_came_back(ns);
        }
        assert_eq!(c.spread_back, [2, 1, 0, 2, 0, 0, 1, 2]);
        assert_eq!(c.spread_back_ns, 52_220_001);
        let mut total = WorkerCounters::default();
        total.merge(&c);
        total.merge(&c);
        assert_eq!(total.spread_back, [4, 2, 0, 4, 0, 0, 2, 4]);
        assert_eq!(total.spread_back_ns, 2 * 52_220_001);
    }
}

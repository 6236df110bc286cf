//! The counters of a run as one JSON document (`espgw run --stats-json`).
//!
//! Shape (keys are a contract: scripts/demo.sh and the e2e tests read them):
//!
//! ```text
//! { "gateway": "gw-a", "seconds": 12.3,
//!   "ports":   [{"name","device","side","mac","tx_udp_checksum","rx_packets","rx_bytes",
//!                "tx_packets","tx_bytes","rx_dropped","tx_dropped","nic":{...}}],
//!   "workers": [{"id","rx","tx","generated","local","held","spreading","spread_out",
//!                "spread_in","spread_kept","spread_unneeded","reorder_late_sent",
//!                "spread_back_us":{"le_10",..,"le_1000","over_1000"},"spread_back_ns",
//!                "spread_solo","spread_trial":{"on","off","keeping_up","no_helper",
//!                "last_with_pps","last_without_pps","fan_out":"on"|"off"},
//!                "sa_handoff_out","sa_handoff_in","sa_handoff_kept","dropped","bursts",
//!                "alloc_failures","icmp_rate_limited","mss_clamped","panics"}],
//!   "sas":     [{"tunnel","dir":"out"|"in","spi","packets","bytes","drops":{reason:n}}],
//!              (a per-CPU outbound SA, RFC 9611, also has "per_cpu": true)
//!   "drops":   {reason: n},            # every reason, zeros included
//!   "totals":  {"rx","tx","generated","local","held","dropped","balanced","mss_clamped","ike_punted","ike_sent",
//!              "acquires_raised","acquires_suppressed",
//!               "worker_panics"} }
//! ```
//! `balanced` is the accounting identity `rx + generated == tx + dropped +
//! local + held` over all workers (`spreading` and the per-CPU SA handoff's
//! packets in the rings between workers are zero once the run stopped).

use serde_json::{json, Map, Value};

use crate::counters::WorkerCounters;
use crate::reason::DropReason;
use espgw_control::tables::Tables;

use crate::network::Network;

/// Device-level counters of a port (from the NIC / PMD), when known.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NicCounters {
    pub rx_packets: u64,
    pub tx_packets: u64,
    pub rx_missed: u64,
    pub rx_errors: u64,
    pub tx_errors: u64,
    pub rx_nombuf: u64,
}

/// A run's final (or current) counters.
#[derive(Debug, Clone)]
pub struct Stats {
    pub seconds: f64,
    pub workers: Vec<WorkerCounters>,
    pub nic: Vec<Option<NicCounters>>,
}

impl Stats {
    /// All workers' counters added up.
    pub fn total(&self) -> WorkerCounters {
        let mut t = WorkerCounters::default();
        for w in &self.workers {
            t.merge(w);
        }
        t
    }

    /// The JSON document for `net`'s ports and `tables`' tunnels.
    pub fn to_json(&self, net: &Network, tables: &Tables) -> Value {
        let total = self.total();
        let ports: Vec<Value> = net
            .ports
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let c = total.ports.get(i).copied().unwrap_or_default();
                let mut v = json!({
                    "name": p.name,
                    "device": p.device,
                    "side": match p.side {
                        espgw_control::config::Side::Protected => "protected",
                        espgw_control::config::Side::Unprotected => "unprotected",
                    },
                    "mac": mac_string(p.mac),
                    // The NIC computes UDP checksums on transmit (TX
                    // checksum offload on: `tx_checksum_offload`).
                    "tx_udp_checksum": p.tx_udp_checksum,
                    "rx_packets": c.rx_packets,
                    "rx_bytes": c.rx_bytes,
                    "tx_packets": c.tx_packets,
                    "tx_bytes": c.tx_bytes,
                    "rx_dropped": c.rx_dropped,
                    "tx_dropped": c.tx_dropped,
                });
                if let Some(Some(n)) = self.nic.get(i) {
                    v["nic"] = json!({
                        "rx_packets": n.rx_packets,
                        "tx_packets": n.tx_packets,
                        "rx_missed": n.rx_missed,
                        "rx_errors": n.rx_errors,
                        "tx_errors": n.tx_errors,
                        "rx_nombuf": n.rx_nombuf,
                    });
                }
                v
            })
            .collect();
        let workers: Vec<Value> = self
            .workers
            .iter()
            .enumerate()
            .map(|(i, w)| {
                json!({
                    "id": i,
                    "rx": w.rx,
                    "tx": w.tx,
                    "generated": w.generated,
                    "local": w.local,
                    "held": w.held,
                    "spreading": w.spreading,
                    "spread_out": w.spread_out,
                    "spread_in": w.spread_in,
                    "spread_kept": w.spread_kept,
                    "spread_unneeded": w.spread_unneeded,
                    "reorder_late_sent": w.reorder_late_sent,
                    "spread_back_us": crate::stats::spread_back_json(&w.spread_back),
                    "spread_back_ns": w.spread_back_ns,
                    "spread_solo": w.spread_solo,
                    "spread_trial": spread_trial_json(w),
                    "sa_handoff_out": w.sa_handoff_out,
                    "sa_handoff_in": w.sa_handoff_in,
                    "sa_handoff_kept": w.sa_handoff_kept,
                    "dropped": w.drops.total(),
                    "bursts": w.bursts,
                    "alloc_failures": w.alloc_failures,
                    "icmp_rate_limited": w.icmp_rate_limited,
                    "mss_clamped": w.mss_clamped,
                    "panics": w.panics,
                })
            })
            .collect();
        let mut sas = Vec::new();
        for t in tables.tunnels() {
            let tc = total
                .tunnels
                .get(t.id.0 as usize)
                .copied()
                .unwrap_or_default();
            if let Some(out) = tables.outbound_sa(t.id) {
                let stats = out.stats();
                let mut drops = reason_map(stats.drops.iter().map(|(r, n)| (r.name(), n)));
                drops.insert(
                    DropReason::MtuExceeded.name().into(),
                    tc.out_mtu_exceeded.into(),
                );
                sas.push(json!({
                    "tunnel": t.name,
                    "dir": "out",
                    "spi": out.spi(),
                    "packets": stats.packets,
                    "bytes": stats.bytes,
                    "fragmented": tc.out_fragmented,
                    "drops": drops,
                }));
            }
            // RFC 9611 per-CPU SAs of the tunnel: each its own counters (the
            // tunnel's MTU counters are the tunnel's, given once above).
            for extra in &t.extra_out {
                let stats = extra.stats();
                sas.push(json!({
                    "tunnel": t.name,
                    "dir": "out",
                    "spi": extra.spi(),
                    "per_cpu": true,
                    "packets": stats.packets,
                    "bytes": stats.bytes,
                    "drops": reason_map(stats.drops.iter().map(|(r, n)| (r.name(), n))),
                }));
            }
        }
        for (spi, id, sa) in tables.inbound_sas() {
            let Some(t) = tables.tunnel(id) else { continue };
            let tc = total
                .tunnels
                .get(id.0 as usize)
                .copied()
                .unwrap_or_default();
            let stats = sa.stats();
            let mut drops = reason_map(stats.drops.iter().map(|(r, n)| (r.name(), n)));
            drops.insert(
                DropReason::PolicyMismatch.name().into(),
                tc.in_policy_mismatch.into(),
            );
            sas.push(json!({
                "tunnel": t.name,
                "dir": "in",
                "spi": spi,
                "packets": stats.packets,
                "bytes": stats.bytes,
                "drops": drops,
            }));
        }
        let drops = reason_map(total.drops.iter().map(|(r, n)| (r.name(), n)));
        json!({
            "gateway": net.gateway,
            "seconds": self.seconds,
            "ports": ports,
            "workers": workers,
            "sas": sas,
            "drops": drops,
            "totals": {
                "rx": total.rx,
                "tx": total.tx,
                "generated": total.generated,
                "local": total.local,
                "held": total.held,
                "spreading": total.spreading,
                "dropped": total.drops.total(),
                "balanced": total.balanced(),
                "mss_clamped": total.mss_clamped,
                "ike_punted": total.ike_punted,
                "ike_sent": total.ike_sent,
                "acquires_raised": total.acquires_raised,
                "acquires_suppressed": total.acquires_suppressed,
                "worker_panics": total.panics,
            },
        })
    }
}

fn reason_map<'a>(it: impl Iterator<Item = (&'a str, u64)>) -> Map<String, Value> {
    it.map(|(k, v)| (k.to_string(), Value::from(v))).collect()
}

pub fn mac_string(m: [u8; 6]) -> String {
    format!(
        "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
        m[0], m[1], m[2], m[3], m[4], m[5]
    )
}

/// A worker's live check of the fan-out ([`crate::spread_trial`]): its
/// trials by verdict, the rates of the last one, and whether the fan-out
/// is on for it now (on until a trial turns it off).
pub fn spread_trial_json(w: &WorkerCounters) -> Value {
    let mut v = spread_trials_json(&w.spread_trials);
    v["last_with_pps"] = w.spread_trial_pps[0].into();
    v["last_without_pps"] = w.spread_trial_pps[1].into();
    v["fan_out"] = if w.spread_off != 0 { "off" } else { "on" }.into();
    v
}

/// Trials of the live check counted by verdict, keyed by the verdicts'
/// names (`{"on", "off", "keeping_up", "no_helper"}`).
pub fn spread_trials_json(trials: &[u64; 4]) -> Value {
    Value::Object(
        crate::spread_trial::TrialVerdict::ALL
            .iter()
            .map(|v| (v.name().to_string(), trials[v.index()].into()))
            .collect(),
    )
}

/// A worker's [`WorkerCounters::spread_back`] as the stats JSON keys it:
/// `le_10` .. `le_1000` (parts back within that many microseconds, not
/// counted in a lower bucket) and `over_1000`.
///
/// [`WorkerCounters::spread_back`]: crate::counters::WorkerCounters::spread_back
pub fn spread_back_json(
    buckets: &[u64; crate::counters::SPREAD_BACK_BUCKETS],
) -> serde_json::Value {
    let mut m = serde_json::Map::new();
    for (i, n) in buckets.iter().enumerate() {
        let key = match crate::counters::SPREAD_BACK_BOUNDS_US.get(i) {
            Some(b) => format!("le_{b}"),
            None => format!(
                "over_{}",
                crate::counters::SPREAD_BACK_BOUNDS_US
                    [crate::counters::SPREAD_BACK_BOUNDS_US.len() - 1]
            ),
        };
        m.insert(key, (*n).into());
    }
    serde_json::Value::Object(m)
}

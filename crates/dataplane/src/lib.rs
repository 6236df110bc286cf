//! espgw-dataplane: the workers that make espgw a gateway.
//!
//! The packet-processing core ([`Worker`]) is generic over
//! [`espgw_wire::PacketBuf`] and free of DPDK, so everything a gateway does
//! on a link (ARP, ND, ping, SPD, ESP per SA group, TTL, PMTU, routing,
//! neighbor resolution, counting) is unit-tested with `VecBuf`. The DPDK
//! runtime (feature `dpdk`, on by default) runs workers on EAL lcores over
//! real ports: [`run`]. Design notes: docs/dataplane.md.

pub mod core_probe;
pub mod counters;
pub mod esp_steering;
pub mod flow_cache;
pub mod fragment;
pub mod ip;
pub mod neighbor;
pub mod network;
pub mod numa;
pub mod pool;
pub mod ports;
pub mod ratelimit;
pub mod reason;
pub mod reorder;
pub mod route;
pub mod spread_trial;
pub mod stats;
pub mod steer;
pub mod supervise;
pub mod tx;
pub mod worker;

#[cfg(feature = "dpdk")]
pub mod runtime;

#[cfg(test)]
mod tests;

pub use counters::{PortCounters, TunnelCounters, WorkerCounters};
pub use network::Network;
pub use pool::{BufPool, VecBufPool};
pub use reason::{DropReason, GatewayDropCounts};
pub use stats::Stats;
pub use supervise::{Supervisor, WorkerPanic};
pub use tx::TxQueues;
pub use worker::{Now, Worker};

#[cfg(feature = "dpdk")]
pub use runtime::{run, RunError, RunOptions};

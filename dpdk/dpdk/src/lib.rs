//! Safe wrapper over dpdk-sys: all FFI unsafe of espgw lives here.
//!
//! Start with [`Eal::init`] (once per process), then create a [`Mempool`],
//! open and configure a [`Port`], take its [`RxQueue`]/[`TxQueue`] handles and
//! move them to worker lcores ([`lcore::launch`]). Packets travel as owned
//! [`Mbuf`]s in fixed-size [`Burst`]es; [`Ring`]s carry them between cores.

pub mod burst;
pub mod cycles;
pub mod eal;
pub mod error;
pub mod flow;
mod kept_pools;
pub mod lcore;
pub mod mbuf;
pub mod mempool;
pub mod port;
pub mod ring;

pub use burst::Burst;
pub use eal::Eal;
pub use error::{Error, Result};
pub use flow::{EspSteer, Flow};
pub use mbuf::Mbuf;
pub use mempool::{Mempool, MBUF_HEADROOM, SOCKET_ANY};
pub use port::{
    port_count, port_id_by_name, Link, Port, PortConfig, PortInfo, PortStats, RxQueue, TxQueue,
};
pub use ring::{Ring, RingConsumer, RingMode, RingProducer};

/// The raw bindings, for what this wrapper does not cover yet.
pub use dpdk_sys as sys;

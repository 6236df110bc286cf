//! espgw-bench: the built-in benchmark harness behind `espgw bench`.
//!
//! It runs the real worker code path (`espgw_dataplane::Worker`, as in
//! `espgw run`) on real DPDK mbufs in one process, without a NIC: per
//! worker core a generator fills pre-built packets into mbufs, the stage
//! processes them, a sink checks every output and frees it. Three layers
//! are measured on the same packets so the cost of each stage shows:
//! the raw cipher (the ceiling), the ESP engine, the whole worker.
//! Method and results: docs/benchmarks.md.
//!
//! ```no_run
//! let opts = espgw_bench::Options { seconds: 0.2, ..Default::default() };
//! let report = espgw_bench::run(&opts).unwrap();
//! print!("{}", espgw_bench::report::table::render(&report));
//! ```

pub mod case;
pub mod cli;
pub mod flows;
pub mod gateway;
pub mod generator;
pub mod imix;
pub mod layers;
pub mod machine;
pub mod options;
pub mod packets;
pub mod report;
pub mod runner;
pub mod sink;
pub mod stats;

pub use options::{Direction, Options, Size};
pub use runner::{run, Report, Row};

//! Raw bindings to the system DPDK: bindgen over `shim/wrapper.h` (an allowlist
//! of what espgw uses) plus `shim/shim.c`, out-of-line wrappers for DPDK's
//! static-inline functions (named `shim_<original name>`).
//!
//! Everything here is `unsafe` FFI; the `dpdk` crate is the safe wrapper.

#![allow(
    non_upper_case_globals,
    non_camel_case_types,
    non_snake_case,
    dead_code
)]
#![allow(clippy::all)]
#![allow(rustdoc::all)]

include!(concat!(env!("OUT_DIR"), "/bindings.rs"));

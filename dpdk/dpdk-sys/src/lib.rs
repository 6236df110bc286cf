//! Raw bindings to the system DPDK (bindgen + C shim). Filled in by the dpdk-sys work.

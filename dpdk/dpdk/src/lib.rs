//! Safe wrapper over dpdk-sys: all FFI unsafe of espgw lives here.

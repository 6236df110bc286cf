//! espgw-dataplane

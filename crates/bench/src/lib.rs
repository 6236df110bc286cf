//! espgw-bench

//! espgw-control

//! The IKEv2 wire format (RFC 7296 section 3).

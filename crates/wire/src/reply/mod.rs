//! Builders for the packets the gateway answers with, written into a
//! caller's buffer or in place: no allocation on the data path.
//!
//! Every function takes an L3 packet (IPv4 or IPv6, starting at the IP
//! header) except [`arp_reply_in_place`], which takes the whole Ethernet
//! frame. They check the rules on when an answer is allowed and return
//! [`crate::Error::Suppressed`] when it is not.

mod echo;
mod icmp_error;
mod neighbor;
#[cfg(test)]
mod tests;

pub use echo::{icmpv4_echo_reply_in_place, icmpv6_echo_reply_in_place};
pub use icmp_error::{
    emit_icmpv4_frag_needed, emit_icmpv4_time_exceeded, emit_icmpv6_packet_too_big,
    emit_icmpv6_time_exceeded, icmpv4_frag_needed_in_buf, icmpv4_time_exceeded_in_buf,
    icmpv6_packet_too_big_in_buf, icmpv6_time_exceeded_in_buf, ICMPV4_ERROR_MAX_LEN,
    ICMPV4_ERROR_OVERHEAD, ICMPV6_ERROR_OVERHEAD,
};
pub use neighbor::{
    arp_reply_in_place, emit_neighbor_solicit, neighbor_advert_in_buf, neighbor_advert_reply,
};

/// TTL / hop limit of the ICMP messages the gateway originates.
pub const REPLY_TTL: u8 = 64;

//! TCP MSS clamping per tunnel (`mss_clamp`): SYNs and SYN-ACKs entering a
//! tunnel (before encap) and leaving it (after decap) announce at most the
//! tunnel's MSS, so TCP never sends segments the tunnel would have to
//! fragment or refuse, even where ICMP "too big" is filtered on the way.

use espgw_wire::{ip_protocol, tcp, PacketBuf, TcpPacket};

use espgw_control::tables::MssLimits;

use crate::counters::WorkerCounters;
use crate::ip::IpMeta;

/// Offset of the flag byte in the TCP header.
const TCP_FLAGS: usize = 13;

/// Lowers the MSS option of a TCP SYN in `pkt` (an IP packet whose
/// header `m` describes) to the tunnel's limit for its family, and counts
/// it. Anything but a SYN costs one protocol compare and one flag byte
/// read.
#[inline]
pub(super) fn clamp_mss<B: PacketBuf>(
    counters: &mut WorkerCounters,
    pkt: &mut B,
    m: &IpMeta,
    limits: Option<MssLimits>,
) {
    let Some(limits) = limits else { return };
    // `sport` is None for IPv4 fragments after the first: no TCP header in
    // them.
    if m.proto != ip_protocol::TCP || m.sport.is_none() {
        return;
    }
    let syn = pkt
        .data()
        .get(m.l4_offset + TCP_FLAGS)
        .is_some_and(|f| f & tcp::flags::SYN != 0);
    if syn && clamp_syn(pkt, m, limits) {
        counters.mss_clamped += 1;
    }
}

/// The clamp itself, on a packet known to be TCP with SYN set: true when
/// the MSS option was lowered (checksum patched incrementally). A header
/// that does not parse, or malformed options, leave the packet as it is.
fn clamp_syn<B: PacketBuf>(pkt: &mut B, m: &IpMeta, limits: MssLimits) -> bool {
    let max = if m.v6 { limits.v6 } else { limits.v4 };
    let Some(segment) = pkt.data_mut().get_mut(m.l4_offset..) else {
        return false;
    };
    TcpPacket::new_checked(segment).is_ok_and(|mut t| t.clamp_mss(max).is_some())
}

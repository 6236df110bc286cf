//! NAT detection (RFC 7296 section 2.23): each NAT_DETECTION_*_IP notify
//! carries SHA-1(SPIi | SPIr | IP address | port), with the SPIs of the
//! header of the message that carries it (SPIr is zero in the
//! IKE_SA_INIT request).

use std::net::{IpAddr, SocketAddr};

use crate::message::{Message, NotifyType};

/// The notification data for `addr`.
pub(crate) fn hash(spi_i: u64, spi_r: u64, addr: SocketAddr) -> Vec<u8> {
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY);
    ctx.update(&spi_i.to_be_bytes());
    ctx.update(&spi_r.to_be_bytes());
    match addr.ip() {
        IpAddr::V4(a) => ctx.update(&a.octets()),
        IpAddr::V6(a) => ctx.update(&a.octets()),
    }
    ctx.update(&addr.port().to_be_bytes());
    ctx.finish().as_ref().to_vec()
}

/// Our NAT_DETECTION_SOURCE_IP data: the hash of `addr`, or with `fake`
/// (forced UDP encapsulation, strongSwan's `encap = yes`) the hash of
/// port 0 of the unspecified address, which matches no real source, so
/// the peer sees a NAT in front of us and both sides encapsulate.
pub(crate) fn source_hash(fake: bool, spi_i: u64, spi_r: u64, addr: SocketAddr) -> Vec<u8> {
    if fake {
        let any = match addr.ip() {
            IpAddr::V4(_) => IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED),
            IpAddr::V6(_) => IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED),
        };
        return hash(spi_i, spi_r, SocketAddr::new(any, 0));
    }
    hash(spi_i, spi_r, addr)
}

/// What the NAT_DETECTION_* notifies of a received message say.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NatDetection {
    /// No SOURCE_IP hash matched the address the message came from: a NAT
    /// is in front of the peer (or the peer pretends so, as strongSwan
    /// with kernel-libipsec does to force UDP encapsulation).
    pub peer_behind_nat: bool,
    /// No DESTINATION_IP hash matched the address it arrived at: a NAT is
    /// in front of us.
    pub local_behind_nat: bool,
}

impl NatDetection {
    /// Either side is behind a NAT: switch to port 4500 and encapsulate ESP.
    pub fn any(self) -> bool {
        self.peer_behind_nat || self.local_behind_nat
    }
}

/// Checks the notifies of `msg` (received from `src` at `dst`); None when
/// the peer sent none (it does not do NAT-T).
pub(crate) fn detect(
    msg: &Message,
    spi_i: u64,
    spi_r: u64,
    src: SocketAddr,
    dst: SocketAddr,
) -> Option<NatDetection> {
    let sources: Vec<_> = msg.notifies(NotifyType::NAT_DETECTION_SOURCE_IP).collect();
    let dests: Vec<_> = msg
        .notifies(NotifyType::NAT_DETECTION_DESTINATION_IP)
        .collect();
    if sources.is_empty() && dests.is_empty() {
        return None;
    }
    let src_hash = hash(spi_i, spi_r, src);
    let dst_hash = hash(spi_i, spi_r, dst);
    Some(NatDetection {
        peer_behind_nat: !sources.iter().any(|n| n.data == src_hash),
        local_behind_nat: !dests.iter().any(|n| n.data == dst_hash),
    })
}

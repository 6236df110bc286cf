//! The production IKE transport: the data plane's punt rings
//! (docs/ike.md "Gateway integration").
//!
//! Two bounded lock-free queues ([`crossbeam_queue::ArrayQueue`], allocated
//! once at start-up) connect the data-plane workers and the control
//! thread that runs the IKE driver:
//!
//! - **punt** (workers → control): every worker may enqueue (multi-producer),
//!   the control thread dequeues. A worker copies the UDP payload of an IKE
//!   datagram for one of our addresses into a fixed-size slot
//!   ([`PuntDatagram`]): no allocation, no lock, no syscall per packet. Full:
//!   the worker drops the packet and counts `punt_full`, so an IKE_SA_INIT
//!   flood costs the workers one failed enqueue each and never waits.
//! - **transmit** (control → workers): [`PuntTransport`] enqueues what the
//!   driver sends; whichever worker polls it first builds Ethernet/IP/UDP
//!   around it and sends it with the packets it forwards, through the same
//!   route and neighbor code (so an unresolved next hop is resolved by ARP /
//!   ND like any other). A ring to the workers rather than a TX queue of the
//!   control thread's own: the workers already own every port's TX queues,
//!   the neighbor cache and its wait queues; a TX queue for the control
//!   thread would need its own ARP/ND and one more queue per port.
//! - **acquire** (workers → control): a worker whose packet needs a trapped
//!   tunnel (IKE `start_action = "trap"`, no SA negotiated yet) drops it
//!   and enqueues an [`Acquire`] (the tunnel's id and the packet's flow),
//!   rate-limited per tunnel by the worker; the IKE thread hands it to
//!   `IkeDriver::acquire`. Full: the acquire is dropped and counted (the
//!   worker raises another at its next interval).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crossbeam_queue::ArrayQueue;
use espgw_ike::engine::Transmit;

use super::transport::IkeTransport;

/// The largest UDP payload a slot holds. IKE messages with a PSK are a few
/// hundred bytes; with fragmentation (RFC 7383) the peer keeps each below
/// its path MTU. A larger datagram is dropped (`punt_too_big`).
pub const PUNT_DATAGRAM_MAX: usize = 2048;

/// Slots of each ring: one round of IKE_SA_INIT retransmissions from a few
/// hundred peers; beyond that a flood is dropped at the worker.
pub const PUNT_RING_SLOTS: usize = 256;

/// Slots of the acquire ring: the workers rate-limit per tunnel, so this
/// holds one acquire of a few dozen trapped tunnels from every worker.
pub const ACQUIRE_RING_SLOTS: usize = 256;

/// The IKE port (RFC 7296 2.); the NAT-T port is `espgw_esp::Encap::NAT_T_PORT`.
pub const IKE_PORT: u16 = 500;

/// One datagram in a ring slot: its addresses and its UDP payload (on 4500
/// with the non-ESP marker, as the engine takes it).
#[derive(Clone)]
pub struct PuntDatagram {
    pub src: SocketAddr,
    pub dst: SocketAddr,
    len: u16,
    bytes: [u8; PUNT_DATAGRAM_MAX],
}

impl std::fmt::Debug for PuntDatagram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PuntDatagram")
            .field("src", &self.src)
            .field("dst", &self.dst)
            .field("len", &self.len)
            .finish()
    }
}

impl PuntDatagram {
    /// A slot holding `payload`, or `None` when it does not fit.
    pub fn new(src: SocketAddr, dst: SocketAddr, payload: &[u8]) -> Option<Self> {
        if payload.len() > PUNT_DATAGRAM_MAX {
            return None;
        }
        let mut bytes = [0u8; PUNT_DATAGRAM_MAX];
        bytes[..payload.len()].copy_from_slice(payload);
        Some(PuntDatagram {
            src,
            dst,
            len: payload.len() as u16,
            bytes,
        })
    }

    pub fn payload(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }
}

/// A worker's request for SAs: a packet needed trapped tunnel `tunnel`
/// (its id in the worker's snapshot) and found no outbound SA. The flow
/// is for the log only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Acquire {
    pub tunnel: u32,
    pub src: std::net::IpAddr,
    pub dst: std::net::IpAddr,
    /// IP protocol of the packet (inner).
    pub proto: u8,
}

/// Why a worker could not punt a datagram (each is a counted drop).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PuntError {
    /// The ring is full: the control thread is behind (or a flood).
    Full,
    /// Larger than [`PUNT_DATAGRAM_MAX`].
    TooBig,
}

/// The two rings and the control side's counters.
#[derive(Debug)]
pub struct PuntRings {
    punt: ArrayQueue<PuntDatagram>,
    transmit: ArrayQueue<PuntDatagram>,
    acquire: ArrayQueue<Acquire>,
    acquires_raised: AtomicU64,
    acquires_dropped: AtomicU64,
    /// Datagrams the driver sent that did not fit the transmit ring (the
    /// engine retransmits requests; a lost response is answered again).
    transmit_dropped: AtomicU64,
    /// Of those, larger than a slot (the rest found the ring full).
    transmit_too_big: AtomicU64,
    punted: AtomicU64,
    transmitted: AtomicU64,
}

impl PuntRings {
    /// Both rings with `slots` slots each (allocated now, once).
    pub fn new(slots: usize) -> Arc<Self> {
        Arc::new(PuntRings {
            punt: ArrayQueue::new(slots.max(1)),
            transmit: ArrayQueue::new(slots.max(1)),
            acquire: ArrayQueue::new(ACQUIRE_RING_SLOTS),
            acquires_raised: AtomicU64::new(0),
            acquires_dropped: AtomicU64::new(0),
            transmit_dropped: AtomicU64::new(0),
            transmit_too_big: AtomicU64::new(0),
            punted: AtomicU64::new(0),
            transmitted: AtomicU64::new(0),
        })
    }

    /// Worker side: hands a received IKE datagram to the control thread.
    pub fn punt(&self, src: SocketAddr, dst: SocketAddr, payload: &[u8]) -> Result<(), PuntError> {
        // Checked before the slot is built: a full ring costs no copy.
        if self.punt.is_full() {
            return Err(PuntError::Full);
        }
        let d = PuntDatagram::new(src, dst, payload).ok_or(PuntError::TooBig)?;
        self.punt.push(d).map_err(|_| PuntError::Full)
    }

    /// Control side: the next punted datagram.
    pub fn receive(&self) -> Option<PuntDatagram> {
        let d = self.punt.pop();
        if d.is_some() {
            self.punted.fetch_add(1, Ordering::Relaxed);
        }
        d
    }

    /// Control side: queues a datagram for a worker to send. False (and
    /// counted) when the ring is full or the payload does not fit a slot.
    pub fn send(&self, t: &Transmit) -> bool {
        let Some(d) = PuntDatagram::new(t.src, t.dst, &t.payload) else {
            self.transmit_too_big.fetch_add(1, Ordering::Relaxed);
            self.transmit_dropped.fetch_add(1, Ordering::Relaxed);
            return false;
        };
        let queued = self.transmit.push(d).is_ok();
        if !queued {
            self.transmit_dropped.fetch_add(1, Ordering::Relaxed);
        }
        queued
    }

    /// Worker side: the next datagram to send.
    pub fn next_transmit(&self) -> Option<PuntDatagram> {
        let d = self.transmit.pop();
        if d.is_some() {
            self.transmitted.fetch_add(1, Ordering::Relaxed);
        }
        d
    }

    /// Worker side: asks the IKE thread for SAs of a trapped tunnel. False
    /// (and counted) when the ring is full. One atomic add per acquire,
    /// which the worker raises at most once per tunnel and interval.
    pub fn raise_acquire(&self, a: Acquire) -> bool {
        let queued = self.acquire.push(a).is_ok();
        let counter = if queued {
            &self.acquires_raised
        } else {
            &self.acquires_dropped
        };
        counter.fetch_add(1, Ordering::Relaxed);
        queued
    }

    /// Control side: the next acquire.
    pub fn next_acquire(&self) -> Option<Acquire> {
        self.acquire.pop()
    }

    /// Datagrams queued for the workers and not taken yet.
    pub fn transmit_pending(&self) -> usize {
        self.transmit.len()
    }

    pub fn stats(&self) -> PuntStats {
        PuntStats {
            received: self.punted.load(Ordering::Relaxed),
            transmitted: self.transmitted.load(Ordering::Relaxed),
            transmit_dropped: self.transmit_dropped.load(Ordering::Relaxed),
            transmit_too_big: self.transmit_too_big.load(Ordering::Relaxed),
            acquires_raised: self.acquires_raised.load(Ordering::Relaxed),
            acquires_dropped: self.acquires_dropped.load(Ordering::Relaxed),
        }
    }
}

/// The control side's view of the rings (the workers count their own
/// drops: `punt_full`, `punt_too_big`, `nat_keepalive`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PuntStats {
    /// Datagrams the control thread took from the punt ring.
    pub received: u64,
    /// Datagrams a worker took from the transmit ring.
    pub transmitted: u64,
    /// Datagrams the driver sent that the transmit ring refused (full, or
    /// larger than a slot).
    pub transmit_dropped: u64,
    /// Of those, larger than a slot.
    pub transmit_too_big: u64,
    /// Acquires the workers queued / that found the acquire ring full.
    pub acquires_raised: u64,
    pub acquires_dropped: u64,
}

/// [`IkeTransport`] over the transmit ring.
#[derive(Debug, Clone)]
pub struct PuntTransport(pub Arc<PuntRings>);

impl IkeTransport for PuntTransport {
    fn send(&mut self, datagram: Transmit) {
        if !self.0.send(&datagram) {
            tracing::warn!(dst = %datagram.dst, len = datagram.payload.len(), "IKE: transmit ring full or datagram too big, dropped");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn punted_datagrams_come_out_in_order_until_the_ring_is_full() {
        let rings = PuntRings::new(2);
        let (a, b) = (addr("192.0.2.1:500"), addr("192.0.2.2:500"));
        assert_eq!(rings.punt(a, b, &[1, 2, 3]), Ok(()));
        assert_eq!(rings.punt(a, b, &[4]), Ok(()));
        assert_eq!(rings.punt(a, b, &[5]), Err(PuntError::Full));
        let big = vec![0u8; PUNT_DATAGRAM_MAX + 1];
        let first = rings.receive().unwrap();
        assert_eq!(
            (first.src, first.dst, first.payload()),
            (a, b, &[1, 2, 3][..])
        );
        assert_eq!(rings.punt(a, b, &big), Err(PuntError::TooBig));
        assert_eq!(rings.receive().unwrap().payload(), &[4]);
        assert!(rings.receive().is_none());
        assert_eq!(rings.stats().received, 2);
    }

    #[test]
    fn acquires_come_out_in_order_and_a_full_ring_is_counted() {
        let rings = PuntRings::new(1);
        let a = |tunnel| Acquire {
            tunnel,
            src: "10.1.0.2".parse().unwrap(),
            dst: "10.2.0.2".parse().unwrap(),
            proto: 1,
        };
        for t in 0..ACQUIRE_RING_SLOTS as u32 {
            assert!(rings.raise_acquire(a(t)));
        }
        assert!(!rings.raise_acquire(a(999)));
        assert_eq!(rings.next_acquire(), Some(a(0)));
        assert_eq!(rings.next_acquire(), Some(a(1)));
        let s = rings.stats();
        assert_eq!((s.acquires_raised, s.acquires_dropped), (256, 1));
    }

    #[test]
    fn the_transport_queues_for_the_workers_and_counts_what_does_not_fit() {
        let rings = PuntRings::new(1);
        let mut t = PuntTransport(Arc::clone(&rings));
        let tx = |n: u8| Transmit {
            src: addr("[2001:db8::1]:4500"),
            dst: addr("[2001:db8::2]:4500"),
            payload: vec![0, 0, 0, 0, n],
        };
        t.send(tx(1));
        t.send(tx(2));
        t.send(Transmit {
            payload: vec![0; PUNT_DATAGRAM_MAX + 1],
            ..tx(3)
        });
        assert_eq!(rings.transmit_pending(), 1);
        let d = rings.next_transmit().unwrap();
        assert_eq!(d.payload(), &[0, 0, 0, 0, 1]);
        assert_eq!(d.dst, addr("[2001:db8::2]:4500"));
        assert!(rings.next_transmit().is_none());
        assert_eq!(
            rings.stats(),
            PuntStats {
                received: 0,
                transmitted: 1,
                transmit_dropped: 2,
                transmit_too_big: 1,
                ..PuntStats::default()
            }
        );
    }
}

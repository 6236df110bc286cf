//! The security association database: which SA decrypts an arriving ESP
//! packet (by SPI and destination address) and which SA encrypts a
//! tunnel's traffic.
//!
//! Generic over the SA type `S`: the ESP engine's SA in the gateway, a
//! stand-in in tests. SAs are held by `Arc`, so a new table built from an
//! old one ([`Sad::to_builder`]) shares the very same SA objects, and their
//! mutable state (sequence numbers, replay windows, lifetime counters)
//! carries over a table swap untouched.

use core::fmt;
use std::net::IpAddr;
use std::sync::Arc;

use rustc_hash::FxHashMap;

use super::policy::TunnelId;

/// Position of an SA in one [`Sad`] snapshot. Only meaningful for the
/// snapshot that returned it (indices change when a new table is built).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SaIndex(pub u32);

/// Key of the inbound map.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct InboundKey {
    spi: u32,
    dst: IpAddr,
}

/// Why an SA mapping was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SadError {
    /// SPIs 0..=255 are reserved (RFC 4303 section 2.1): never on the wire.
    ReservedSpi(u32),
    /// Another SA already receives on this SPI and address.
    DuplicateSpi { spi: u32, dst: IpAddr },
    /// Tunnel ids index a dense table; this one is implausibly large.
    TunnelIdTooLarge(TunnelId),
}

impl fmt::Display for SadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SadError::ReservedSpi(spi) => write!(f, "SPI {spi:#x} is reserved (0..=255)"),
            SadError::DuplicateSpi { spi, dst } => {
                write!(f, "SPI {spi:#x} for {dst} is already used by another SA")
            }
            SadError::TunnelIdTooLarge(id) => {
                write!(f, "tunnel id {} is not below {}", id.0, MAX_TUNNEL_ID)
            }
        }
    }
}

impl std::error::Error for SadError {}

/// Tunnel ids are config positions; this bounds the outbound table's size.
pub const MAX_TUNNEL_ID: u32 = 1 << 24;

/// The mutable description a [`Sad`] is built from.
pub struct SadBuilder<S> {
    inbound: FxHashMap<InboundKey, Arc<S>>,
    outbound: FxHashMap<TunnelId, Arc<S>>,
}

impl<S> Default for SadBuilder<S> {
    fn default() -> SadBuilder<S> {
        SadBuilder {
            inbound: FxHashMap::default(),
            outbound: FxHashMap::default(),
        }
    }
}

impl<S> SadBuilder<S> {
    pub fn new() -> SadBuilder<S> {
        SadBuilder::default()
    }

    /// Receive ESP for `spi` sent to `dst` with `sa`. During a rekey the old
    /// and new inbound SA are both mapped (make-before-break).
    pub fn insert_inbound(&mut self, spi: u32, dst: IpAddr, sa: Arc<S>) -> Result<(), SadError> {
        if spi <= 255 {
            return Err(SadError::ReservedSpi(spi));
        }
        let key = InboundKey { spi, dst };
        if self.inbound.contains_key(&key) {
            return Err(SadError::DuplicateSpi { spi, dst });
        }
        self.inbound.insert(key, sa);
        Ok(())
    }

    /// Stop receiving on `spi`/`dst`; returns the SA that did.
    pub fn remove_inbound(&mut self, spi: u32, dst: IpAddr) -> Option<Arc<S>> {
        self.inbound.remove(&InboundKey { spi, dst })
    }

    /// Encrypt `tunnel`'s traffic with `sa`; returns the SA it replaces.
    pub fn set_outbound(
        &mut self,
        tunnel: TunnelId,
        sa: Arc<S>,
    ) -> Result<Option<Arc<S>>, SadError> {
        if tunnel.0 >= MAX_TUNNEL_ID {
            return Err(SadError::TunnelIdTooLarge(tunnel));
        }
        Ok(self.outbound.insert(tunnel, sa))
    }

    /// `tunnel` has no outbound SA any more (its packets are discarded).
    pub fn remove_outbound(&mut self, tunnel: TunnelId) -> Option<Arc<S>> {
        self.outbound.remove(&tunnel)
    }

    /// The immutable lookup table. Each distinct SA (by identity) appears
    /// once in [`Sad::sas`], however many mappings lead to it.
    pub fn build(&self) -> Sad<S> {
        let mut sas: Vec<Arc<S>> = Vec::new();
        let mut index_of: FxHashMap<*const S, u32> = FxHashMap::default();
        let mut intern = |sa: &Arc<S>| -> u32 {
            *index_of.entry(Arc::as_ptr(sa)).or_insert_with(|| {
                sas.push(Arc::clone(sa));
                (sas.len() - 1) as u32
            })
        };

        // Sorted so that equal builders give equal index assignments.
        let mut inbound_entries: Vec<(&InboundKey, &Arc<S>)> = self.inbound.iter().collect();
        inbound_entries.sort_by_key(|(k, _)| (k.spi, k.dst));
        let mut inbound = FxHashMap::default();
        inbound.reserve(inbound_entries.len());
        for (key, sa) in inbound_entries {
            inbound.insert(*key, intern(sa));
        }

        let mut outbound_entries: Vec<(&TunnelId, &Arc<S>)> = self.outbound.iter().collect();
        outbound_entries.sort_by_key(|(tunnel, _)| **tunnel);
        let size = outbound_entries.last().map_or(0, |(t, _)| t.0 as usize + 1);
        let mut outbound = vec![NO_SA; size];
        for (tunnel, sa) in outbound_entries {
            outbound[tunnel.0 as usize] = intern(sa);
        }

        Sad {
            sas,
            inbound,
            outbound,
        }
    }
}

/// Marks a tunnel without an outbound SA.
const NO_SA: u32 = u32::MAX;

/// The immutable SAD a worker looks up in. See the module documentation.
pub struct Sad<S> {
    sas: Vec<Arc<S>>,
    inbound: FxHashMap<InboundKey, u32>,
    /// Indexed by tunnel id: a direct load, no hashing.
    outbound: Vec<u32>,
}

impl<S> Default for Sad<S> {
    fn default() -> Sad<S> {
        SadBuilder::new().build()
    }
}

impl<S> Sad<S> {
    /// A builder holding the same mappings and the same SA objects.
    pub fn to_builder(&self) -> SadBuilder<S> {
        let mut builder = SadBuilder::new();
        for (key, &i) in &self.inbound {
            if let Some(sa) = self.sas.get(i as usize) {
                builder.inbound.insert(*key, Arc::clone(sa));
            }
        }
        for (tunnel, &i) in self.outbound.iter().enumerate() {
            if let Some(sa) = self.sas.get(i as usize) {
                builder
                    .outbound
                    .insert(TunnelId(tunnel as u32), Arc::clone(sa));
            }
        }
        builder
    }

    /// The SA that receives ESP with `spi` sent to `dst`.
    #[inline]
    pub fn inbound(&self, spi: u32, dst: IpAddr) -> Option<SaIndex> {
        self.inbound
            .get(&InboundKey { spi, dst })
            .map(|&i| SaIndex(i))
    }

    /// The SA that encrypts `tunnel`'s traffic.
    #[inline]
    pub fn outbound(&self, tunnel: TunnelId) -> Option<SaIndex> {
        match self.outbound.get(tunnel.0 as usize) {
            Some(&i) if i != NO_SA => Some(SaIndex(i)),
            _ => None,
        }
    }

    /// The SA at `index` (from this snapshot's lookups).
    #[inline]
    pub fn sa(&self, index: SaIndex) -> Option<&Arc<S>> {
        self.sas.get(index.0 as usize)
    }

    /// [`Sad::inbound`] and [`Sad::sa`] in one.
    #[inline]
    pub fn inbound_sa(&self, spi: u32, dst: IpAddr) -> Option<&Arc<S>> {
        self.inbound(spi, dst).and_then(|i| self.sa(i))
    }

    /// [`Sad::outbound`] and [`Sad::sa`] in one.
    #[inline]
    pub fn outbound_sa(&self, tunnel: TunnelId) -> Option<&Arc<S>> {
        self.outbound(tunnel).and_then(|i| self.sa(i))
    }

    /// Every SA once, e.g. to add up per-SA counters.
    pub fn sas(&self) -> &[Arc<S>] {
        &self.sas
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn inbound_by_spi_and_destination() {
        let a = Arc::new("a");
        let b = Arc::new("b");
        let mut builder = SadBuilder::new();
        builder
            .insert_inbound(0x1000, ip("192.0.2.1"), a.clone())
            .unwrap();
        builder
            .insert_inbound(0x1000, ip("2001:db8::1"), b.clone())
            .unwrap();
        builder
            .insert_inbound(0x2000, ip("192.0.2.1"), b.clone())
            .unwrap();
        let sad = builder.build();
        assert_eq!(**sad.inbound_sa(0x1000, ip("192.0.2.1")).unwrap(), "a");
        assert_eq!(**sad.inbound_sa(0x1000, ip("2001:db8::1")).unwrap(), "b");
        assert_eq!(**sad.inbound_sa(0x2000, ip("192.0.2.1")).unwrap(), "b");
        assert!(sad.inbound(0x1000, ip("192.0.2.2")).is_none());
        assert!(sad.inbound(0x3000, ip("192.0.2.1")).is_none());
        // b is mapped twice but stored once.
        assert_eq!(sad.sas().len(), 2);
    }

    #[test]
    fn refuses_reserved_and_duplicate_spis() {
        let mut builder = SadBuilder::new();
        let sa = Arc::new(());
        assert_eq!(
            builder.insert_inbound(255, ip("192.0.2.1"), sa.clone()),
            Err(SadError::ReservedSpi(255))
        );
        builder
            .insert_inbound(256, ip("192.0.2.1"), sa.clone())
            .unwrap();
        assert!(matches!(
            builder.insert_inbound(256, ip("192.0.2.1"), sa.clone()),
            Err(SadError::DuplicateSpi { spi: 256, .. })
        ));
        assert!(builder.set_outbound(TunnelId(MAX_TUNNEL_ID), sa).is_err());
    }

    #[test]
    fn outbound_by_tunnel_and_rekey_keeps_sa_objects() {
        let old_out = Arc::new(1);
        let mut builder = SadBuilder::new();
        builder.set_outbound(TunnelId(3), old_out.clone()).unwrap();
        let first = builder.build();
        assert_eq!(**first.outbound_sa(TunnelId(3)).unwrap(), 1);
        assert!(first.outbound(TunnelId(0)).is_none());
        assert!(first.outbound(TunnelId(99)).is_none());

        let mut next = first.to_builder();
        let new_out = Arc::new(2);
        let replaced = next.set_outbound(TunnelId(3), new_out).unwrap().unwrap();
        assert!(Arc::ptr_eq(&replaced, &old_out));
        next.set_outbound(TunnelId(0), old_out.clone()).unwrap();
        let second = next.build();
        assert_eq!(**second.outbound_sa(TunnelId(3)).unwrap(), 2);
        assert!(Arc::ptr_eq(
            second.outbound_sa(TunnelId(0)).unwrap(),
            &old_out
        ));
        assert!(next.remove_outbound(TunnelId(0)).is_some());
        assert!(next.build().outbound(TunnelId(0)).is_none());
    }
}

//! The snapshot the workers read: [`Tables`] (SPD, SAD and the runtime
//! form of each tunnel), published as a whole by `live::SaManager`.
//!
//! This module holds the types only. The conversions that fill them (from
//! the manager's live view, or straight from a config) are in
//! `live/snapshot.rs`, next to the view they read, so that `tables` does
//! not depend on the config model.

use core::fmt;
use std::net::IpAddr;
use std::sync::Arc;

use espgw_esp::{InboundSa, OutboundSa};

use super::policy::TunnelId;
use super::prefix::IpPrefix;
use super::sad::{SaIndex, Sad};
use super::spd::Spd;

/// An outbound SA as workers share it: `encap_burst` takes `&self`.
pub type SharedOutbound = Arc<OutboundSa>;
/// An inbound SA as workers share it: `decap_burst` takes `&self` too
/// (lock-free anti-replay window, counters added per burst), so any
/// number of workers decrypt for it at once.
pub type SharedInbound = Arc<InboundSa>;

/// An SA in the gateway's SAD: the ESP engine's SA of either direction.
/// The inbound one carries its SPI and tunnel, which the worker needs
/// after the (SPI, destination) lookup.
pub enum LiveSa {
    Outbound(SharedOutbound),
    Inbound {
        spi: u32,
        tunnel: TunnelId,
        /// An old SA kept after a rekey until it drains; it still decrypts.
        draining: bool,
        /// With RFC 9611 per-CPU SAs, which of the tunnel's inbound SAs
        /// this is (0: the tunnel's own pair, 1..: its extra pairs in
        /// order; an SA draining after a rekey keeps the number its pair
        /// had at the rekey): the data plane hands
        /// the SA's ESP to worker `lane % workers` to decrypt (the decrypt
        /// fan-out's per-SA handoff, docs/multicore.md). `None` for a
        /// tunnel with one SA pair.
        lane: Option<u32>,
        sa: SharedInbound,
    },
}

impl LiveSa {
    pub fn outbound(&self) -> Option<&OutboundSa> {
        match self {
            LiveSa::Outbound(sa) => Some(sa),
            LiveSa::Inbound { .. } => None,
        }
    }

    pub fn inbound(&self) -> Option<&InboundSa> {
        match self {
            LiveSa::Inbound { sa, .. } => Some(sa),
            LiveSa::Outbound(_) => None,
        }
    }
}

/// A tunnel in its runtime form: what a worker needs to send into it and
/// to check what comes out of it. Built from a config `[[tunnel]]`
/// (`config::Tunnel`, the file's model) by the one conversion in
/// `live/snapshot.rs`. Its SAs are in the SAD: the outbound one under
/// [`TunnelEntry::id`], the inbound ones under (SPI, [`local`]); the
/// outbound one is also held here ([`TunnelEntry::out`]).
///
/// [`local`]: TunnelEntry::local
pub struct TunnelEntry {
    /// Stable for the tunnel's life (config tunnels: their config index);
    /// per-tunnel counters and the SPD's `Protect` actions name it.
    pub id: TunnelId,
    pub name: String,
    /// Outer source address; inbound ESP must be sent to it.
    pub local: IpAddr,
    /// Outer destination address (the peer gateway).
    pub remote: IpAddr,
    /// Index of the unprotected port its ESP leaves by (routing may pick
    /// another).
    pub port: usize,
    pub local_ts: Vec<IpPrefix>,
    pub remote_ts: Vec<IpPrefix>,
    /// ESP in UDP (RFC 3948) rather than IP protocol 50.
    pub udp_encap: bool,
    /// The MSS that TCP SYNs through the tunnel may announce (config
    /// `mss_clamp`); `None`: no clamping.
    pub mss_clamp: Option<MssLimits>,
    /// The SAD's outbound SA of this tunnel (the same `Arc`, put in both
    /// places by the one conversion), so that the worker's per-packet path
    /// reaches it in one load from the SPD's answer rather than through
    /// the SAD's index. `None` once it hard-expired and no rekey replaced
    /// it.
    pub out: Option<SharedOutbound>,
    /// RFC 9611 per-CPU outbound SAs of the tunnel besides `out` (IKE
    /// `per_cpu_sas`): same selectors, each with its own sequence counter,
    /// so workers encrypting on different ones share no counter cache
    /// line. Empty for nearly every tunnel. [`TunnelEntry::out_for`]
    /// picks one per worker.
    pub extra_out: Vec<SharedOutbound>,
    /// A trap (IKE `start_action = "trap"`): the tunnel's policy is in
    /// place but no CHILD_SA was negotiated for it yet, so `out` is
    /// `None`; a worker drops its traffic as `acquire` (not `sa_expired`)
    /// and raises an acquire for the IKE driver.
    pub trap: bool,
}

impl TunnelEntry {
    /// The outbound SA worker `worker` encrypts this tunnel's traffic
    /// with: `out` alone for an ordinary tunnel; with per-CPU SAs, SA
    /// `worker % n` of the `n` it has (`out` first, then `extra_out`), so
    /// that with `n` >= workers no two workers share one. `None` when it
    /// has none (hard-expired, or a trap).
    #[inline]
    pub fn out_for(&self, worker: usize) -> Option<&SharedOutbound> {
        if self.extra_out.is_empty() {
            return self.out.as_ref();
        }
        let own = usize::from(self.out.is_some());
        let i = worker % (own + self.extra_out.len());
        match (&self.out, i) {
            (Some(out), 0) => Some(out),
            _ => self.extra_out.get(i - own),
        }
    }

    /// True when a decapsulated packet from `src` to `dst` is inside this
    /// tunnel's traffic selectors (RFC 4301 5.2, step 4).
    pub fn inbound_matches(&self, src: IpAddr, dst: IpAddr) -> bool {
        self.remote_ts.iter().any(|p| p.contains(src))
            && self.local_ts.iter().any(|p| p.contains(dst))
    }
}

impl fmt::Debug for TunnelEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TunnelEntry")
            .field("id", &self.id)
            .field("name", &self.name)
            .field("local", &self.local)
            .field("remote", &self.remote)
            .finish_non_exhaustive()
    }
}

/// Largest MSS per inner family, worked out from a tunnel's `mss_clamp`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MssLimits {
    pub v4: u16,
    pub v6: u16,
}

/// IPv4 + TCP headers without options (what "auto" takes off the inner MTU).
const TCP_IPV4_HEADERS: usize = 20 + 20;
/// IPv6 + TCP headers without options or extension headers.
const TCP_IPV6_HEADERS: usize = 40 + 20;

impl MssLimits {
    /// The same limit for both families (a fixed `mss_clamp`).
    pub fn fixed(mss: u16) -> MssLimits {
        MssLimits { v4: mss, v6: mss }
    }

    /// `mss_clamp = "auto"` on a tunnel whose outbound SA is `out` and
    /// whose outer MTU is `mtu`: the inner MTU less the TCP/IP headers.
    /// Needs the SA (its suite, encapsulation and outer family make the
    /// overhead).
    pub fn auto(out: &OutboundSa, mtu: usize) -> MssLimits {
        let inner = inner_mtu(out, mtu);
        let mss = |headers: usize| u16::try_from(inner.saturating_sub(headers)).unwrap_or(u16::MAX);
        MssLimits {
            v4: mss(TCP_IPV4_HEADERS),
            v6: mss(TCP_IPV6_HEADERS),
        }
    }
}

/// Largest inner packet that fits `mtu` once `out` encapsulated it.
pub fn inner_mtu(out: &OutboundSa, mtu: usize) -> usize {
    // overhead() includes the padding, which depends on the length:
    // start a cipher block (at most 16 bytes) above the padded guess
    // and walk down to the first length that fits.
    let mut inner = (mtu + 16).saturating_sub(out.overhead(0));
    while inner > 0 && inner + out.overhead(inner) > mtu {
        inner -= 1;
    }
    inner
}

/// One snapshot of everything a worker looks up, published as a whole:
/// the SPD (behind its own `Arc`, so that an SA change republishes without
/// recompiling the policy), the SAD and the tunnels by id.
///
/// Generic over the SAD's SA type only so that tests can use a stand-in;
/// the gateway's snapshot is `Tables` = `Tables<LiveSa>`.
pub struct Tables<S = LiveSa> {
    pub spd: Arc<Spd>,
    pub sad: Sad<S>,
    /// Indexed by tunnel id: a direct load from the SPD's answer.
    tunnels: Vec<Option<TunnelEntry>>,
}

impl<S> Tables<S> {
    /// A snapshot of `spd`, `sad` and `tunnels` (each placed by its id;
    /// ids are dense in practice: config indexes, then ids the manager
    /// hands out).
    pub fn new(spd: Arc<Spd>, sad: Sad<S>, tunnels: Vec<TunnelEntry>) -> Tables<S> {
        let size = tunnels
            .iter()
            .map(|t| t.id.0 as usize + 1)
            .max()
            .unwrap_or(0);
        let mut by_id: Vec<Option<TunnelEntry>> = (0..size).map(|_| None).collect();
        for t in tunnels {
            let i = t.id.0 as usize;
            by_id[i] = Some(t);
        }
        Tables {
            spd,
            sad,
            tunnels: by_id,
        }
    }

    /// The tunnel with `id`, if this snapshot has it.
    #[inline]
    pub fn tunnel(&self, id: TunnelId) -> Option<&TunnelEntry> {
        self.tunnels.get(id.0 as usize).and_then(Option::as_ref)
    }

    /// Every tunnel, by id.
    pub fn tunnels(&self) -> impl Iterator<Item = &TunnelEntry> {
        self.tunnels.iter().flatten()
    }

    /// One past the largest tunnel id (size of per-tunnel arrays).
    pub fn tunnel_ids(&self) -> usize {
        self.tunnels.len()
    }
}

impl Tables<LiveSa> {
    /// The SA that encrypts tunnel `id`'s traffic; `None` once it
    /// hard-expired and no rekey replaced it (the tunnel's traffic is then
    /// dropped, never sent in the clear).
    #[inline]
    pub fn outbound_sa(&self, id: TunnelId) -> Option<&SharedOutbound> {
        self.tunnel(id)?.out.as_ref()
    }

    /// The SA worker `worker` encrypts tunnel `id`'s traffic with
    /// ([`TunnelEntry::out_for`]: the tunnel's one outbound SA, or with
    /// RFC 9611 per-CPU SAs the worker's own of them).
    #[inline]
    pub fn outbound_sa_for(&self, id: TunnelId, worker: usize) -> Option<&SharedOutbound> {
        self.tunnel(id)?.out_for(worker)
    }

    /// The inbound SA at `index` (from [`Sad::inbound`]): its SPI, tunnel
    /// and SA.
    #[inline]
    pub fn inbound_sa(&self, index: SaIndex) -> Option<(u32, TunnelId, &SharedInbound)> {
        match self.sad.sa(index).map(|s| &**s) {
            Some(LiveSa::Inbound {
                spi, tunnel, sa, ..
            }) => Some((*spi, *tunnel, sa)),
            _ => None,
        }
    }

    /// The per-CPU lane of the inbound SA at `index` (see
    /// [`LiveSa::Inbound`]): `None` unless its tunnel has per-CPU SAs.
    #[inline]
    pub fn inbound_lane(&self, index: SaIndex) -> Option<u32> {
        match self.sad.sa(index).map(|s| &**s) {
            Some(LiveSa::Inbound { lane, .. }) => *lane,
            _ => None,
        }
    }

    /// Every inbound SA as (SPI, tunnel, SA), by tunnel id, each tunnel's
    /// current SA before its draining ones (for reports; not per packet).
    pub fn inbound_sas(&self) -> Vec<(u32, TunnelId, &SharedInbound)> {
        let mut all: Vec<(TunnelId, bool, u32, &SharedInbound)> = self
            .sad
            .sas()
            .iter()
            .filter_map(|s| match &**s {
                LiveSa::Inbound {
                    spi,
                    tunnel,
                    draining,
                    sa,
                    ..
                } => Some((*tunnel, *draining, *spi, sa)),
                LiveSa::Outbound(_) => None,
            })
            .collect();
        all.sort_by_key(|&(tunnel, draining, spi, _)| (tunnel, draining, spi));
        all.into_iter()
            .map(|(tunnel, _, spi, sa)| (spi, tunnel, sa))
            .collect()
    }
}

impl<S> fmt::Debug for Tables<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tables")
            .field("rules", &self.spd.len())
            .field("sas", &self.sad.sas().len())
            .field("tunnels", &self.tunnels().collect::<Vec<_>>())
            .finish()
    }
}

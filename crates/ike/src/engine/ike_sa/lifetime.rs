//! Lifetimes of the IKE SA and its CHILD_SAs (soft: rekey or reauth,
//! hard: delete; by time here, by bytes and packets as the caller reports
//! them) and NAT keepalives (RFC 3948 4), with strongSwan's semantics:
//! the soft limit is the configured value less a random jitter drawn per
//! SA, the hard one is fixed.

use super::*;
use crate::engine::config::limits;

/// A rekey the peer refused with TEMPORARY_FAILURE is tried again after
/// about this long (RFC 7296 2.25: the collision that caused it is usually
/// gone by then): see [`retry_delay`].
pub(crate) const REKEY_RETRY_MS: u64 = 10_000;

/// A random delay in `[REKEY_RETRY_MS / 2, 3 * REKEY_RETRY_MS / 2)` before
/// a refused rekey (IKE or CHILD_SA) is tried again. Two peers whose
/// rekeys with IKE_FOLLOWUP_KE collide both refuse each other
/// ([`super::followup`]); with a fixed delay they would collide again at
/// every retry (found by review: 13 refusals each in 120 s).
fn retry_delay(rng: &mut dyn RandomSource) -> u64 {
    let mut b = [0u8; 8];
    let jitter = match rng.fill(&mut b) {
        Ok(()) => u64::from_be_bytes(b) % REKEY_RETRY_MS,
        Err(_) => REKEY_RETRY_MS / 2,
    };
    REKEY_RETRY_MS / 2 + jitter
}

/// Where a CHILD_SA stands (RFC 7296 2.25 answers depend on it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ChildState {
    /// In use.
    Installed,
    /// Our rekey of it completed: its delete is queued.
    Rekeyed,
    /// Our delete of it is queued or outstanding.
    Deleting,
    /// Its hard limit passed: the data plane was told to remove it
    /// ([`Event::ChildSaDeleted`]); our delete is queued.
    Expired,
}

/// A CHILD_SA's limits: soft ones start a rekey, hard ones delete it.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct ChildLife {
    rekey_at: Option<Time>,
    expire_at: Option<Time>,
    rekey_bytes: Option<u64>,
    expire_bytes: Option<u64>,
    rekey_packets: Option<u64>,
    expire_packets: Option<u64>,
    /// The soft limit was reached and our rekey queued.
    rekey_started: bool,
}

/// The IKE SA's limits.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct IkeLife {
    rekey_at: Option<Time>,
    reauth_at: Option<Time>,
    expire_at: Option<Time>,
}

/// A value in `[0, range)` from the engine's random source (0 when the
/// range is empty or the source fails: then the SA rekeys at the full
/// time, which is safe).
fn jitter(rng: &mut dyn RandomSource, range: u64) -> u64 {
    if range == 0 {
        return 0;
    }
    let mut b = [0u8; 8];
    if rng.fill(&mut b).is_err() {
        return 0;
    }
    u64::from_be_bytes(b) % range
}

/// (soft, hard) of one quantity counted from `base`, None when off.
fn soft_hard(
    base: u64,
    (soft, hard, rand): (u64, u64, u64),
    rng: &mut dyn RandomSource,
) -> (Option<u64>, Option<u64>) {
    let s = (soft > 0).then(|| base.saturating_add(soft - jitter(rng, rand)));
    let h = (hard > 0).then(|| base.saturating_add(hard));
    (s, h)
}

fn at(t: Option<Time>, now: Time) -> bool {
    t.is_some_and(|t| now >= t)
}

impl ChildLife {
    fn new(now: Time, conn: &Connection, rng: &mut dyn RandomSource) -> Self {
        let l = &conn.lifetimes;
        let (rekey_at, expire_at) = soft_hard(
            now,
            limits(
                l.child_rekey_time_ms,
                l.child_life_time_ms,
                l.child_rand_time_ms,
            ),
            rng,
        );
        let (rekey_bytes, expire_bytes) = soft_hard(
            0,
            limits(l.child_rekey_bytes, l.child_life_bytes, l.child_rand_bytes),
            rng,
        );
        let (rekey_packets, expire_packets) = soft_hard(
            0,
            limits(
                l.child_rekey_packets,
                l.child_life_packets,
                l.child_rand_packets,
            ),
            rng,
        );
        ChildLife {
            rekey_at,
            expire_at,
            rekey_bytes,
            expire_bytes,
            rekey_packets,
            expire_packets,
            rekey_started: false,
        }
    }
}

/// How long the IKE responder leaves the initiator to create RFC 9611
/// per-resource CHILD_SAs before it creates the missing ones itself
/// ([`IkeSa::topup_resources`]).
pub(super) const RESOURCE_TOPUP_DELAY_MS: u64 = 2_000;

impl IkeSa {
    /// Arms the limits of this SA once it is established and of each
    /// CHILD_SA that has none yet (called by the engine after every
    /// input, with that input's time).
    pub fn arm_lifetimes(&mut self, now: Time, conn: &Connection, rng: &mut dyn RandomSource) {
        if self.state != State::Established {
            return;
        }
        if self.life.is_none() {
            self.up_at = Some(now);
            let (rekey, reauth, over, rand) = conn.lifetimes.ike();
            let rekey_at = (rekey > 0).then(|| now + rekey - jitter(rng, rand.min(rekey)));
            let reauth_at = (reauth > 0).then(|| now + reauth - jitter(rng, rand.min(reauth)));
            // strongSwan: the later of the two soft times plus over_time.
            let expire_at = rekey_at.max(reauth_at).map(|t| t + over);
            self.life = Some(IkeLife {
                rekey_at,
                reauth_at,
                expire_at,
            });
        }
        for c in self.children.iter_mut().filter(|c| c.life.is_none()) {
            c.life = Some(ChildLife::new(now, conn, rng));
        }
    }

    /// This SA's limits as the engine reports them (tests, logs): rekey,
    /// reauth, hard expiry.
    pub fn ike_lifetimes(&self) -> Option<(Option<Time>, Option<Time>, Option<Time>)> {
        self.life.map(|l| (l.rekey_at, l.reauth_at, l.expire_at))
    }

    /// A CHILD_SA's time limits (rekey, expiry), by our inbound SPI.
    pub fn child_lifetimes(&self, inbound_spi: u32) -> Option<(Option<Time>, Option<Time>)> {
        let c = self
            .children
            .iter()
            .find(|c| c.inbound_spi == inbound_spi)?;
        c.life.map(|l| (l.rekey_at, l.expire_at))
    }

    fn keepalive_at(&self, cfg: &EngineConfig) -> Option<Time> {
        (self.state == State::Established
            && self.udp_encap
            && self.local_nat
            && cfg.keepalive_ms > 0)
            .then(|| self.last_sent.saturating_add(cfg.keepalive_ms))
    }

    /// Our delete of this IKE SA is queued or outstanding: its own and its
    /// CHILD_SAs' limits no longer matter.
    fn closing(&self) -> bool {
        self.in_flight == Some(OwnRequest::DeleteIke)
            || self.pending.contains(&OwnRequest::DeleteIke)
    }

    /// The earliest lifetime or keepalive deadline.
    pub(super) fn next_life_timeout(&self, cfg: &EngineConfig) -> Option<Time> {
        if self.state != State::Established {
            return None;
        }
        if self.closing() {
            return self.keepalive_at(cfg);
        }
        let redundant = self.redundant_at;
        let ike = self.life.iter().flat_map(|l| {
            let soft = if self.replaced {
                [None, None]
            } else {
                [l.rekey_at, l.reauth_at]
            };
            soft.into_iter().chain([l.expire_at]).flatten()
        });
        let children = self.children.iter().flat_map(|c| {
            let l = c.life.unwrap_or_default();
            let soft = (c.state == ChildState::Installed && !l.rekey_started)
                .then_some(l.rekey_at)
                .flatten();
            let hard = (c.state != ChildState::Expired)
                .then_some(l.expire_at)
                .flatten();
            [soft, hard].into_iter().flatten()
        });
        let topup = self.resource_topup_at.filter(|_| !self.replaced);
        ike.chain(children)
            .chain(self.keepalive_at(cfg))
            .chain(redundant)
            .chain(topup)
            .min()
    }

    /// Lifetimes and keepalives due at `now`. A reauthentication to start
    /// is handed to the engine (`out.reauth`).
    pub fn on_life_timeout(
        &mut self,
        now: Time,
        conn: &Connection,
        cfg: &EngineConfig,
        rng: &mut dyn RandomSource,
        out: &mut Output,
    ) {
        if self.state != State::Established {
            return;
        }
        if self.closing() {
            self.keepalive(now, cfg, out);
            let _ = self.pump(now, conn, cfg, rng, out);
            return;
        }
        if at(self.redundant_at, now) {
            self.redundant_at = None;
            if !self.pending.contains(&OwnRequest::DeleteIke) {
                self.pending.push_back(OwnRequest::DeleteIke);
            }
        }
        if let Some(life) = self.life.as_mut() {
            if at(life.expire_at, now) {
                life.expire_at = None;
                self.expire(now, conn, cfg, rng, out);
                return;
            }
            if !self.replaced && at(life.reauth_at, now) {
                life.reauth_at = None;
                life.rekey_at = None;
                out.reauth.push(self.id);
            } else if !self.replaced && at(life.rekey_at, now) {
                life.rekey_at = None;
                if self.ike_rekey.is_none()
                    && !self
                        .followup_i
                        .as_ref()
                        .is_some_and(followup::Initiator::is_ike)
                    && !self.pending.contains(&OwnRequest::RekeyIke)
                {
                    self.pending.push_back(OwnRequest::RekeyIke);
                }
            }
        }
        if at(self.resource_topup_at, now) {
            self.resource_topup_at = None;
            self.topup_resources(conn);
        }
        for i in 0..self.children.len() {
            let l = self.children[i].life.unwrap_or_default();
            if self.children[i].state != ChildState::Expired && at(l.expire_at, now) {
                self.expire_child(i, out);
            } else if at(l.rekey_at, now) {
                self.soft_child(i);
            }
        }
        self.keepalive(now, cfg, out);
        let _ = self.pump(now, conn, cfg, rng, out);
    }

    /// RFC 9611 as the IKE responder: both sides want per-resource
    /// CHILD_SAs (the initiator sent SA_RESOURCE_INFO in IKE_AUTH, we
    /// echoed it), and by [`RESOURCE_TOPUP_DELAY_MS`] after IKE_AUTH the
    /// initiator has asked for no per-resource CHILD_SA of its own: we ask
    /// for the rest, as an initiator would. An initiator that creates them
    /// at once (espgw) is done by then, so the two do not both add
    /// (which would leave more than either wants); one that creates them
    /// only when its kernel asks per CPU (strongSwan 6 on Linux XFRM, and
    /// never with kernel-libipsec) leaves them to us. Either side's
    /// TS_MAX_QUEUE ends the series.
    fn topup_resources(&mut self, conn: &Connection) {
        if self.replaced || conn.per_resource_sas < 2 {
            return;
        }
        let Some(have) = self.resource_group_size() else {
            return;
        };
        let queued = self
            .pending
            .iter()
            .filter(|r| **r == OwnRequest::CreateResource)
            .count();
        let want = conn.per_resource_sas as usize;
        if have > 1 || self.peer_asked_resources {
            // The initiator creates its own (a late one of its requests
            // could cross ours and leave one more than either wants).
            return;
        }
        for _ in (have + queued)..want {
            self.pending.push_back(OwnRequest::CreateResource);
        }
    }

    /// RFC 9611: how many installed CHILD_SAs have the selectors of the
    /// first installed one (its per-resource group); None without one.
    fn resource_group_size(&self) -> Option<usize> {
        let first = self
            .children
            .iter()
            .find(|c| c.state == ChildState::Installed)?;
        Some(
            self.children
                .iter()
                .filter(|c| {
                    c.state == ChildState::Installed && c.same_ts(&first.local_ts, &first.remote_ts)
                })
                .count(),
        )
    }

    /// RFC 9611: there is an installed CHILD_SA and its group has fewer
    /// than `per_resource_sas`.
    pub(super) fn resource_group_short(&self, conn: &Connection) -> bool {
        self.resource_group_size()
            .is_some_and(|have| have < conn.per_resource_sas as usize)
    }

    fn keepalive(&mut self, now: Time, cfg: &EngineConfig, out: &mut Output) {
        if self.keepalive_at(cfg).is_some_and(|t| now >= t) {
            // RFC 3948 2.3: one 0xFF octet, no marker, to the peer's
            // NAT-T port, so the NAT keeps its mapping.
            out.transmits.push_back(Transmit {
                src: self.local,
                dst: self.remote,
                payload: vec![0xFF],
            });
            out.stats.keepalives_sent += 1;
            self.last_sent = now;
        }
    }

    /// The hard limit of the IKE SA: deleted. The peer is told when the
    /// window is free; when a request is stuck in it, the SA goes without
    /// telling (the peer's own timers end its side).
    fn expire(
        &mut self,
        now: Time,
        conn: &Connection,
        cfg: &EngineConfig,
        rng: &mut dyn RandomSource,
        out: &mut Output,
    ) {
        if self.outstanding.is_none() {
            self.pending.clear();
            self.pending.push_back(OwnRequest::DeleteIke);
            let _ = self.pump(now, conn, cfg, rng, out);
        } else {
            out.events
                .push_back(Event::IkeSaDeleted { ike_sa: self.id });
            self.die(now, cfg);
        }
    }

    /// A CHILD_SA's soft limit: queue its rekey (once).
    fn soft_child(&mut self, i: usize) {
        let c = &mut self.children[i];
        let Some(l) = c.life.as_mut() else {
            return;
        };
        if l.rekey_started || c.state != ChildState::Installed {
            return;
        }
        l.rekey_started = true;
        let request = OwnRequest::RekeyChild {
            inbound_spi: c.inbound_spi,
        };
        let ours_in_flight = self.rekey.as_ref().map(|r| r.old_inbound).or_else(|| {
            self.followup_i
                .as_ref()
                .and_then(followup::Initiator::rekeys_child)
        }) == Some(c.inbound_spi);
        if !ours_in_flight && !self.pending.contains(&request) {
            self.pending.push_back(request);
        }
    }

    /// A CHILD_SA's hard limit: the data plane removes it now, the peer
    /// is told with a delete.
    fn expire_child(&mut self, i: usize, out: &mut Output) {
        let c = &mut self.children[i];
        let was = c.state;
        c.state = ChildState::Expired;
        out.events.push_back(Event::ChildSaDeleted {
            ike_sa: self.id,
            inbound_spi: c.inbound_spi,
            outbound_spi: c.outbound_spi,
        });
        let request = OwnRequest::DeleteChild {
            inbound_spi: c.inbound_spi,
        };
        let deleting = was == ChildState::Deleting || was == ChildState::Rekeyed;
        if !deleting && !self.pending.contains(&request) {
            self.pending.push_front(request);
        }
    }

    /// The data plane's counters of a CHILD_SA (bytes and packets so
    /// far, the larger direction): the byte and packet limits.
    #[allow(clippy::too_many_arguments)]
    pub fn child_usage(
        &mut self,
        now: Time,
        inbound_spi: u32,
        bytes: u64,
        packets: u64,
        conn: &Connection,
        cfg: &EngineConfig,
        rng: &mut dyn RandomSource,
        out: &mut Output,
    ) -> Result<(), EngineError> {
        if self.state != State::Established {
            return Err(EngineError::Protocol("IKE SA not established"));
        }
        let i = self
            .children
            .iter()
            .position(|c| c.inbound_spi == inbound_spi)
            .ok_or(EngineError::Protocol("no such CHILD_SA"))?;
        let l = self.children[i].life.unwrap_or_default();
        let reached = |limit: Option<u64>, v: u64| limit.is_some_and(|l| v >= l);
        if self.children[i].state != ChildState::Expired
            && (reached(l.expire_bytes, bytes) || reached(l.expire_packets, packets))
        {
            self.expire_child(i, out);
        } else if reached(l.rekey_bytes, bytes) || reached(l.rekey_packets, packets) {
            self.soft_child(i);
        }
        self.pump(now, conn, cfg, rng, out)
    }

    /// Our rekey of `old_inbound` was refused with TEMPORARY_FAILURE: try
    /// again later ([`retry_delay`]) if it is still in use.
    pub(super) fn retry_rekey_later(
        &mut self,
        now: Time,
        old_inbound: u32,
        rng: &mut dyn RandomSource,
    ) {
        let delay = retry_delay(rng);
        if let Some(c) = self
            .children
            .iter_mut()
            .find(|c| c.inbound_spi == old_inbound && c.state == ChildState::Installed)
        {
            let l = c.life.get_or_insert_with(ChildLife::default);
            l.rekey_started = false;
            l.rekey_at = Some(now + delay);
        }
    }

    /// Our IKE SA rekey was refused with TEMPORARY_FAILURE: try again
    /// later ([`retry_delay`]), unless the SA is being replaced anyway.
    pub(super) fn retry_ike_rekey_later(&mut self, now: Time, rng: &mut dyn RandomSource) {
        if self.replaced {
            return;
        }
        let delay = retry_delay(rng);
        let l = self.life.get_or_insert_with(IkeLife::default);
        l.rekey_at = Some(now + delay);
    }

    /// The CHILD_SAs and our queued requests about them, taken away: they
    /// move to the IKE SA that replaces this one (rekey, RFC 7296 2.8.2).
    /// A queued delete of a redundant CHILD_SA must go with it.
    pub fn take_children(&mut self) -> (Vec<ChildRef>, Vec<OwnRequest>) {
        let (requests, rest): (Vec<_>, Vec<_>) = self
            .pending
            .drain(..)
            .partition(OwnRequest::moves_with_children);
        self.pending = rest.into();
        (std::mem::take(&mut self.children), requests)
    }

    /// Sends the next queued request if the window is free (after
    /// requests were moved here, or any path that queued without sending).
    pub fn kick(
        &mut self,
        now: Time,
        conn: &Connection,
        cfg: &EngineConfig,
        rng: &mut dyn RandomSource,
        out: &mut Output,
    ) {
        if self.state == State::Established
            && self.outstanding.is_none()
            && !self.pending.is_empty()
        {
            let _ = self.pump(now, conn, cfg, rng, out);
        }
    }

    /// This SA lost an RFC 7296 2.8.2 collision: the peer deletes it; if
    /// it has not by `at`, we do.
    pub fn mark_redundant(&mut self, at: Time) {
        self.replaced = true;
        self.redundant_at = Some(at);
    }

    /// CHILD_SAs (and requests about them) moved here from another IKE SA.
    pub fn add_children(&mut self, (children, requests): (Vec<ChildRef>, Vec<OwnRequest>)) {
        self.children.extend(children);
        self.pending.extend(requests);
    }

    /// Reauthentication: the new IKE SA is up, this one is replaced and
    /// deleted (make-before-break).
    pub fn replace_by_reauth(
        &mut self,
        now: Time,
        conn: &Connection,
        cfg: &EngineConfig,
        rng: &mut dyn RandomSource,
        out: &mut Output,
    ) {
        if self.state != State::Established || self.replaced {
            return;
        }
        self.replaced = true;
        if !self.pending.contains(&OwnRequest::DeleteIke) {
            self.pending.push_back(OwnRequest::DeleteIke);
        }
        let _ = self.pump(now, conn, cfg, rng, out);
    }

    /// For the check for duplicates (`Engine::settle`): made by
    /// IKE_SA_INIT, established, not replaced, with a CHILD_SA; whether we
    /// initiated it, when its setup began and when it came up.
    pub fn setup_span(&self) -> Option<(bool, Time, Time)> {
        if !self.is_live() || self.children.is_empty() {
            return None;
        }
        Some((self.role == Role::Initiator, self.setup_began?, self.up_at?))
    }

    /// `request` is queued or in flight.
    pub fn has_pending(&self, request: OwnRequest) -> bool {
        self.in_flight == Some(request) || self.pending.contains(&request)
    }

    /// The peer showed it holds this SA at `since` or later (see
    /// `last_heard`).
    pub fn heard_since(&self, since: Time) -> bool {
        self.last_heard.is_some_and(|t| t >= since)
    }

    /// The lower of the two nonces of the exchange that made this SA.
    pub fn lowest_nonce(&self) -> &[u8] {
        self.ni.as_slice().min(self.nr.as_slice())
    }

    /// This SA and another of its connection with the peer were set up at
    /// once and this one lost (`Engine::settle_duplicates`): deleted now,
    /// with its CHILD_SAs, whoever initiated it.
    pub fn drop_duplicate(
        &mut self,
        now: Time,
        conn: &Connection,
        cfg: &EngineConfig,
        rng: &mut dyn RandomSource,
        out: &mut Output,
    ) {
        self.replace_by_reauth(now, conn, cfg, rng, out);
    }

    /// (Ni, Nr) of the exchange that created this SA.
    pub fn nonces(&self) -> (Vec<u8>, Vec<u8>) {
        (self.ni.clone(), self.nr.clone())
    }

    /// A rekey of this IKE SA is under way (ours outstanding or in its
    /// IKE_FOLLOWUP_KE exchanges, the peer's waiting for its follow-ups,
    /// or an RFC 7296 2.8.2 collision undecided): the SA that will hold
    /// the CHILD_SAs is not known yet. A reauthentication waits for it and
    /// then replaces that SA (`Engine::settle`).
    pub fn rekey_in_flight(&self) -> bool {
        self.ike_collision.is_some()
            || self.ike_rekey.is_some()
            || self
                .followup_i
                .as_ref()
                .is_some_and(followup::Initiator::is_ike)
            || self
                .followup_r
                .as_ref()
                .is_some_and(followup::Responder::is_ike)
    }

    /// Established (not dead, not half-open).
    pub fn is_established(&self) -> bool {
        self.state == State::Established
    }

    /// Gone or going: dead, or the SA failed.
    pub fn is_dead(&self) -> bool {
        self.state == State::Dead
    }

    /// The peer's current address (for a reauthentication towards it).
    pub fn remote(&self) -> SocketAddr {
        self.remote
    }
}

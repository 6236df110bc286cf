//! Inbound SA: ESP tunnel-mode decapsulation of bursts.
//!
//! `decap_burst` takes `&self`: every worker may decrypt packets of one SA
//! at once (one tunnel on every core, docs/multicore.md). The anti-replay
//! window is a [`SharedReplayWindow`]; counters and lifetime flags are
//! atomics written once per burst (a `fetch_add` per counter that changed),
//! never per packet.
//!
//! Order per packet: parse, SPI, lengths, replay *check* (cheap, before any
//! crypto), ICV verify + decrypt, trailer, inner packet, strip; then, per
//! up to 64 packets, the replay window *update* of the packets whose ICV
//! verified (RFC 4303 §3.4.3: only authenticated packets move the window).
//! A packet the update refuses (a duplicate decrypted meanwhile by another
//! worker, or twice in one burst) is dropped as `replayed`, whatever the
//! later steps said of it.

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering::Relaxed};
use std::sync::Arc;

use espgw_wire::PacketBuf;

use crate::config::{ConfigError, Encap, SaConfig};
use crate::crypto::{self, EspCipher};
use crate::lifetime::{Expiry, Limits};
use crate::outbound::ESP_HEADER;
use crate::outer::{locate_esp, locate_esp_fast};
use crate::shared_replay::SharedReplayWindow;
use crate::verdict::{DropCounts, DropReason, SaStats, Verdict};
use crate::{inner, trailer, Suite};

/// Packets per replay window update (the width of the masks it takes).
const CHUNK: usize = 64;

/// The receiving half of an ESP SA, shared by every worker (`Sync`).
pub struct InboundSa {
    suite: Suite,
    spi: u32,
    esn: bool,
    encap: Encap,
    cipher: Box<dyn EspCipher>,
    iv_len: usize,
    icv_len: usize,
    align: usize,
    limits: Limits,
    pub(crate) window: SharedReplayWindow,
    /// Counters and expiry flags: the one copy, updated per burst by
    /// whichever worker decrypted it, read by anyone.
    shared: Arc<InboundCounters>,
}

/// An inbound SA's counters, readable from any thread (a metrics scrape or
/// `espgw ctl stats` never waits for a worker) and kept by the control
/// plane after the SA itself is gone. Every worker adds its bursts' totals
/// (one `fetch_add` per counter that changed per burst); values only grow.
#[derive(Debug, Default)]
#[repr(align(64))]
pub struct InboundCounters {
    packets: AtomicU64,
    bytes: AtomicU64,
    drops: [AtomicU64; DropReason::COUNT],
    /// Highest authenticated sequence number (the window's top, raised
    /// per burst).
    highest: AtomicU64,
    /// [`Expiry`] bits reached so far.
    expiry: AtomicU8,
}

impl InboundCounters {
    /// Packets, bytes and drops as of the SA's last burst.
    pub fn stats(&self) -> SaStats {
        let mut s = SaStats {
            packets: self.packets.load(Relaxed),
            bytes: self.bytes.load(Relaxed),
            ..SaStats::default()
        };
        for r in DropReason::ALL {
            s.drops.add_n(r, self.drops[r.index()].load(Relaxed));
        }
        s
    }

    /// The highest authenticated sequence number (0: none yet).
    pub fn highest_seen(&self) -> u64 {
        self.highest.load(Relaxed)
    }

    /// Sets the highest number seen (tests standing in for a burst).
    pub fn set_highest_seen(&self, seq: u64) {
        self.highest.store(seq, Relaxed);
    }

    fn expiry(&self) -> Expiry {
        Expiry::from_bits(self.expiry.load(Relaxed))
    }

    /// Adds flags: a write only when one is new (flags only get added).
    fn raise(&self, e: Expiry) {
        if (self.expiry() | e) != self.expiry() {
            self.expiry.fetch_or(e.bits(), Relaxed);
        }
    }
}

impl core::fmt::Debug for InboundSa {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("InboundSa")
            .field("suite", &self.suite)
            .field("spi", &format_args!("{:#010x}", self.spi))
            .field("esn", &self.esn)
            .field("window", &self.window)
            .finish_non_exhaustive()
    }
}

/// One burst's state, local to the worker decrypting it.
struct Burst {
    /// Flags as of the burst's start plus those it reached.
    expiry: Expiry,
    /// The SA's totals when the burst started (other workers' bursts that
    /// finish meanwhile are not seen: the hard limits are exact on one
    /// worker and approximate by a burst per other worker, as outbound).
    packets_before: u64,
    bytes_before: u64,
    /// Packets whose ICV verified so far in this burst (the hard packet
    /// limit counts them before their replay update, to stay on the safe
    /// side).
    verified: u64,
    /// Inner bytes of the packets that got through so far.
    bytes: u64,
}

impl InboundSa {
    /// Validates `cfg`, expands the keys. `now` starts the seconds lifetimes.
    pub fn new(cfg: &SaConfig, now: u64) -> Result<Self, ConfigError> {
        cfg.validate()?;
        let cipher = crypto::new_cipher(cfg.suite, cfg.key.expose(), cfg.auth_key.expose())?;
        Self::with_cipher(cfg, cipher, now)
    }

    /// Like [`InboundSa::new`] with a given cipher; the keys in `cfg` are not used.
    pub fn with_cipher(
        cfg: &SaConfig,
        cipher: Box<dyn EspCipher>,
        now: u64,
    ) -> Result<Self, ConfigError> {
        cfg.validate()?;
        let suite = cfg.suite;
        Ok(InboundSa {
            suite,
            spi: cfg.spi,
            esn: cfg.esn,
            encap: cfg.encap,
            cipher,
            iv_len: suite.iv_len(),
            icv_len: suite.icv_len(),
            align: suite.block_align(),
            limits: Limits::new(&cfg.lifetimes, now),
            window: SharedReplayWindow::new(cfg.replay_window),
            shared: Arc::new(InboundCounters::default()),
        })
    }

    /// Continues after `highest_seen` as if every number up to it had been
    /// received (restoring persisted state after a restart, or tests near
    /// the 2^32 boundary): a packet captured before the restart is a
    /// replay after it. Only on a fresh SA, so the window can never move
    /// backwards.
    pub fn starting_after(mut self, highest_seen: u64) -> Self {
        if self.window.top() == 0 && highest_seen != 0 {
            self.window = SharedReplayWindow::restored(self.window.size() as u32, highest_seen);
            self.shared.highest.store(highest_seen, Relaxed);
        }
        self
    }

    /// This SA's counters and highest authenticated sequence number,
    /// readable from any thread (the control plane persists the number and
    /// reports the counters, also after the SA is gone).
    pub fn counters(&self) -> Arc<InboundCounters> {
        Arc::clone(&self.shared)
    }

    pub fn spi(&self) -> u32 {
        self.spi
    }

    pub fn suite(&self) -> Suite {
        self.suite
    }

    /// How this SA expects ESP to arrive (for the data plane's classifier).
    pub fn encap(&self) -> Encap {
        self.encap
    }

    /// The anti-replay state (highest authenticated sequence number, size).
    pub fn replay_window(&self) -> &SharedReplayWindow {
        &self.window
    }

    /// Starts the anti-replay window over (every number new again), for
    /// benchmarks that replay one pre-encrypted stream; never called by
    /// the gateway. Only while no other thread decrypts with this SA (see
    /// [`SharedReplayWindow::reset`]).
    #[doc(hidden)]
    pub fn reset_replay_window_for_bench(&self) {
        self.window.reset();
    }

    /// Counters so far (summed over every worker that decrypted for it).
    pub fn stats(&self) -> SaStats {
        self.shared.stats()
    }

    /// The limits reached by `now`, for the control plane to poll.
    pub fn expiry(&self, now: u64) -> Expiry {
        let e = self.shared.expiry() | self.limits.by_time(now);
        self.shared.raise(e);
        e
    }

    /// Decapsulates every packet of `pkts` in place: each holds an outer
    /// IPv4/IPv6 packet (no link-layer header) and becomes the inner packet
    /// when `verdicts[i]` is `Forward`. Returns the number forwarded. Any
    /// number of threads may call it at once on one SA.
    ///
    /// Panics if the two slices differ in length (a caller bug).
    pub fn decap_burst<B: PacketBuf>(
        &self,
        pkts: &mut [B],
        verdicts: &mut [Verdict],
        now: u64,
    ) -> usize {
        assert_eq!(pkts.len(), verdicts.len(), "one verdict per packet");
        let c = &*self.shared;
        let mut burst = Burst {
            expiry: c.expiry() | self.limits.by_time(now),
            packets_before: c.packets.load(Relaxed),
            bytes_before: c.bytes.load(Relaxed),
            verified: 0,
            bytes: 0,
        };
        let mut drops = DropCounts::default();
        let mut dropped = false;
        let (mut sent, mut bytes) = (0u64, 0u64);
        for (pkts, verdicts) in pkts.chunks_mut(CHUNK).zip(verdicts.chunks_mut(CHUNK)) {
            let mut seqs = [0u64; CHUNK];
            let mut verified = 0u64;
            // Authenticated but dropped later (trailer, ECN, byte limit):
            // counted after the update, which may make them replays.
            let mut late_drops = 0u64;
            for (i, (pkt, verdict)) in pkts.iter_mut().zip(verdicts.iter_mut()).enumerate() {
                let result = self.decap_one(pkt, &mut burst, &mut seqs[i]);
                let authentic = seqs[i] != 0;
                verified |= u64::from(authentic) << i;
                *verdict = match result {
                    Ok(()) => {
                        sent += 1;
                        bytes += pkt.len() as u64;
                        Verdict::Forward
                    }
                    Err(reason) => {
                        if authentic {
                            late_drops |= 1 << i;
                        } else {
                            drops.add(reason);
                            dropped = true;
                        }
                        Verdict::Drop(reason)
                    }
                };
            }
            if verified == 0 {
                continue;
            }
            let accepted = self.window.update_burst(&seqs[..pkts.len()], verified);
            // Refused by the window: rare (a duplicate), so the counts
            // taken above are corrected here rather than counted after.
            let mut refused = verified & !accepted;
            while refused != 0 {
                let i = refused.trailing_zeros() as usize;
                refused &= refused - 1;
                if verdicts[i].is_forward() {
                    sent -= 1;
                    bytes -= pkts[i].len() as u64;
                } else {
                    late_drops &= !(1 << i);
                }
                verdicts[i] = Verdict::Drop(DropReason::Replayed);
                drops.add(DropReason::Replayed);
                dropped = true;
            }
            while late_drops != 0 {
                let i = late_drops.trailing_zeros() as usize;
                late_drops &= late_drops - 1;
                if let Verdict::Drop(r) = verdicts[i] {
                    drops.add(r);
                    dropped = true;
                }
            }
        }
        self.publish(&mut burst, sent, bytes, dropped.then_some(&drops));
        sent as usize
    }

    /// Adds the burst's totals to the SA's counters: one `fetch_add` per
    /// counter that changed, the top's copy only when it moved, the expiry
    /// flags only when one is new.
    #[inline]
    fn publish(&self, burst: &mut Burst, sent: u64, bytes: u64, drops: Option<&DropCounts>) {
        let c = &*self.shared;
        if sent != 0 {
            let packets = c.packets.fetch_add(sent, Relaxed) + sent;
            let bytes = c.bytes.fetch_add(bytes, Relaxed) + bytes;
            burst.expiry |= self.limits.by_volume(packets, bytes);
            let top = self.window.top();
            if top > c.highest.load(Relaxed) {
                c.highest.fetch_max(top, Relaxed);
            }
        }
        if let Some(drops) = drops {
            for (r, n) in drops.iter() {
                if n != 0 {
                    c.drops[r.index()].fetch_add(n, Relaxed);
                }
            }
        }
        c.raise(burst.expiry);
    }

    /// Everything but the replay window update: `*verified_seq` is set to
    /// the packet's sequence number once its ICV verified (0 otherwise),
    /// whatever happens after.
    #[inline]
    fn decap_one<B: PacketBuf>(
        &self,
        pkt: &mut B,
        burst: &mut Burst,
        verified_seq: &mut u64,
    ) -> Result<(), DropReason> {
        if burst.expiry.is_hard() {
            return Err(DropReason::SaExpired);
        }
        let loc = match locate_esp_fast(pkt.data(), self.encap) {
            Some(loc) => loc,
            None => locate_esp(pkt.data(), self.encap)?,
        };
        if loc.spi != self.spi {
            return Err(DropReason::UnknownSpi);
        }
        let overhead = ESP_HEADER + self.iv_len + self.icv_len;
        let sealed_len = loc.len.checked_sub(overhead).ok_or(DropReason::Truncated)?;
        if sealed_len < 2 || sealed_len & (self.align - 1) != 0 {
            return Err(DropReason::Truncated);
        }

        let esp = &mut pkt.data_mut()[loc.offset..loc.offset + loc.len];
        let seq_lo = u32::from_be_bytes([esp[4], esp[5], esp[6], esp[7]]);
        // Against the top as it is now: another worker may raise it
        // meanwhile, which changes nothing for a number inside the window
        // of the newer top (the inference is the same for both), and a
        // number left of it is refused by the update anyway.
        let seq = if self.esn {
            self.window.infer_esn(seq_lo).ok_or(DropReason::Replayed)?
        } else {
            u64::from(seq_lo)
        };
        self.window.check(seq).map_err(|_| DropReason::Replayed)?;
        if burst.packets_before + burst.verified >= self.limits.hard_packets() {
            burst.expiry |= Expiry::HARD_PACKETS;
            return Err(DropReason::SaExpired);
        }
        self.cipher
            .open(esp, seq, self.esn)
            .map_err(|_| DropReason::IcvMismatch)?;
        // Authenticated: the window update follows for the whole chunk.
        *verified_seq = seq;
        burst.verified += 1;

        let payload_at = ESP_HEADER + self.iv_len;
        let plain = &esp[payload_at..payload_at + sealed_len];
        let (payload_len, next_header) = trailer::parse(plain)?;
        let inner_len = inner::checked_len(&plain[..payload_len], next_header)?;
        crate::ecn::decapsulate(loc.outer_ds, &mut esp[payload_at..payload_at + inner_len])?;
        if !self
            .limits
            .bytes_allow(burst.bytes_before + burst.bytes, inner_len as u64)
        {
            burst.expiry |= Expiry::HARD_BYTES;
            return Err(DropReason::SaExpired);
        }

        let inner_at = loc.offset + payload_at;
        let after_inner = pkt.len() - inner_at - inner_len;
        pkt.adj(inner_at).map_err(|_| DropReason::Truncated)?;
        pkt.trim(after_inner).map_err(|_| DropReason::Truncated)?;
        burst.bytes += inner_len as u64;
        Ok(())
    }
}

#[cfg(test)]
#[path = "inbound_tests.rs"]
mod tests;

//! Inbound SA: ESP tunnel-mode decapsulation of bursts.
//!
//! The replay window is mutable state, so `decap_burst` takes `&mut self`:
//! the data plane owns each inbound SA from one core (or locks it per burst).
//! Order per packet: parse, SPI, lengths, replay *check* (cheap, before any
//! crypto), ICV verify + decrypt, replay window *update* (only for
//! authenticated packets), trailer, inner packet, strip.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use espgw_wire::PacketBuf;

use crate::config::{ConfigError, Encap, SaConfig};
use crate::crypto::{self, EspCipher};
use crate::lifetime::{Expiry, Limits};
use crate::outbound::ESP_HEADER;
use crate::outer::locate_esp;
use crate::replay::ReplayWindow;
use crate::verdict::{DropReason, SaStats, Verdict};
use crate::{inner, trailer, Suite};

/// The receiving half of an ESP SA.
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
    pub(crate) window: ReplayWindow,
    expiry: Expiry,
    stats: SaStats,
    /// Counters and `window.top()` as of the end of the last burst, for
    /// other threads (metrics, the state keeper) without the SA's lock.
    shared: Arc<InboundCounters>,
}

/// An inbound SA's counters as of its last burst, readable from any thread
/// without the lock the data plane holds while it decrypts: a metrics
/// scrape or `espgw ctl stats` never waits for (or stalls) a worker. The
/// one writer is whoever holds the SA; values only grow.
#[derive(Debug, Default)]
pub struct InboundCounters {
    packets: AtomicU64,
    bytes: AtomicU64,
    drops: [AtomicU64; DropReason::COUNT],
    /// Highest authenticated sequence number.
    highest: AtomicU64,
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
            window: ReplayWindow::new(cfg.replay_window),
            expiry: Expiry::NONE,
            stats: SaStats::default(),
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
            self.window = ReplayWindow::restored(self.window.size() as u32, highest_seen);
            self.shared.highest.store(highest_seen, Relaxed);
        }
        self
    }

    /// This SA's counters and highest authenticated sequence number,
    /// readable from any thread without the lock that guards the SA (the
    /// control plane persists the number and reports the counters).
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
    pub fn replay_window(&self) -> &ReplayWindow {
        &self.window
    }

    pub fn stats(&self) -> SaStats {
        self.stats
    }

    /// The limits reached by `now`, for the control plane to poll.
    pub fn expiry(&mut self, now: u64) -> Expiry {
        self.expiry |= self.limits.by_time(now);
        self.expiry
    }

    /// Decapsulates every packet of `pkts` in place: each holds an outer
    /// IPv4/IPv6 packet (no link-layer header) and becomes the inner packet
    /// when `verdicts[i]` is `Forward`. Returns the number forwarded.
    ///
    /// Panics if the two slices differ in length (a caller bug).
    pub fn decap_burst<B: PacketBuf>(
        &mut self,
        pkts: &mut [B],
        verdicts: &mut [Verdict],
        now: u64,
    ) -> usize {
        assert_eq!(pkts.len(), verdicts.len(), "one verdict per packet");
        self.expiry |= self.limits.by_time(now);
        let mut sent = 0;
        let mut dropped = false;
        for (pkt, verdict) in pkts.iter_mut().zip(verdicts.iter_mut()) {
            *verdict = match self.decap_one(pkt) {
                Ok(()) => {
                    sent += 1;
                    Verdict::Forward
                }
                Err(reason) => {
                    self.stats.drops.add(reason);
                    dropped = true;
                    Verdict::Drop(reason)
                }
            };
        }
        self.expiry |= self.limits.by_volume(self.stats.packets, self.stats.bytes);
        self.publish(sent != 0, dropped);
        sent
    }

    /// Copies this burst's counters for other threads: plain stores (this
    /// thread is the one writer), three per burst that forwarded anything,
    /// the drop counters only after a burst with drops.
    #[inline]
    fn publish(&self, forwarded: bool, dropped: bool) {
        let c = &self.shared;
        if forwarded {
            c.packets.store(self.stats.packets, Relaxed);
            c.bytes.store(self.stats.bytes, Relaxed);
            c.highest.store(self.window.top(), Relaxed);
        }
        if dropped {
            for (r, n) in self.stats.drops.iter() {
                c.drops[r.index()].store(n, Relaxed);
            }
        }
    }

    #[inline]
    fn decap_one<B: PacketBuf>(&mut self, pkt: &mut B) -> Result<(), DropReason> {
        if self.expiry.is_hard() {
            return Err(DropReason::SaExpired);
        }
        let loc = locate_esp(pkt.data(), self.encap)?;
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
        let seq = if self.esn {
            self.window.infer_esn(seq_lo).ok_or(DropReason::Replayed)?
        } else {
            u64::from(seq_lo)
        };
        self.window.check(seq).map_err(|_| DropReason::Replayed)?;
        if self.stats.packets >= self.limits.hard_packets() {
            self.expiry |= Expiry::HARD_PACKETS;
            return Err(DropReason::SaExpired);
        }
        self.cipher
            .open(esp, seq, self.esn)
            .map_err(|_| DropReason::IcvMismatch)?;
        self.window.update(seq).map_err(|_| DropReason::Replayed)?;

        let payload_at = ESP_HEADER + self.iv_len;
        let plain = &esp[payload_at..payload_at + sealed_len];
        let (payload_len, next_header) = trailer::parse(plain)?;
        let inner_len = inner::checked_len(&plain[..payload_len], next_header)?;
        crate::ecn::decapsulate(loc.outer_ds, &mut esp[payload_at..payload_at + inner_len])?;
        if !self.limits.bytes_allow(self.stats.bytes, inner_len as u64) {
            self.expiry |= Expiry::HARD_BYTES;
            return Err(DropReason::SaExpired);
        }

        let inner_at = loc.offset + payload_at;
        let after_inner = pkt.len() - inner_at - inner_len;
        pkt.adj(inner_at).map_err(|_| DropReason::Truncated)?;
        pkt.trim(after_inner).map_err(|_| DropReason::Truncated)?;
        self.stats.packets += 1;
        self.stats.bytes += inner_len as u64;
        Ok(())
    }
}

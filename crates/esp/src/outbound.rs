//! Outbound SA: ESP tunnel-mode encapsulation of bursts, shared by workers.
//!
//! `OutboundSa` is `Sync` and takes `&self`: any number of worker cores can
//! encap through one SA at once. Per burst it does one atomic
//! read-modify-write for the sequence numbers (a compare-exchange loop that
//! saturates at the last usable number instead of wrapping) and one
//! `fetch_add` per counter that changed; nothing atomic happens per packet.
//!
//! Byte lifetimes are checked against the byte count read at the start of
//! the burst plus the burst's own bytes, so with several cores sharing an SA
//! the hard byte limit can be overshot by at most one burst per other core.
//! Sequence numbers (and so packet limits) are exact.

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering::Relaxed};

use espgw_wire::PacketBuf;

use crate::config::{ConfigError, SaConfig};
use crate::crypto::{self, EspCipher};
use crate::lifetime::{Expiry, Limits};
use crate::outer::{OuterTemplate, UdpChecksum};
use crate::verdict::{DropCounts, DropReason, SaStats, Verdict};
use crate::{inner, trailer, Suite};

/// SPI and sequence number (wire's ESP header).
pub(crate) const ESP_HEADER: usize = espgw_wire::esp::HEADER_LEN;
/// ESP next header of an inner IPv4 / IPv6 packet (tunnel mode).
const IPPROTO_IPIP: u8 = espgw_wire::ip_protocol::IPV4;
const IPPROTO_IPV6: u8 = espgw_wire::ip_protocol::IPV6;

/// Keeps a hot shared atomic on its own cache line so cores updating it do
/// not also invalidate the read-only SA fields next to it.
#[derive(Debug, Default)]
#[repr(align(64))]
struct CacheLine<T>(T);

#[derive(Debug)]
struct SeqState {
    /// Last sequence number handed out (0: none yet).
    last: AtomicU64,
    /// Highest number that may be handed out before the control plane
    /// persists a further reservation (`u64::MAX`: not persisted, no cap).
    /// Manually keyed AEAD SAs get a finite ceiling so that a restart can
    /// never send a number (an AEAD nonce) twice under the same key: the
    /// reservation is on disk before any number below it is used.
    ceiling: AtomicU64,
}

#[derive(Debug, Default)]
struct Counters {
    packets: AtomicU64,
    bytes: AtomicU64,
    drops: [AtomicU64; DropReason::COUNT],
    expiry: AtomicU8,
}

/// The sending half of an ESP SA.
pub struct OutboundSa {
    suite: Suite,
    spi: u32,
    esn: bool,
    cipher: Box<dyn EspCipher>,
    template: OuterTemplate,
    /// Outer headers + ESP header + IV: what is prepended.
    head_len: usize,
    icv_len: usize,
    align: usize,
    /// Last number the sequence space allows: 2^32-1 or 2^64-1.
    seq_space_end: u64,
    /// Last number this SA may use: `seq_space_end` or the hard packet limit.
    max_seq: u64,
    limits: Limits,
    /// Last sequence number handed out, and how far the numbers are
    /// reserved in persistent state (one cache line: `reserve` reads both).
    seq: CacheLine<SeqState>,
    counters: CacheLine<Counters>,
}

impl core::fmt::Debug for OutboundSa {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("OutboundSa")
            .field("suite", &self.suite)
            .field("spi", &format_args!("{:#010x}", self.spi))
            .field("esn", &self.esn)
            .field("last_seq", &self.last_sequence())
            .finish_non_exhaustive()
    }
}

impl OutboundSa {
    /// Validates `cfg`, expands the keys and precomputes the outer headers.
    /// `now` starts the seconds lifetimes.
    pub fn new(cfg: &SaConfig, now: u64) -> Result<Self, ConfigError> {
        cfg.validate()?;
        let cipher = crypto::new_cipher(cfg.suite, cfg.key.expose(), cfg.auth_key.expose())?;
        Self::with_cipher(cfg, cipher, now)
    }

    /// Like [`OutboundSa::new`] with a given cipher (another backend, or a test
    /// double); the keys in `cfg` are not used.
    pub fn with_cipher(
        cfg: &SaConfig,
        cipher: Box<dyn EspCipher>,
        now: u64,
    ) -> Result<Self, ConfigError> {
        cfg.validate()?;
        let suite = cfg.suite;
        let template = OuterTemplate::new(cfg.local, cfg.remote, cfg.encap);
        let limits = Limits::new(&cfg.lifetimes, now);
        let seq_space_end = if cfg.esn {
            u64::MAX
        } else {
            u64::from(u32::MAX)
        };
        Ok(OutboundSa {
            suite,
            spi: cfg.spi,
            esn: cfg.esn,
            cipher,
            head_len: template.len() + ESP_HEADER + suite.iv_len(),
            template,
            icv_len: suite.icv_len(),
            align: suite.block_align(),
            seq_space_end,
            max_seq: seq_space_end.min(limits.hard_packets()),
            limits,
            seq: CacheLine(SeqState {
                last: AtomicU64::new(0),
                ceiling: AtomicU64::new(u64::MAX),
            }),
            counters: CacheLine(Counters::default()),
        })
    }

    /// Continues a sequence after `last_used` (restoring state, or tests that
    /// start near the end of the sequence space). Only on a fresh SA, so it
    /// can never move the sequence backwards.
    pub fn starting_after(self, last_used: u64) -> Self {
        let fresh = self.last_sequence() == 0;
        if fresh {
            self.seq.0.last.store(last_used.min(self.max_seq), Relaxed);
        }
        self
    }

    /// Caps the numbers handed out at `ceiling` until [`Self::raise_ceiling`]
    /// moves it (persisted sequence reservations; see `SeqState::ceiling`).
    pub fn with_ceiling(self, ceiling: u64) -> Self {
        self.seq.0.ceiling.store(ceiling, Relaxed);
        self
    }

    /// The highest number that may be handed out now (`u64::MAX`: no cap).
    pub fn ceiling(&self) -> u64 {
        self.seq.0.ceiling.load(Relaxed)
    }

    /// Lets numbers up to `ceiling` be used, once the reservation is
    /// durable. Never lowers it.
    pub fn raise_ceiling(&self, ceiling: u64) {
        self.seq.0.ceiling.fetch_max(ceiling, Relaxed);
    }

    /// The last number this SA may ever use (sequence space or hard
    /// packet limit).
    pub fn max_sequence(&self) -> u64 {
        self.max_seq
    }

    /// ESP in UDP: the peer's UDP port this SA sends to; `None` for
    /// plain ESP.
    pub fn udp_remote_port(&self) -> Option<u16> {
        self.template.udp_remote_port()
    }

    pub fn spi(&self) -> u32 {
        self.spi
    }

    pub fn suite(&self) -> Suite {
        self.suite
    }

    /// The last sequence number handed out (0 before the first packet).
    pub fn last_sequence(&self) -> u64 {
        self.seq.0.last.load(Relaxed)
    }

    /// Bytes the outer packet adds to an inner packet of `inner_len` bytes:
    /// for MTU and PMTU decisions.
    pub fn overhead(&self, inner_len: usize) -> usize {
        self.head_len + trailer::pad_len(inner_len, self.align) + 2 + self.icv_len
    }

    /// Headroom every packet needs.
    pub fn headroom_needed(&self) -> usize {
        self.head_len
    }

    /// Tailroom a packet may need (longest padding + trailer + ICV).
    pub fn max_tailroom_needed(&self) -> usize {
        self.align - 1 + 2 + self.icv_len
    }

    /// Counters so far (summed over all cores using this SA).
    pub fn stats(&self) -> SaStats {
        let c = &self.counters.0;
        let mut drops = DropCounts::default();
        for r in DropReason::ALL {
            drops.add_n(r, c.drops[r.index()].load(Relaxed));
        }
        SaStats {
            packets: c.packets.load(Relaxed),
            bytes: c.bytes.load(Relaxed),
            drops,
        }
    }

    /// The limits reached by `now`, for the control plane to poll (it must
    /// poll even when no traffic flows, for the time limits).
    pub fn expiry(&self, now: u64) -> Expiry {
        let e = self.stored_expiry() | self.limits.by_time(now);
        self.store_expiry(e);
        e
    }

    fn stored_expiry(&self) -> Expiry {
        Expiry::from_bits(self.counters.0.expiry.load(Relaxed))
    }

    fn store_expiry(&self, e: Expiry) {
        if e != self.stored_expiry() {
            self.counters.0.expiry.fetch_or(e.bits(), Relaxed);
        }
    }

    /// Encapsulates every packet of `pkts` in place. Each packet holds an
    /// inner IPv4 or IPv6 packet (no link-layer header) and becomes the outer
    /// packet; `verdicts[i]` says whether `pkts[i]` is to be sent. Returns the
    /// number forwarded. `now` is the caller's monotonic clock in seconds.
    ///
    /// Panics if the two slices differ in length (a caller bug).
    pub fn encap_burst<B: PacketBuf>(
        &self,
        pkts: &mut [B],
        verdicts: &mut [Verdict],
        now: u64,
    ) -> usize {
        self.encap_burst_with(pkts, verdicts, now, UdpChecksum::Compute)
    }

    /// True when this SA's packets carry a UDP checksum over the whole
    /// packet (ESP in UDP over IPv6): the one case in which
    /// [`Self::encap_burst_with`]'s [`UdpChecksum`] matters.
    pub fn checksums_payload(&self) -> bool {
        self.template.needs_finish()
    }

    /// [`Self::encap_burst`], with the UDP checksum of ESP in UDP over IPv6
    /// computed here or only seeded for the NIC ([`UdpChecksum::Device`]:
    /// the caller must then ask the device for it on every forwarded
    /// packet: `PacketBuf::offload_udp_checksum`, IPv6, its 40-byte fixed
    /// header, for the SAs whose [`Self::checksums_payload`] is true).
    pub fn encap_burst_with<B: PacketBuf>(
        &self,
        pkts: &mut [B],
        verdicts: &mut [Verdict],
        now: u64,
        checksum: UdpChecksum,
    ) -> usize {
        assert_eq!(pkts.len(), verdicts.len(), "one verdict per packet");
        let mut expiry = self.stored_expiry() | self.limits.by_time(now);
        let mut drops = DropCounts::default();
        if expiry.is_hard() {
            verdicts.fill(Verdict::Drop(DropReason::SaExpired));
            drops.add_n(DropReason::SaExpired, pkts.len() as u64);
            self.publish(0, 0, &drops, expiry);
            return 0;
        }

        // Pass 1: which packets can be sent, so that sequence numbers are
        // reserved only for them and none is wasted.
        let mut wanted = 0u64;
        for (pkt, verdict) in pkts.iter_mut().zip(verdicts.iter_mut()) {
            *verdict = match self.prepare(pkt) {
                Ok(()) => {
                    wanted += 1;
                    Verdict::Forward
                }
                Err(reason) => Verdict::Drop(reason),
            };
        }

        let (mut seq, mut granted) = self.reserve(wanted);
        let bytes_before = self.counters.0.bytes.load(Relaxed);
        let mut bytes = bytes_before;
        let mut sent = 0u64;
        // Packets are built one by one but sealed in pairs (the first of a
        // pair waits here for the second), so a cipher that interleaves two
        // short packets in one pass gets them together.
        let mut unsealed: Option<(&mut B, u64)> = None;
        for (pkt, verdict) in pkts.iter_mut().zip(verdicts.iter_mut()) {
            if *verdict != Verdict::Forward {
                if let Verdict::Drop(reason) = *verdict {
                    drops.add(reason);
                }
                continue;
            }
            if granted == 0 {
                // Out of numbers for good, or only until the next
                // reservation is persisted.
                let reason = if self.last_sequence() >= self.max_seq {
                    expiry |= self.out_of_numbers();
                    DropReason::SaExpired
                } else {
                    DropReason::SeqNotReserved
                };
                *verdict = Verdict::Drop(reason);
                drops.add(reason);
                continue;
            }
            let len = pkt.len() as u64;
            if !self.limits.bytes_allow(bytes, len) {
                *verdict = Verdict::Drop(DropReason::SaExpired);
                drops.add(DropReason::SaExpired);
                expiry |= Expiry::HARD_BYTES;
            } else if self.build(pkt, seq) {
                bytes += len;
                sent += 1;
                match unsealed.take() {
                    None => unsealed = Some((pkt, seq)),
                    Some((first, first_seq)) => self.seal_two(first, first_seq, pkt, seq, checksum),
                }
            } else {
                *verdict = Verdict::Drop(DropReason::NoRoom);
                drops.add(DropReason::NoRoom);
            }
            // Wraps only past the last granted number, which is never used.
            seq = seq.wrapping_add(1);
            granted -= 1;
        }
        if let Some((pkt, seq)) = unsealed {
            self.seal_one(pkt, seq, checksum);
        }

        let last = self.last_sequence();
        expiry |= self.limits.by_volume(last, bytes);
        if last >= self.max_seq {
            expiry |= self.out_of_numbers();
        }
        self.publish(sent, bytes - bytes_before, &drops, expiry);
        sent as usize
    }

    /// Which flag explains that no sequence number is left.
    fn out_of_numbers(&self) -> Expiry {
        if self.max_seq == self.seq_space_end {
            Expiry::SEQUENCE_EXHAUSTED
        } else {
            Expiry::HARD_PACKETS
        }
    }

    /// Checks the inner packet and the buffer's room; trims link-layer
    /// padding past the inner packet's own length.
    #[inline]
    fn prepare<B: PacketBuf>(&self, pkt: &mut B) -> Result<(), DropReason> {
        let (_, inner_len) = inner::classify(pkt.data())?;
        let extra = pkt.len() - inner_len;
        if extra != 0 {
            pkt.trim(extra).map_err(|_| DropReason::BadInnerPacket)?;
        }
        let tail = trailer::pad_len(inner_len, self.align) + 2 + self.icv_len;
        let fits = pkt.headroom() >= self.head_len
            && pkt.tailroom() >= tail
            && self.head_len + inner_len + tail <= self.template.max_packet();
        if fits {
            Ok(())
        } else {
            Err(DropReason::NoRoom)
        }
    }

    /// Takes up to `n` sequence numbers: (first, how many). Saturates at
    /// `max_seq` and at the persisted ceiling, so the counter can never wrap
    /// and hand out a number twice, nor one that a restart could hand out
    /// again. A plain `fetch_add` could wrap the counter at 2^64 (ESN) and
    /// would leave it past the end for every later caller; the
    /// compare-exchange loop is still one successful atomic RMW per burst
    /// (it only retries when another core reserved in between).
    #[inline]
    fn reserve(&self, n: u64) -> (u64, u64) {
        if n == 0 {
            return (0, 0);
        }
        let max = self.max_seq.min(self.seq.0.ceiling.load(Relaxed));
        match self.seq.0.last.fetch_update(Relaxed, Relaxed, |last| {
            (last < max).then(|| last.saturating_add(n).min(max))
        }) {
            Ok(last) => (last + 1, n.min(max - last)),
            Err(_) => (0, 0),
        }
    }

    /// Builds the ESP packet around a prepared inner packet, all but the
    /// encryption ([`Self::seal_one`] / [`Self::seal_two`] follow). False
    /// when the buffer could not grow after all (a chained mbuf whose last
    /// segment lacks the tailroom `prepare` saw): the caller drops it as
    /// `no_room`.
    #[inline]
    fn build<B: PacketBuf>(&self, pkt: &mut B, seq: u64) -> bool {
        let inner_len = pkt.len();
        // RFC 6040 normal mode: the outer header carries the inner DSCP and
        // ECN. `prepare` checked that this is an IPv4 or IPv6 packet.
        let (next_header, ds) = match crate::ecn::version_and_ds(pkt.data()) {
            Some((4, ds)) => (IPPROTO_IPIP, ds),
            Some((_, ds)) => (IPPROTO_IPV6, ds),
            None => (IPPROTO_IPV6, 0),
        };
        let pad = trailer::pad_len(inner_len, self.align);
        // `prepare` checked the room, but a buffer may still refuse (the
        // trait promises nothing about segments): a counted drop, never a
        // panic and never a half-built packet on the wire.
        let grown =
            pkt.append(pad + 2 + self.icv_len).is_ok() && pkt.prepend(self.head_len).is_ok();
        if !grown {
            return false;
        }
        let data = pkt.data_mut();
        let trailer_at = self.head_len + inner_len;
        trailer::write(&mut data[trailer_at..trailer_at + pad + 2], next_header);
        let total = data.len();
        self.template.write(data, total, seq as u16, ds);
        let esp = &mut data[self.template.len()..];
        esp[0..4].copy_from_slice(&self.spi.to_be_bytes());
        esp[4..8].copy_from_slice(&(seq as u32).to_be_bytes());
        true
    }

    /// Encrypts a built packet and completes the outer headers that cover
    /// the ciphertext.
    #[inline]
    fn seal_one<B: PacketBuf>(&self, pkt: &mut B, seq: u64, checksum: UdpChecksum) {
        let data = pkt.data_mut();
        self.cipher
            .seal(&mut data[self.template.len()..], seq, self.esn);
        if self.template.needs_finish() {
            self.template.finish(data, checksum);
        }
    }

    /// [`Self::seal_one`] for two built packets, through
    /// [`EspCipher::seal_two`].
    #[inline]
    fn seal_two<B: PacketBuf>(
        &self,
        a: &mut B,
        seq_a: u64,
        b: &mut B,
        seq_b: u64,
        checksum: UdpChecksum,
    ) {
        let at = self.template.len();
        let (data_a, data_b) = (a.data_mut(), b.data_mut());
        self.cipher.seal_two(
            (&mut data_a[at..], seq_a),
            (&mut data_b[at..], seq_b),
            self.esn,
        );
        if self.template.needs_finish() {
            self.template.finish(data_a, checksum);
            self.template.finish(data_b, checksum);
        }
    }

    /// Adds a burst's totals to the shared counters: one atomic add per
    /// counter that changed.
    fn publish(&self, packets: u64, bytes: u64, drops: &DropCounts, expiry: Expiry) {
        let c = &self.counters.0;
        if packets != 0 {
            c.packets.fetch_add(packets, Relaxed);
        }
        if bytes != 0 {
            c.bytes.fetch_add(bytes, Relaxed);
        }
        for (reason, n) in drops.iter() {
            if n != 0 {
                c.drops[reason.index()].fetch_add(n, Relaxed);
            }
        }
        self.store_expiry(expiry);
    }
}

//! AES-GCM that sends short payloads to `espgw-aesgcm` (AES-NI and
//! PCLMULQDQ in one pass, built for packets) and long ones to a library
//! whose wide code wins from a measured length on: ring's fused VAES code
//! ([`FastGcm`], from [`SHORT_MAX_AES128`] / [`SHORT_MAX_AES256`] bytes),
//! or intel-ipsec-mb's 512-bit VAES kernels on an AVX-512 CPU
//! ([`FastGcmIpsecMb`], from [`IPSEC_MB_SHORT_MAX_AES128`] /
//! [`IPSEC_MB_SHORT_MAX_AES256`]); docs/crypto.md has the measurements. It
//! needs AES-NI, PCLMULQDQ and AVX: on a CPU without them [`SplitGcm`]
//! cannot be built, and the provider ([`super::provider::choose`]) picks
//! ring alone instead, so that a forced split never quietly turns into its
//! long half.

use espgw_aesgcm::AesGcm;

use super::aead::{AeadPrimitive, OpenError, SealInput, TAG_LEN};
use super::ipsec_mb_aead::IpsecMbAead;
use super::ring_aead::RingAead;
use super::Implementation;
use crate::Suite;

/// AES-128 payload regions shorter than this many bytes take the
/// short-packet code; the rest take ring. Measured with `cargo bench -p
/// espgw-aesgcm --bench short` (docs/crypto.md): where ring draws level.
pub const SHORT_MAX_AES128: usize = 384;
/// The same for AES-256, whose four extra rounds per block move the
/// crossover down.
pub const SHORT_MAX_AES256: usize = 256;
/// AES-128 payload regions shorter than this take the short-packet code
/// when the long half is intel-ipsec-mb: ours still wins at 96 bytes and
/// loses from 112 (benches/aead.rs with ESPGW_BENCH_SIZES on the AVX-512
/// machine, docs/crypto.md).
pub const IPSEC_MB_SHORT_MAX_AES128: usize = 112;
/// The same for AES-256: seal and open together, ours is ahead at 64
/// bytes, level at 80 and behind from 96.
pub const IPSEC_MB_SHORT_MAX_AES256: usize = 80;

/// The long-packet half of a [`SplitGcm`] and where it takes over.
pub trait LongGcm: AeadPrimitive {
    /// Payload regions shorter than this go to `espgw-aesgcm`.
    fn short_max(suite: Suite) -> usize;
}

impl LongGcm for RingAead {
    fn short_max(suite: Suite) -> usize {
        if suite == Suite::Aes128Gcm16 {
            SHORT_MAX_AES128
        } else {
            SHORT_MAX_AES256
        }
    }
}

impl LongGcm for IpsecMbAead {
    fn short_max(suite: Suite) -> usize {
        if suite == Suite::Aes128Gcm16 {
            IPSEC_MB_SHORT_MAX_AES128
        } else {
            IPSEC_MB_SHORT_MAX_AES256
        }
    }
}

/// `espgw-aesgcm` for short payloads, ring for long ones.
pub type FastGcm = SplitGcm<RingAead>;
/// `espgw-aesgcm` for short payloads, intel-ipsec-mb for long ones.
pub type FastGcmIpsecMb = SplitGcm<IpsecMbAead>;

/// An AES-128-GCM or AES-256-GCM key, expanded for both implementations.
pub struct SplitGcm<L> {
    long: L,
    short: AesGcm,
    short_max: usize,
}

impl<L: LongGcm> SplitGcm<L> {
    /// The short-packet implementation if it takes `len` bytes; `None`:
    /// the long half does. The one routing decision, shared by `seal`, `open` and
    /// `implementation`.
    fn short_for(&self, len: usize) -> Option<&AesGcm> {
        (len < self.short_max).then_some(&self.short)
    }
}

impl<L: LongGcm> AeadPrimitive for SplitGcm<L> {
    /// `None` also on a CPU without AES-NI, PCLMULQDQ or AVX.
    fn new(suite: Suite, key: &[u8]) -> Option<Self> {
        if !matches!(suite, Suite::Aes128Gcm16 | Suite::Aes256Gcm16) {
            return None;
        }
        // The long half checks the key length against the suite; AesGcm
        // accepts both lengths, so it agrees whenever the long half does.
        let long = L::new(suite, key)?;
        Some(Self {
            long,
            short: AesGcm::new(key)?,
            short_max: L::short_max(suite),
        })
    }

    fn seal(&self, nonce: &[u8; 12], aad: &[u8], buf: &mut [u8]) -> [u8; TAG_LEN] {
        match self.short_for(buf.len()) {
            Some(short) => short.seal(nonce, aad, buf),
            None => self.long.seal(nonce, aad, buf),
        }
    }

    fn open(
        &self,
        nonce: &[u8; 12],
        aad: &[u8],
        buf: &mut [u8],
        tag: &[u8; TAG_LEN],
    ) -> Result<(), OpenError> {
        match self.short_for(buf.len()) {
            Some(short) => short.open(nonce, aad, buf, tag).map_err(|_| OpenError),
            None => self.long.open(nonce, aad, buf, tag),
        }
    }

    fn seal_into(&self, nonce: &[u8; 12], aad: &[u8], buf: &mut [u8], tag: &mut [u8; TAG_LEN]) {
        match self.short_for(buf.len()) {
            Some(short) => *tag = short.seal(nonce, aad, buf),
            None => self.long.seal_into(nonce, aad, buf, tag),
        }
    }

    /// Two short payloads go through `espgw-aesgcm`'s interleaved pass
    /// (`AesGcm::seal_two`, which itself seals one at a time above its
    /// length limit); anything else is routed packet by packet.
    fn seal_two_into(&self, a: SealInput<'_>, b: SealInput<'_>, tags: [&mut [u8; TAG_LEN]; 2]) {
        let [a_out, b_out] = tags;
        match (self.short_for(a.2.len()), self.short_for(b.2.len())) {
            (Some(short), Some(_)) => [*a_out, *b_out] = short.seal_two(a, b),
            _ => {
                self.seal_into(a.0, a.1, a.2, a_out);
                self.seal_into(b.0, b.1, b.2, b_out);
            }
        }
    }

    fn implementation(&self, payload_len: usize) -> Implementation {
        match self.short_for(payload_len) {
            Some(_) => Implementation::EspgwAesGcm,
            None => self.long.implementation(payload_len),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_aes_gcm_suites() {
        assert!(FastGcm::new(Suite::Aes128Gcm16, &[1; 16]).is_some());
        assert!(FastGcm::new(Suite::Aes256Gcm16, &[1; 32]).is_some());
        assert!(FastGcm::new(Suite::Aes128Gcm16, &[1; 32]).is_none());
        assert!(FastGcm::new(Suite::Aes256Gcm16, &[1; 16]).is_none());
        assert!(FastGcm::new(Suite::Chacha20Poly1305, &[1; 32]).is_none());
        assert!(FastGcmIpsecMb::new(Suite::Aes128Gcm16, &[1; 16]).is_some());
        assert!(FastGcmIpsecMb::new(Suite::Aes256Gcm16, &[1; 16]).is_none());
        assert!(FastGcmIpsecMb::new(Suite::Chacha20Poly1305, &[1; 32]).is_none());
    }

    /// Both sides of the threshold give ring's answer, and each side opens
    /// what the other sealed.
    #[test]
    fn agrees_with_ring_around_the_threshold() {
        agrees_with_ring_around_the_threshold_for::<RingAead>();
        agrees_with_ring_around_the_threshold_for::<IpsecMbAead>();
    }

    fn agrees_with_ring_around_the_threshold_for<L: LongGcm>() {
        for (suite, key_len) in [(Suite::Aes128Gcm16, 16), (Suite::Aes256Gcm16, 32)] {
            let key: Vec<u8> = (0..key_len as u8).collect();
            let fast = SplitGcm::<L>::new(suite, &key)
                .expect("this machine has AES-NI, PCLMULQDQ and AVX");
            let ring = RingAead::new(suite, &key).unwrap();
            let nonce = [9u8; 12];
            let aad = [0x11u8; 12];
            let max = fast.short_max;
            for len in [0, 1, 15, 16, 68, max - 1, max, max + 1, 1500] {
                let pt: Vec<u8> = (0..len).map(|i| i as u8).collect();
                let (mut a, mut b) = (pt.clone(), pt.clone());
                let tag = fast.seal(&nonce, &aad, &mut a);
                assert_eq!(tag, ring.seal(&nonce, &aad, &mut b), "{suite} {len}");
                assert_eq!(a, b, "{suite} {len}");
                fast.open(&nonce, &aad, &mut b, &tag).unwrap();
                assert_eq!(b, pt, "{suite} {len}");
                let mut bad = tag;
                bad[0] ^= 1;
                assert!(
                    fast.open(&nonce, &aad, &mut a, &bad).is_err(),
                    "{suite} {len}"
                );
            }
        }
    }
}

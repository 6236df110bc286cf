//! AES-GCM (RFC 4106) and ChaCha20-Poly1305 (RFC 7634) ESP, generic over the
//! AEAD primitive so backends can be measured against each other
//! (benches/aead.rs) and run through the same Wycheproof vectors.
//!
//! Nonce = 4-byte salt || 8-byte IV; the IV sent is the 64-bit sequence
//! number, big endian, so a nonce never repeats under one key as long as the
//! sequence number does not wrap (the SA hard-expires before it does).

use zeroize::Zeroize;

use super::layout::{aead_aad, split_esp, write_seq_lo};
use super::{EspCipher, IcvMismatch, Implementation, KeyError};
use crate::Suite;

/// Bytes of the AEAD tag, which is the ESP ICV for every AEAD suite here.
pub const TAG_LEN: usize = 16;
/// Bytes of the IV carried in each packet.
const IV_LEN: usize = 8;

/// The authentication failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenError;

/// A 96-bit-nonce, 128-bit-tag AEAD keyed once: the primitive under
/// [`EspAead`].
pub trait AeadPrimitive: Send + Sync + Sized {
    /// Keys the primitive for `suite` (an AEAD suite); `None` if `key` (the
    /// cipher key, without salt) has the wrong length or `suite` is not one
    /// this backend has.
    fn new(suite: Suite, key: &[u8]) -> Option<Self>;
    /// Encrypts `buf` in place and returns the tag.
    fn seal(&self, nonce: &[u8; 12], aad: &[u8], buf: &mut [u8]) -> [u8; TAG_LEN];
    /// Verifies `tag` over `aad` and the ciphertext in `buf`, then decrypts
    /// `buf` in place. On error `buf` must not be trusted.
    fn open(
        &self,
        nonce: &[u8; 12],
        aad: &[u8],
        buf: &mut [u8],
        tag: &[u8; TAG_LEN],
    ) -> Result<(), OpenError>;
    /// The code that handles `payload_len` bytes (the routing `seal` and
    /// `open` take).
    fn implementation(&self, payload_len: usize) -> Implementation;
    /// [`AeadPrimitive::seal`] writing the tag to `tag` ([`EspAead`]: the
    /// packet's ICV). A backend whose library writes the tag through a
    /// pointer overrides it and hands the library `tag`: the tag then goes
    /// to the packet with no copies after the call, which measured faster
    /// (docs/crypto.md, "The tag written where it belongs").
    fn seal_into(&self, nonce: &[u8; 12], aad: &[u8], buf: &mut [u8], tag: &mut [u8; TAG_LEN]) {
        *tag = self.seal(nonce, aad, buf);
    }
    /// Seals two packets under this key, each `(nonce, aad, buf)`, their
    /// tags written to `tags`: the same result as two
    /// [`AeadPrimitive::seal_into`] calls. A backend that can interleave
    /// two short packets' AES and GHASH overrides it.
    fn seal_two_into(&self, a: SealInput<'_>, b: SealInput<'_>, tags: [&mut [u8; TAG_LEN]; 2]) {
        let [a_out, b_out] = tags;
        self.seal_into(a.0, a.1, a.2, a_out);
        self.seal_into(b.0, b.1, b.2, b_out);
    }
}

/// One packet of [`AeadPrimitive::seal_two_into`]: nonce, AAD, buffer.
pub type SealInput<'a> = (&'a [u8; 12], &'a [u8], &'a mut [u8]);

/// One SA direction of an AEAD suite.
pub struct EspAead<P: AeadPrimitive> {
    suite: Suite,
    aead: P,
    salt: [u8; 4],
}

impl<P: AeadPrimitive> EspAead<P> {
    /// `keymat` = cipher key || 4-byte salt (RFC 4106 §8.1, RFC 7634 §4).
    pub fn new(suite: Suite, keymat: &[u8]) -> Result<Self, KeyError> {
        let bad_len = || KeyError {
            suite,
            what: "key",
            expected: suite.key_len(),
            got: keymat.len(),
        };
        if !suite.is_aead() || keymat.len() != suite.key_len() {
            return Err(bad_len());
        }
        let (cipher_key, salt) = keymat.split_at(keymat.len() - 4);
        let aead = P::new(suite, cipher_key).ok_or_else(bad_len)?;
        let mut salt_bytes = [0u8; 4];
        salt_bytes.copy_from_slice(salt);
        Ok(Self {
            suite,
            aead,
            salt: salt_bytes,
        })
    }

    /// salt || IV, written in the two stores the ciphers' loads are
    /// forwarded from (`espgw_aesgcm::esp_nonce`: built this way, a nonce
    /// read right after it is written costs no store-forwarding stall).
    #[inline]
    fn nonce(&self, iv: &[u8; IV_LEN]) -> [u8; 12] {
        espgw_aesgcm::esp_nonce(self.salt, u64::from_be_bytes(*iv))
    }

    /// Seals with an explicit IV instead of the sequence number. Only for
    /// known-answer tests whose published IV differs from their sequence
    /// number: reusing an IV under one key destroys GCM's security.
    pub fn seal_with_iv(&self, esp: &mut [u8], seq: u64, esn: bool, iv: [u8; IV_LEN]) {
        let parts =
            split_esp(esp, IV_LEN, TAG_LEN).expect("ESP packet shorter than header + IV + ICV");
        write_seq_lo(parts.header, seq);
        parts.iv.copy_from_slice(&iv);
        let (aad, aad_len) = aead_aad(parts.header, seq, esn);
        let icv: &mut [u8; TAG_LEN] = parts.icv.try_into().expect("split_esp: ICV of TAG_LEN");
        self.aead
            .seal_into(&self.nonce(&iv), &aad[..aad_len], parts.payload, icv);
    }
}

impl<P: AeadPrimitive> EspCipher for EspAead<P> {
    fn suite(&self) -> Suite {
        self.suite
    }

    fn seal(&self, esp: &mut [u8], seq: u64, esn: bool) {
        self.seal_with_iv(esp, seq, esn, seq.to_be_bytes());
    }

    fn seal_two(&self, a: (&mut [u8], u64), b: (&mut [u8], u64), esn: bool) {
        let (Some(pa), Some(pb)) = (
            split_esp(a.0, IV_LEN, TAG_LEN),
            split_esp(b.0, IV_LEN, TAG_LEN),
        ) else {
            panic!("ESP packet shorter than header + IV + ICV");
        };
        let (ivs, nonces) = (
            [a.1, b.1].map(u64::to_be_bytes),
            [a.1, b.1].map(|s| self.nonce(&s.to_be_bytes())),
        );
        write_seq_lo(pa.header, a.1);
        write_seq_lo(pb.header, b.1);
        pa.iv.copy_from_slice(&ivs[0]);
        pb.iv.copy_from_slice(&ivs[1]);
        let (aad_a, len_a) = aead_aad(pa.header, a.1, esn);
        let (aad_b, len_b) = aead_aad(pb.header, b.1, esn);
        let icv_a: &mut [u8; TAG_LEN] = pa.icv.try_into().expect("split_esp: ICV of TAG_LEN");
        let icv_b: &mut [u8; TAG_LEN] = pb.icv.try_into().expect("split_esp: ICV of TAG_LEN");
        self.aead.seal_two_into(
            (&nonces[0], &aad_a[..len_a], pa.payload),
            (&nonces[1], &aad_b[..len_b], pb.payload),
            [icv_a, icv_b],
        );
    }

    fn open(&self, esp: &mut [u8], seq: u64, esn: bool) -> Result<(), IcvMismatch> {
        let parts = split_esp(esp, IV_LEN, TAG_LEN).ok_or(IcvMismatch)?;
        let iv: [u8; IV_LEN] = (&*parts.iv).try_into().map_err(|_| IcvMismatch)?;
        let tag: [u8; TAG_LEN] = (&*parts.icv).try_into().map_err(|_| IcvMismatch)?;
        let (aad, aad_len) = aead_aad(parts.header, seq, esn);
        self.aead
            .open(&self.nonce(&iv), &aad[..aad_len], parts.payload, &tag)
            .map_err(|_| IcvMismatch)
    }

    fn implementation(&self, payload_len: usize) -> Option<Implementation> {
        Some(self.aead.implementation(payload_len))
    }
}

impl<P: AeadPrimitive> Drop for EspAead<P> {
    fn drop(&mut self) {
        self.salt.zeroize();
    }
}

impl<P: AeadPrimitive> core::fmt::Debug for EspAead<P> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("EspAead")
            .field("suite", &self.suite)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crypto::ring_aead::RingAead;

    #[test]
    fn debug_shows_the_suite_and_no_key_material() {
        let keymat = [0xabu8; 20];
        let esp = EspAead::<RingAead>::new(Suite::Aes128Gcm16, &keymat).unwrap();
        let shown = format!("{esp:?}");
        assert!(shown.contains("Aes128Gcm16"), "{shown}");
        assert!(!shown.to_lowercase().contains("ab"), "{shown}");
        assert!(!shown.contains("171"), "{shown}");
    }

    #[test]
    fn non_aead_suites_and_wrong_lengths_are_refused() {
        assert!(EspAead::<RingAead>::new(Suite::Aes128Sha256, &[0; 16]).is_err());
        let err = EspAead::<RingAead>::new(Suite::Aes256Gcm16, &[0; 32]).unwrap_err();
        assert_eq!((err.expected, err.got), (36, 32));
    }
}

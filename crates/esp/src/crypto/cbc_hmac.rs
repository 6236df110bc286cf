//! AES-CBC (RFC 3602) with HMAC integrity (RFC 4868, RFC 2404) as one ESP
//! transform, generic over the CBC and HMAC backends so they can be measured
//! against each other (benches/aead.rs).
//!
//! # Where the IV comes from
//!
//! CBC needs an IV the attacker cannot predict before the packet is sent
//! (RFC 3602 §3; a predictable IV lets a chosen-plaintext attacker test
//! guesses, as in BEAST). The IV here is the 64-bit sequence number encrypted
//! with AES in ECB mode under a separate IV key drawn from the OS RNG when the
//! SA is created: the approach of NIST SP 800-38A Appendix C (encrypt a nonce
//! under the forward cipher). Because the sequence number never repeats under
//! one SA (it hard-expires before it wraps), every IV is distinct, and without
//! the IV key it looks random. This keeps `seal(&self)` free of mutable RNG
//! state, so many cores can seal for one SA at once, and costs one AES block
//! per packet instead of a syscall or a locked CSPRNG. The receiver reads the
//! IV from the packet, so the IV key never leaves this process and the peer
//! needs nothing from it.

use subtle::ConstantTimeEq;
use zeroize::Zeroizing;

use super::integrity::Integrity;
use super::layout::{esn_high_bits, split_esp, write_seq_lo};
use super::{EspCipher, IcvMismatch, Implementation, KeyError};
use crate::Suite;

/// Bytes of the CBC IV and of one AES block.
const BLOCK: usize = 16;

/// Whether `len` is whole AES blocks. (`usize::is_multiple_of` would need
/// Rust 1.87; the workspace promises 1.80.)
#[allow(clippy::manual_is_multiple_of)]
fn whole_blocks(len: usize) -> bool {
    len % BLOCK == 0
}
/// Longest ICV of any integrity transform (HMAC-SHA-256 before truncation).
const MAX_MAC: usize = 32;

/// AES in CBC mode over whole blocks, keyed once.
pub trait CbcCipher: Send + Sync + Sized {
    /// Bytes of AES key.
    const KEY_LEN: usize;
    /// Whose AES this is (the HMAC is always RustCrypto's in the suites
    /// `new_cipher` builds).
    const IMPLEMENTATION: Implementation;
    /// Keys the cipher; `None` if `key` is not `KEY_LEN` bytes long.
    fn new(key: &[u8]) -> Option<Self>;
    /// Encrypts `buf` (a multiple of 16 bytes) in place.
    fn encrypt(&self, iv: &[u8; 16], buf: &mut [u8]);
    /// Decrypts `buf` (a multiple of 16 bytes) in place.
    fn decrypt(&self, iv: &[u8; 16], buf: &mut [u8]);
}

/// One SA direction of an AES-CBC + HMAC suite.
pub struct CbcHmac<C: CbcCipher, M: Integrity> {
    suite: Suite,
    cipher: C,
    /// Encrypts sequence numbers into IVs (see the module documentation).
    iv_cipher: C,
    mac: M,
}

impl<C: CbcCipher, M: Integrity> CbcHmac<C, M> {
    /// Keys the suite and draws a fresh IV key from the OS RNG.
    pub fn new(suite: Suite, key: &[u8], auth_key: &[u8]) -> Result<Self, KeyError> {
        let err = |what, expected, got| KeyError {
            suite,
            what,
            expected,
            got,
        };
        debug_assert_eq!(suite.icv_len(), M::ICV_LEN, "suite and MAC disagree");
        let cipher = C::new(key).ok_or_else(|| err("key", C::KEY_LEN, key.len()))?;
        let mac = M::new(auth_key).ok_or_else(|| err("auth_key", M::KEY_LEN, auth_key.len()))?;
        let mut iv_key = Zeroizing::new([0u8; 32]);
        // The OS RNG fails only on a broken system (no getrandom(2), no
        // /dev/urandom); there is no safe way to go on without it.
        getrandom::getrandom(&mut iv_key[..C::KEY_LEN]).expect("OS random number generator");
        let iv_cipher = C::new(&iv_key[..C::KEY_LEN]).expect("IV key has the cipher's length");
        Ok(Self {
            suite,
            cipher,
            iv_cipher,
            mac,
        })
    }

    /// The IV sent with sequence number `seq`: AES(iv_key, seq || 0^64).
    pub fn iv_for(&self, seq: u64) -> [u8; 16] {
        let mut block = [0u8; BLOCK];
        block[..8].copy_from_slice(&seq.to_be_bytes());
        // CBC of one block under a zero IV is ECB.
        self.iv_cipher.encrypt(&[0u8; BLOCK], &mut block);
        block
    }

    /// Seals with an explicit IV. For known-answer tests with a published
    /// IV; traffic goes through [`EspCipher::seal`].
    pub fn seal_with_iv(&self, esp: &mut [u8], seq: u64, esn: bool, iv: &[u8; 16]) {
        let parts =
            split_esp(esp, BLOCK, M::ICV_LEN).expect("ESP packet shorter than header + IV + ICV");
        assert!(
            whole_blocks(parts.payload.len()),
            "CBC payload must be padded to 16 bytes"
        );
        write_seq_lo(parts.header, seq);
        parts.iv.copy_from_slice(iv);
        self.cipher.encrypt(iv, parts.payload);
        let (hi, hi_len) = esn_high_bits(seq, esn);
        self.mac.icv(
            &[parts.header, parts.iv, parts.payload, &hi[..hi_len]],
            parts.icv,
        );
    }
}

impl<C: CbcCipher, M: Integrity> EspCipher for CbcHmac<C, M> {
    fn suite(&self) -> Suite {
        self.suite
    }

    fn seal(&self, esp: &mut [u8], seq: u64, esn: bool) {
        let iv = self.iv_for(seq);
        self.seal_with_iv(esp, seq, esn, &iv);
    }

    fn open(&self, esp: &mut [u8], seq: u64, esn: bool) -> Result<(), IcvMismatch> {
        let parts = split_esp(esp, BLOCK, M::ICV_LEN).ok_or(IcvMismatch)?;
        if !whole_blocks(parts.payload.len()) {
            return Err(IcvMismatch);
        }
        let (hi, hi_len) = esn_high_bits(seq, esn);
        let mut expected = [0u8; MAX_MAC];
        let expected = &mut expected[..M::ICV_LEN];
        self.mac.icv(
            &[parts.header, parts.iv, parts.payload, &hi[..hi_len]],
            expected,
        );
        // Constant time, and before any decryption (RFC 4303 §3.4.4.1).
        if !bool::from(expected.ct_eq(parts.icv)) {
            return Err(IcvMismatch);
        }
        let iv: [u8; BLOCK] = (&*parts.iv).try_into().map_err(|_| IcvMismatch)?;
        self.cipher.decrypt(&iv, parts.payload);
        Ok(())
    }

    fn implementation(&self, _payload_len: usize) -> Option<Implementation> {
        Some(C::IMPLEMENTATION)
    }
}

impl<C: CbcCipher, M: Integrity> core::fmt::Debug for CbcHmac<C, M> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("CbcHmac")
            .field("suite", &self.suite)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crypto::integrity::RustCryptoHmacSha256;
    use crate::crypto::rustcrypto_cbc::Aes128Cbc;

    type Cipher = CbcHmac<Aes128Cbc, RustCryptoHmacSha256>;

    #[test]
    fn debug_shows_the_suite_and_no_key_material() {
        let c = Cipher::new(Suite::Aes128Sha256, &[0xab; 16], &[0xcd; 32]).unwrap();
        let shown = format!("{c:?}");
        assert!(shown.contains("Aes128Sha256"), "{shown}");
        for secret in ["ab", "cd", "171", "205"] {
            assert!(!shown.to_lowercase().contains(secret), "{shown}");
        }
    }

    #[test]
    fn iv_is_an_aes_permutation_of_the_sequence_number() {
        let c = Cipher::new(Suite::Aes128Sha256, &[1; 16], &[2; 32]).unwrap();
        let ivs: std::collections::HashSet<[u8; 16]> = (0..1000u64).map(|s| c.iv_for(s)).collect();
        assert_eq!(ivs.len(), 1000);
        assert_eq!(c.iv_for(7), c.iv_for(7), "deterministic per SA");
    }
}

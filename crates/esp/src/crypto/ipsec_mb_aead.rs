//! AES-GCM and ChaCha20-Poly1305 from intel-ipsec-mb (`dpdk/ipsec-mb`,
//! the FFI crate). AES-GCM goes through the library's direct GCM API, whose
//! 512-bit VAES + VPCLMULQDQ code is what DPDK's aesni_gcm PMD runs on an
//! AVX-512 CPU; ChaCha20-Poly1305 through its job API, one job per packet
//! on the thread's own job manager (the direct ChaCha API is much slower
//! per call in 1.3; docs/crypto.md). Key material is zeroized on drop (by
//! the FFI crate).

use ipsec_mb::{ChachaKey, GcmKey};

use super::aead::{AeadPrimitive, OpenError, TAG_LEN};
use super::Implementation;
use crate::Suite;

/// An intel-ipsec-mb AES-128-GCM, AES-256-GCM or ChaCha20-Poly1305 key.
pub struct IpsecMbAead {
    key: Key,
}

enum Key {
    Gcm(GcmKey),
    Chacha(ChachaKey),
}

impl IpsecMbAead {
    /// Whether the library runs its 512-bit VAES kernels on this CPU (the
    /// only case the provider picks it for).
    pub fn has_vaes_avx512() -> bool {
        ipsec_mb::Library::get().is_some_and(|l| l.has_vaes_avx512())
    }
}

impl AeadPrimitive for IpsecMbAead {
    /// `None` for another suite, a wrong key length, or if the library
    /// could not initialise.
    fn new(suite: Suite, key: &[u8]) -> Option<Self> {
        let want = match suite {
            Suite::Aes128Gcm16 => 16,
            Suite::Aes256Gcm16 | Suite::Chacha20Poly1305 => 32,
            _ => return None,
        };
        if key.len() != want {
            return None;
        }
        let key = if suite == Suite::Chacha20Poly1305 {
            Key::Chacha(ChachaKey::new(key)?)
        } else {
            Key::Gcm(GcmKey::new(key)?)
        };
        Some(Self { key })
    }

    fn seal(&self, nonce: &[u8; 12], aad: &[u8], buf: &mut [u8]) -> [u8; TAG_LEN] {
        match &self.key {
            Key::Gcm(k) => k.seal(nonce, aad, buf),
            Key::Chacha(k) => k.seal(nonce, aad, buf),
        }
    }

    fn seal_into(&self, nonce: &[u8; 12], aad: &[u8], buf: &mut [u8], tag: &mut [u8; TAG_LEN]) {
        match &self.key {
            Key::Gcm(k) => k.seal_into(nonce, aad, buf, tag),
            Key::Chacha(k) => k.seal_into(nonce, aad, buf, tag),
        }
    }

    fn open(
        &self,
        nonce: &[u8; 12],
        aad: &[u8],
        buf: &mut [u8],
        tag: &[u8; TAG_LEN],
    ) -> Result<(), OpenError> {
        match &self.key {
            Key::Gcm(k) => k.open(nonce, aad, buf, tag).map_err(|_| OpenError),
            Key::Chacha(k) => k.open(nonce, aad, buf, tag).map_err(|_| OpenError),
        }
    }

    fn implementation(&self, _payload_len: usize) -> Implementation {
        Implementation::IpsecMb
    }
}

//! AES-GCM from intel-ipsec-mb (`dpdk/ipsec-mb`, the FFI crate): the
//! library's direct GCM API, whose 512-bit VAES + VPCLMULQDQ code is what
//! DPDK's aesni_gcm PMD runs on an AVX-512 CPU. Key schedule and powers of
//! H are zeroized on drop (by the FFI crate).

use ipsec_mb::GcmKey;

use super::aead::{AeadPrimitive, OpenError, TAG_LEN};
use super::Implementation;
use crate::Suite;

/// An intel-ipsec-mb AES-128-GCM or AES-256-GCM key.
pub struct IpsecMbAead {
    key: GcmKey,
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
            Suite::Aes256Gcm16 => 32,
            _ => return None,
        };
        if key.len() != want {
            return None;
        }
        Some(Self {
            key: GcmKey::new(key)?,
        })
    }

    fn seal(&self, nonce: &[u8; 12], aad: &[u8], buf: &mut [u8]) -> [u8; TAG_LEN] {
        self.key.seal(nonce, aad, buf)
    }

    fn open(
        &self,
        nonce: &[u8; 12],
        aad: &[u8],
        buf: &mut [u8],
        tag: &[u8; TAG_LEN],
    ) -> Result<(), OpenError> {
        self.key.open(nonce, aad, buf, tag).map_err(|_| OpenError)
    }

    fn implementation(&self, _payload_len: usize) -> Implementation {
        Implementation::IpsecMb
    }
}

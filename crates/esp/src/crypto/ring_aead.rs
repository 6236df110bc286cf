//! AES-GCM and ChaCha20-Poly1305 from ring.
//!
//! ring keeps its expanded key schedule private and offers no way to wipe it
//! on drop, so that copy lives until the allocator reuses the memory (see
//! docs/crypto.md).

use ring::aead::{
    Aad, LessSafeKey, Nonce, Tag, UnboundKey, AES_128_GCM, AES_256_GCM, CHACHA20_POLY1305,
};

use super::aead::{AeadPrimitive, OpenError, TAG_LEN};
use super::Implementation;
use crate::Suite;

/// A ring AEAD key.
pub struct RingAead {
    key: LessSafeKey,
}

impl AeadPrimitive for RingAead {
    fn new(suite: Suite, key: &[u8]) -> Option<Self> {
        let algorithm = match suite {
            Suite::Aes128Gcm16 => &AES_128_GCM,
            Suite::Aes256Gcm16 => &AES_256_GCM,
            Suite::Chacha20Poly1305 => &CHACHA20_POLY1305,
            _ => return None,
        };
        let unbound = UnboundKey::new(algorithm, key).ok()?;
        Some(Self {
            key: LessSafeKey::new(unbound),
        })
    }

    fn seal(&self, nonce: &[u8; 12], aad: &[u8], buf: &mut [u8]) -> [u8; TAG_LEN] {
        let tag = self
            .key
            .seal_in_place_separate_tag(Nonce::assume_unique_for_key(*nonce), Aad::from(aad), buf)
            // ring refuses only inputs beyond the algorithm's limit (~64 GB).
            .expect("ESP payload within AEAD limits");
        let mut out = [0u8; TAG_LEN];
        out.copy_from_slice(tag.as_ref());
        out
    }

    fn open(
        &self,
        nonce: &[u8; 12],
        aad: &[u8],
        buf: &mut [u8],
        tag: &[u8; TAG_LEN],
    ) -> Result<(), OpenError> {
        self.key
            .open_in_place_separate_tag(
                Nonce::assume_unique_for_key(*nonce),
                Aad::from(aad),
                Tag::from(*tag),
                buf,
                0..,
            )
            .map(|_| ())
            .map_err(|_| OpenError)
    }

    fn implementation(&self, _payload_len: usize) -> Implementation {
        Implementation::Ring
    }
}

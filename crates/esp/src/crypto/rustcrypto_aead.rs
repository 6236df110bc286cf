//! AES-GCM (`aes-gcm` 0.10) and ChaCha20-Poly1305 (`chacha20poly1305` 0.10)
//! from RustCrypto, behind the same trait as ring so benches/aead.rs compares
//! like for like. Built only with the `rustcrypto-aead` feature: it lost the
//! measurement (docs/crypto.md).

use aes_gcm::aead::generic_array::GenericArray;
use aes_gcm::aead::{AeadInPlace, KeyInit};
use aes_gcm::{Aes128Gcm, Aes256Gcm};
use chacha20poly1305::ChaCha20Poly1305;

use super::aead::{AeadPrimitive, OpenError, TAG_LEN};
use super::Implementation;
use crate::Suite;

/// One of the three RustCrypto AEADs.
pub enum RustCryptoAead {
    Aes128Gcm(Box<Aes128Gcm>),
    Aes256Gcm(Box<Aes256Gcm>),
    ChaCha20Poly1305(Box<ChaCha20Poly1305>),
}

macro_rules! each {
    ($self:expr, $aead:ident => $body:expr) => {
        match $self {
            RustCryptoAead::Aes128Gcm($aead) => $body,
            RustCryptoAead::Aes256Gcm($aead) => $body,
            RustCryptoAead::ChaCha20Poly1305($aead) => $body,
        }
    };
}

impl AeadPrimitive for RustCryptoAead {
    fn new(suite: Suite, key: &[u8]) -> Option<Self> {
        Some(match suite {
            Suite::Aes128Gcm16 => Self::Aes128Gcm(Box::new(Aes128Gcm::new_from_slice(key).ok()?)),
            Suite::Aes256Gcm16 => Self::Aes256Gcm(Box::new(Aes256Gcm::new_from_slice(key).ok()?)),
            Suite::Chacha20Poly1305 => {
                Self::ChaCha20Poly1305(Box::new(ChaCha20Poly1305::new_from_slice(key).ok()?))
            }
            _ => return None,
        })
    }

    fn seal(&self, nonce: &[u8; 12], aad: &[u8], buf: &mut [u8]) -> [u8; TAG_LEN] {
        let nonce = GenericArray::from_slice(nonce);
        let tag = each!(self, aead => aead.encrypt_in_place_detached(nonce, aad, buf))
            .expect("ESP payload within AEAD limits");
        tag.into()
    }

    fn open(
        &self,
        nonce: &[u8; 12],
        aad: &[u8],
        buf: &mut [u8],
        tag: &[u8; TAG_LEN],
    ) -> Result<(), OpenError> {
        let nonce = GenericArray::from_slice(nonce);
        let tag = GenericArray::from_slice(tag);
        each!(self, aead => aead.decrypt_in_place_detached(nonce, aad, buf, tag))
            .map_err(|_| OpenError)
    }

    fn implementation(&self, _payload_len: usize) -> Implementation {
        Implementation::RustCrypto
    }
}

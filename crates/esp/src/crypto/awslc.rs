//! Every primitive from aws-lc-rs (AWS-LC), behind the same traits as the
//! default backends, so benches/aead.rs compares like for like. Built only
//! with the `awslc` feature: it lost the measurement (docs/crypto.md).
//!
//! AWS-LC wipes its key schedules when they are freed.

use aws_lc_rs::aead::{
    Aad, LessSafeKey, Nonce, UnboundKey, AES_128_GCM, AES_256_GCM, CHACHA20_POLY1305,
};
use aws_lc_rs::cipher::{
    DecryptingKey, DecryptionContext, EncryptingKey, EncryptionContext, UnboundCipherKey, AES_128,
    AES_256,
};
use aws_lc_rs::iv::FixedLength;

use super::aead::{AeadPrimitive, OpenError, TAG_LEN};
use super::cbc_hmac::CbcCipher;
use super::integrity::Integrity;
use super::Implementation;
use crate::Suite;

/// An aws-lc-rs AEAD key.
pub struct AwsLcAead {
    key: LessSafeKey,
}

impl AeadPrimitive for AwsLcAead {
    fn new(suite: Suite, key: &[u8]) -> Option<Self> {
        let algorithm = match suite {
            Suite::Aes128Gcm16 => &AES_128_GCM,
            Suite::Aes256Gcm16 => &AES_256_GCM,
            Suite::Chacha20Poly1305 => &CHACHA20_POLY1305,
            _ => return None,
        };
        Some(Self {
            key: LessSafeKey::new(UnboundKey::new(algorithm, key).ok()?),
        })
    }

    fn seal(&self, nonce: &[u8; 12], aad: &[u8], buf: &mut [u8]) -> [u8; TAG_LEN] {
        let tag = self
            .key
            .seal_in_place_separate_tag(Nonce::assume_unique_for_key(*nonce), Aad::from(aad), buf)
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
                tag,
                buf,
            )
            .map(|_| ())
            .map_err(|_| OpenError)
    }

    fn implementation(&self, _payload_len: usize) -> Implementation {
        Implementation::AwsLc
    }
}

macro_rules! awslc_cbc {
    ($name:ident, $alg:expr, $key:expr, $doc:expr) => {
        #[doc = $doc]
        pub struct $name {
            encrypt: EncryptingKey,
            decrypt: DecryptingKey,
        }

        impl CbcCipher for $name {
            const KEY_LEN: usize = $key;
            const IMPLEMENTATION: Implementation = Implementation::AwsLc;

            fn new(key: &[u8]) -> Option<Self> {
                let unbound = || UnboundCipherKey::new(&$alg, key).ok();
                Some(Self {
                    encrypt: EncryptingKey::cbc(unbound()?).ok()?,
                    decrypt: DecryptingKey::cbc(unbound()?).ok()?,
                })
            }

            fn encrypt(&self, iv: &[u8; 16], buf: &mut [u8]) {
                let context = EncryptionContext::Iv128(FixedLength::from(*iv));
                self.encrypt
                    .less_safe_encrypt(buf, context)
                    .expect("CBC input is whole blocks");
            }

            fn decrypt(&self, iv: &[u8; 16], buf: &mut [u8]) {
                let context = DecryptionContext::Iv128(FixedLength::from(*iv));
                self.decrypt
                    .decrypt(buf, context)
                    .expect("CBC input is whole blocks");
            }
        }
    };
}

awslc_cbc!(AwsLcAes128Cbc, AES_128, 16, "AES-128-CBC, aws-lc-rs.");
awslc_cbc!(AwsLcAes256Cbc, AES_256, 32, "AES-256-CBC, aws-lc-rs.");

macro_rules! awslc_hmac {
    ($name:ident, $alg:expr, $icv:expr, $key:expr, $doc:expr) => {
        #[doc = $doc]
        pub struct $name {
            key: aws_lc_rs::hmac::Key,
        }

        impl Integrity for $name {
            const ICV_LEN: usize = $icv;
            const KEY_LEN: usize = $key;

            fn new(key: &[u8]) -> Option<Self> {
                (key.len() == Self::KEY_LEN).then(|| Self {
                    key: aws_lc_rs::hmac::Key::new($alg, key),
                })
            }

            fn icv(&self, parts: &[&[u8]], icv: &mut [u8]) {
                let mut ctx = aws_lc_rs::hmac::Context::with_key(&self.key);
                for part in parts {
                    ctx.update(part);
                }
                icv.copy_from_slice(&ctx.sign().as_ref()[..icv.len()]);
            }
        }
    };
}

awslc_hmac!(
    AwsLcHmacSha256,
    aws_lc_rs::hmac::HMAC_SHA256,
    16,
    32,
    "HMAC-SHA-256-128, aws-lc-rs."
);
awslc_hmac!(
    AwsLcHmacSha1,
    aws_lc_rs::hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY,
    12,
    20,
    "HMAC-SHA1-96, aws-lc-rs."
);

//! ESP integrity transforms: HMAC-SHA-256-128 (RFC 4868) and HMAC-SHA1-96
//! (RFC 2404), behind one trait so backends can be compared like for like.

use hmac::{Hmac, Mac};
use sha1::Sha1;
use sha2::Sha256;

/// A keyed MAC truncated to the ESP ICV length.
pub trait Integrity: Send + Sync + Sized {
    /// Bytes of ICV carried in the packet (the truncated MAC).
    const ICV_LEN: usize;
    /// Bytes of key this transform takes (RFC 4868 §2.1.1, RFC 2404 §3).
    const KEY_LEN: usize;
    /// Keys the MAC; `None` if `key` is not `KEY_LEN` bytes long.
    fn new(key: &[u8]) -> Option<Self>;
    /// MAC of the concatenation of `parts`, truncated into `icv`
    /// (`icv.len() == ICV_LEN`).
    fn icv(&self, parts: &[&[u8]], icv: &mut [u8]);
}

/// Writes the first `out.len()` bytes of `full` into `out`.
fn truncate_into(full: &[u8], out: &mut [u8]) {
    out.copy_from_slice(&full[..out.len()]);
}

macro_rules! rustcrypto_hmac {
    ($name:ident, $digest:ty, $icv:expr, $key:expr, $doc:expr) => {
        #[doc = $doc]
        #[derive(Clone)]
        pub struct $name {
            /// Inner and outer hash states after absorbing the padded key.
            keyed: Hmac<$digest>,
        }

        // The HMAC state is plain integers (hash states and a block buffer):
        // no Drop impl, no pointers, and all zeroes is a valid value, which is
        // what zeroize_flat_type requires.
        const _: () = assert!(!core::mem::needs_drop::<Hmac<$digest>>());

        impl Integrity for $name {
            const ICV_LEN: usize = $icv;
            const KEY_LEN: usize = $key;

            fn new(key: &[u8]) -> Option<Self> {
                if key.len() != Self::KEY_LEN {
                    return None;
                }
                let keyed = <Hmac<$digest> as Mac>::new_from_slice(key).ok()?;
                Some(Self { keyed })
            }

            fn icv(&self, parts: &[&[u8]], icv: &mut [u8]) {
                let mut mac = self.keyed.clone();
                for part in parts {
                    mac.update(part);
                }
                truncate_into(&mac.finalize().into_bytes(), icv);
            }
        }

        // The one item of this crate's library allowed `unsafe` (see
        // crates/esp/Cargo.toml): hmac 0.12 cannot wipe its own state.
        #[allow(unsafe_code)]
        impl Drop for $name {
            fn drop(&mut self) {
                // SAFETY: see the needs_drop assertion above; the value is
                // never used again after drop.
                unsafe { zeroize::zeroize_flat_type(&mut self.keyed as *mut Hmac<$digest>) }
            }
        }
    };
}

rustcrypto_hmac!(
    RustCryptoHmacSha256,
    Sha256,
    16,
    32,
    "HMAC-SHA-256-128 (RFC 4868) from the RustCrypto `hmac` and `sha2` crates."
);
rustcrypto_hmac!(
    RustCryptoHmacSha1,
    Sha1,
    12,
    20,
    "HMAC-SHA1-96 (RFC 2404) from the RustCrypto `hmac` and `sha1` crates."
);

macro_rules! ring_hmac {
    ($name:ident, $alg:expr, $icv:expr, $key:expr, $doc:expr) => {
        #[doc = $doc]
        ///
        /// ring keeps its keyed state private and cannot wipe it on drop.
        pub struct $name {
            key: ring::hmac::Key,
        }

        impl Integrity for $name {
            const ICV_LEN: usize = $icv;
            const KEY_LEN: usize = $key;

            fn new(key: &[u8]) -> Option<Self> {
                if key.len() != Self::KEY_LEN {
                    return None;
                }
                Some(Self {
                    key: ring::hmac::Key::new($alg, key),
                })
            }

            fn icv(&self, parts: &[&[u8]], icv: &mut [u8]) {
                let mut ctx = ring::hmac::Context::with_key(&self.key);
                for part in parts {
                    ctx.update(part);
                }
                truncate_into(ctx.sign().as_ref(), icv);
            }
        }
    };
}

ring_hmac!(
    RingHmacSha256,
    ring::hmac::HMAC_SHA256,
    16,
    32,
    "HMAC-SHA-256-128 (RFC 4868) from ring."
);
ring_hmac!(
    RingHmacSha1,
    ring::hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY,
    12,
    20,
    "HMAC-SHA1-96 (RFC 2404) from ring."
);

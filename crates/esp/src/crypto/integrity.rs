//! ESP integrity transforms: HMAC-SHA-256-128 (RFC 4868) and HMAC-SHA1-96
//! (RFC 2404), behind one trait so backends can be compared like for like.

use super::hmac_md::{KeyedHmac, Sha1, Sha256};

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
    ($name:ident, $hash:ty, $icv:expr, $key:expr, $doc:expr) => {
        #[doc = $doc]
        ///
        /// The keyed states are wiped on drop ([`KeyedHmac`]).
        pub struct $name {
            keyed: KeyedHmac<$hash>,
        }

        impl Integrity for $name {
            const ICV_LEN: usize = $icv;
            const KEY_LEN: usize = $key;

            fn new(key: &[u8]) -> Option<Self> {
                if key.len() != Self::KEY_LEN {
                    return None;
                }
                Some(Self {
                    keyed: KeyedHmac::new(key)?,
                })
            }

            fn icv(&self, parts: &[&[u8]], icv: &mut [u8]) {
                let mut full = [0u8; 32];
                self.keyed.mac(parts, &mut full);
                truncate_into(&full, icv);
            }
        }
    };
}

rustcrypto_hmac!(
    RustCryptoHmacSha256,
    Sha256,
    16,
    32,
    "HMAC-SHA-256-128 (RFC 4868): RFC 2104 over the RustCrypto `sha2` compression function."
);
rustcrypto_hmac!(
    RustCryptoHmacSha1,
    Sha1,
    12,
    20,
    "HMAC-SHA1-96 (RFC 2404): RFC 2104 over the RustCrypto `sha1` compression function."
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

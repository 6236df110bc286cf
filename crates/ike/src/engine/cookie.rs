//! Stateless cookies as responder (RFC 7296 2.6). While the number of
//! half-open SAs is at or above [`EngineConfig::cookie_threshold`], an
//! IKE_SA_INIT request without a valid COOKIE notify is answered with one
//! and nothing is kept and no key exchange is computed: only a peer that
//! can receive at its source address gets state and a Diffie-Hellman.
//!
//! Cookie = VersionIDofSecret (4 bytes) | HMAC-SHA256(secret, Ni | IPi |
//! SPIi | version), as the RFC suggests. The secret comes from the
//! engine's random source and is replaced every
//! [`EngineConfig::cookie_secret_lifetime_ms`]; cookies made with the
//! previous secret stay valid for one more lifetime, so a peer that got a
//! cookie just before a rotation is not refused.

use std::net::{IpAddr, SocketAddr};

use ring::hmac;
use subtle::ConstantTimeEq;

use crate::crypto::{CryptoError, RandomSource};

use super::{EngineConfig, Time};

struct Secret {
    version: u32,
    key: hmac::Key,
}

/// The current and the previous cookie secret.
#[derive(Default)]
pub(crate) struct CookieSecrets {
    current: Option<Secret>,
    previous: Option<Secret>,
    /// When `current` was made.
    created: Time,
}

/// What a cookie is bound to: the request's Ni, the peer's address and
/// SPIi.
pub(crate) struct CookieInput<'a> {
    pub ni: &'a [u8],
    pub peer: SocketAddr,
    pub spi_i: u64,
}

/// Cookie length: 4 bytes of version, 32 of HMAC-SHA256.
pub(crate) const COOKIE_LEN: usize = 4 + 32;

impl CookieSecrets {
    /// Makes the first secret or rotates an expired one.
    fn refresh(
        &mut self,
        now: Time,
        cfg: &EngineConfig,
        rng: &mut dyn RandomSource,
    ) -> Result<(), CryptoError> {
        let expired = now.saturating_sub(self.created) >= cfg.cookie_secret_lifetime_ms;
        if self.current.is_some() && !expired {
            return Ok(());
        }
        let mut key = [0u8; 32];
        rng.fill(&mut key)?;
        let version = self
            .current
            .as_ref()
            .map_or(0, |s| s.version.wrapping_add(1));
        let fresh = Secret {
            version,
            key: hmac::Key::new(hmac::HMAC_SHA256, &key),
        };
        // A secret more than two lifetimes old is of no use any more.
        let two_lifetimes = cfg.cookie_secret_lifetime_ms.saturating_mul(2);
        let keep_previous = now.saturating_sub(self.created) < two_lifetimes;
        let old = self.current.replace(fresh);
        self.previous = if keep_previous { old } else { None };
        self.created = now;
        Ok(())
    }

    /// The cookie for this request under the current secret.
    pub fn make(
        &mut self,
        now: Time,
        cfg: &EngineConfig,
        rng: &mut dyn RandomSource,
        input: &CookieInput,
    ) -> Result<Vec<u8>, CryptoError> {
        self.refresh(now, cfg, rng)?;
        let secret = self.current.as_ref().ok_or(CryptoError::Internal)?;
        Ok(cookie(secret, input))
    }

    /// Whether `cookie` is one we made (current or previous secret) for
    /// this Ni, peer address and SPIi.
    pub fn valid(
        &mut self,
        now: Time,
        cfg: &EngineConfig,
        rng: &mut dyn RandomSource,
        cookie_data: &[u8],
        input: &CookieInput,
    ) -> bool {
        if self.refresh(now, cfg, rng).is_err() || cookie_data.len() != COOKIE_LEN {
            return false;
        }
        let version = u32::from_be_bytes([
            cookie_data[0],
            cookie_data[1],
            cookie_data[2],
            cookie_data[3],
        ]);
        [self.current.as_ref(), self.previous.as_ref()]
            .into_iter()
            .flatten()
            .filter(|s| s.version == version)
            .any(|s| bool::from(cookie(s, input).as_slice().ct_eq(cookie_data)))
    }
}

fn cookie(secret: &Secret, input: &CookieInput) -> Vec<u8> {
    let version = secret.version.to_be_bytes();
    let mut ctx = hmac::Context::with_key(&secret.key);
    ctx.update(input.ni);
    match input.peer.ip() {
        IpAddr::V4(a) => ctx.update(&a.octets()),
        IpAddr::V6(a) => ctx.update(&a.octets()),
    }
    ctx.update(&input.spi_i.to_be_bytes());
    ctx.update(&version);
    let mut out = version.to_vec();
    out.extend_from_slice(ctx.sign().as_ref());
    out
}

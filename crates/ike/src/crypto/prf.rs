//! The PRF (HMAC-SHA2 via ring) and prf+ (RFC 7296 section 2.13).

use ring::hmac;

use super::error::CryptoError;
use super::secret::SecretBytes;
use super::transform::Prf;

impl Prf {
    fn ring_algorithm(self) -> hmac::Algorithm {
        match self {
            Prf::HmacSha256 => hmac::HMAC_SHA256,
            Prf::HmacSha384 => hmac::HMAC_SHA384,
            Prf::HmacSha512 => hmac::HMAC_SHA512,
        }
    }

    /// prf(key, data[0] | data[1] | ...). The pieces are fed in order so
    /// callers need not concatenate (and copy) secrets.
    pub fn compute(self, key: &[u8], data: &[&[u8]]) -> SecretBytes {
        let key = hmac::Key::new(self.ring_algorithm(), key);
        let mut ctx = hmac::Context::with_key(&key);
        for piece in data {
            ctx.update(piece);
        }
        SecretBytes::from_slice(ctx.sign().as_ref())
    }

    /// prf+(key, seed) truncated to `len` bytes (RFC 7296 section 2.13):
    /// T1 = prf(K, S | 0x01), Tn = prf(K, Tn-1 | S | n), at most 255 blocks.
    /// `seed` is given in pieces, concatenated.
    pub fn prf_plus(
        self,
        key: &[u8],
        seed: &[&[u8]],
        len: usize,
    ) -> Result<SecretBytes, CryptoError> {
        let block = self.output_len();
        if len > 255 * block {
            return Err(CryptoError::PrfPlusTooLong { requested: len });
        }
        let key = hmac::Key::new(self.ring_algorithm(), key);
        // Sized up front so the buffer never reallocates (which would leave
        // an unwiped copy of key material behind).
        let mut out = Vec::with_capacity(len + block);
        let mut prev: Option<hmac::Tag> = None;
        let mut counter: u8 = 1;
        while out.len() < len {
            let mut ctx = hmac::Context::with_key(&key);
            if let Some(t) = &prev {
                ctx.update(t.as_ref());
            }
            for piece in seed {
                ctx.update(piece);
            }
            ctx.update(&[counter]);
            let tag = ctx.sign();
            out.extend_from_slice(tag.as_ref());
            prev = Some(tag);
            // Cannot wrap: len <= 255 blocks is checked above.
            counter = counter.wrapping_add(1);
        }
        out.truncate(len);
        Ok(SecretBytes::new(out))
    }
}

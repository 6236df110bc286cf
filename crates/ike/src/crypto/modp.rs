//! The 2048-bit MODP group (RFC 3526 section 3, IKE group 14) on
//! crypto-bigint: fixed-size 2048-bit integers, Montgomery exponentiation
//! that is constant-time in the exponent's value (only its bit length,
//! fixed at 256 bits for the values we generate, shows in the timing).
//!
//! Why crypto-bigint: no big-integer crate was in the build, and this is
//! the RustCrypto one (used by the `rsa`, `p256`... crates), maintained and
//! written for secrets: num-bigint's `modpow` branches on exponent bits.

use crypto_bigint::modular::{FixedMontyForm, FixedMontyParams};
use crypto_bigint::{Odd, U2048};
use zeroize::Zeroizing;

use super::error::CryptoError;
use super::secret::SecretBytes;

/// p = 2^2048 - 2^1984 - 1 + 2^64 * { [2^1918 pi] + 124476 } (RFC 3526).
const PRIME_HEX: &str = concat!(
    "FFFFFFFFFFFFFFFFC90FDAA22168C234C4C6628B80DC1CD1",
    "29024E088A67CC74020BBEA63B139B22514A08798E3404DD",
    "EF9519B3CD3A431B302B0A6DF25F14374FE1356D6D51C245",
    "E485B576625E7EC6F44C42E9A637ED6B0BFF5CB6F406B7ED",
    "EE386BFB5A899FA5AE9F24117C4B1FE649286651ECE45B3D",
    "C2007CB8A163BF0598DA48361C55D39A69163FA8FD24CF5F",
    "83655D23DCA3AD961C62F356208552BB9ED529077096966D",
    "670C354E4ABC9804F1746C08CA18217C32905E462E36CE3B",
    "E39E772C180E86039B2783A2EC07A28FB5C55DF06F4C52C9",
    "DE2BCBF6955817183995497CEA956AE515D2261898FA0510",
    "15728E5A8AACAA68FFFFFFFFFFFFFFFF",
);

/// The modulus, for tests that check it against the RFC. (`from_be_hex`
/// on `Odd` checks oddness when compiling.)
pub const PRIME: Odd<U2048> = Odd::<U2048>::from_be_hex(PRIME_HEX);

/// Bytes of the private exponents we generate: 256 bits. NIST SP 800-56A
/// Rev. 3 section 5.6.1.1.4 asks for at least 2 * 112 bits for this group's
/// 112-bit strength; RFC 3526 section 8 estimates 110..160 bits of strength
/// and so 220..320-bit exponents. 256 bits costs an eighth of a full-size
/// exponent.
pub const EXPONENT_BYTES: usize = 32;

/// Length of public values and of g^ir.
pub const MODULUS_BYTES: usize = 256;

fn params() -> FixedMontyParams<{ U2048::LIMBS }> {
    // Variable time in the modulus only, which is public.
    FixedMontyParams::new_vartime(PRIME)
}

/// base^exponent mod p, the exponent given big-endian (1..=256 bytes).
fn pow(base: &U2048, exponent: &[u8]) -> Result<Zeroizing<[u8; MODULUS_BYTES]>, CryptoError> {
    if exponent.is_empty() || exponent.len() > MODULUS_BYTES || exponent.iter().all(|&b| b == 0) {
        return Err(CryptoError::InvalidPrivateValue);
    }
    let mut padded = Zeroizing::new([0u8; MODULUS_BYTES]);
    padded[MODULUS_BYTES - exponent.len()..].copy_from_slice(exponent);
    let exp = Zeroizing::new(U2048::from_be_slice(&padded[..]));
    let base = FixedMontyForm::new(base, &params());
    // The bit count is the exponent's byte length, which is public.
    let result = Zeroizing::new(
        base.pow_bounded_exp(&*exp, (exponent.len() * 8) as u32)
            .retrieve(),
    );
    let mut out = Zeroizing::new([0u8; MODULUS_BYTES]);
    out.copy_from_slice(&result.to_be_bytes()[..]);
    Ok(out)
}

/// g^x mod p with g = 2, as the KE payload carries it (256 bytes).
pub fn public_value(exponent: &[u8]) -> Result<Vec<u8>, CryptoError> {
    Ok(pow(&U2048::from_u8(2), exponent)?.to_vec())
}

/// y^x mod p for the peer's public value y, refusing y outside 2..=p-2
/// (0, 1 and p-1 would force a known result; SP 800-56A 5.6.2.3.1).
pub fn shared_secret(exponent: &[u8], peer: &[u8]) -> Result<SecretBytes, CryptoError> {
    if peer.len() != MODULUS_BYTES {
        return Err(CryptoError::PublicValueLength {
            expected: MODULUS_BYTES,
            got: peer.len(),
        });
    }
    let y = U2048::from_be_slice(peer);
    let p_minus_1 = PRIME.get_copy().wrapping_sub(&U2048::ONE);
    // Public value: variable-time comparisons are fine.
    if y.cmp_vartime(&U2048::ONE).is_le() || y.cmp_vartime(&p_minus_1).is_ge() {
        return Err(CryptoError::InvalidPublicValue);
    }
    let z = pow(&y, exponent)?;
    Ok(SecretBytes::from_slice(&z[..]))
}

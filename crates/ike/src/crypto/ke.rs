//! Key exchange (RFC 7296 section 1.2, KE payload section 3.4):
//! Curve25519 (RFC 8031), NIST P-256/P-384 (RFC 5903) and the 2048-bit MODP
//! group (RFC 3526).
//!
//! ECDH runs in aws-lc-rs because, unlike ring, it can take a private value
//! we generate: the private value comes from the engine's injectable
//! [`RandomSource`], so tests are deterministic and the RFC 7748 / RFC 5903
//! known answers can be checked. MODP runs on crypto-bigint's
//! constant-time Montgomery exponentiation (see [`super::modp`]).

use std::fmt;

use aws_lc_rs::agreement;
use zeroize::Zeroizing;

use super::error::CryptoError;
use super::mlkem;
use super::modp;
use super::rng::RandomSource;
use super::secret::SecretBytes;
use super::transform::KeGroup;

/// Our half of one key exchange: the private value and the public value
/// for the KE payload. The private value never leaves this struct, is wiped
/// on drop (aws-lc frees EC keys with OPENSSL_free, which cleanses; the
/// MODP exponent is a `Zeroizing` buffer) and is not printed by `Debug`.
pub struct KeyExchange {
    group: KeGroup,
    private: PrivateValue,
    public: Vec<u8>,
}

enum PrivateValue {
    Ecdh(agreement::PrivateKey),
    Modp(Zeroizing<Vec<u8>>),
    Kem(mlkem::DecapsulationKey),
}

impl fmt::Debug for KeyExchange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyExchange")
            .field("group", &self.group)
            .field("private", &"redacted")
            .finish()
    }
}

fn ecdh_algorithm(group: KeGroup) -> Option<&'static agreement::Algorithm> {
    match group {
        KeGroup::Curve25519 => Some(&agreement::X25519),
        KeGroup::Ecp256 => Some(&agreement::ECDH_P256),
        KeGroup::Ecp384 => Some(&agreement::ECDH_P384),
        _ => None,
    }
}

/// Bytes of private value drawn from the random source.
fn private_len(group: KeGroup) -> usize {
    match group {
        KeGroup::Curve25519 | KeGroup::Ecp256 => 32,
        KeGroup::Ecp384 => 48,
        KeGroup::Modp2048 => modp::EXPONENT_BYTES,
        // ML-KEM's key generation seed d | z (FIPS 203 Algorithm 19).
        KeGroup::MlKem512 | KeGroup::MlKem768 | KeGroup::MlKem1024 => 64,
    }
}

impl KeyExchange {
    /// A fresh private value for `group`, drawn from `rng`.
    pub fn generate(group: KeGroup, rng: &mut dyn RandomSource) -> Result<Self, CryptoError> {
        // A P-256/P-384 scalar must be in [1, n-1]: a random 32/48-byte
        // string is outside with probability about 2^-32 (P-256) or
        // 2^-190, so retrying a few times never loops in practice.
        for _ in 0..8 {
            let mut private = Zeroizing::new(vec![0u8; private_len(group)]);
            rng.fill(&mut private)?;
            match Self::from_private(group, &private) {
                Err(CryptoError::InvalidPrivateValue) => continue,
                other => return other,
            }
        }
        Err(CryptoError::Random)
    }

    /// The exchange for a given private value: a big-endian scalar for
    /// ECP (RFC 5903), the 32-byte scalar for X25519 (RFC 7748, clamped by
    /// the primitive), a big-endian exponent of at most 256 bytes for MODP.
    /// For known-answer tests and for [`KeyExchange::generate`].
    /// For ML-KEM the private value is the 64-byte seed d | z and the
    /// public value the encapsulation key.
    pub fn from_private(group: KeGroup, private: &[u8]) -> Result<Self, CryptoError> {
        if let Some(kem) = group.ml_kem() {
            let seed: &[u8; 64] = private
                .try_into()
                .map_err(|_| CryptoError::InvalidPrivateValue)?;
            let dk = mlkem::DecapsulationKey::from_seed(kem, seed);
            return Ok(KeyExchange {
                group,
                public: dk.encapsulation_key(),
                private: PrivateValue::Kem(dk),
            });
        }
        match ecdh_algorithm(group) {
            Some(alg) => {
                let key = agreement::PrivateKey::from_private_key(alg, private)
                    .map_err(|_| CryptoError::InvalidPrivateValue)?;
                let public = key
                    .compute_public_key()
                    .map_err(|_| CryptoError::Internal)?;
                let public = match group {
                    // RFC 5903 section 7: x | y, without SEC1's 0x04 prefix.
                    KeGroup::Ecp256 | KeGroup::Ecp384 => {
                        let bytes = public.as_ref();
                        if bytes.first() != Some(&0x04) || bytes.len() != group.public_len() + 1 {
                            return Err(CryptoError::Internal);
                        }
                        bytes[1..].to_vec()
                    }
                    _ => public.as_ref().to_vec(),
                };
                Ok(KeyExchange {
                    group,
                    private: PrivateValue::Ecdh(key),
                    public,
                })
            }
            None => {
                let public = modp::public_value(private)?;
                Ok(KeyExchange {
                    group,
                    private: PrivateValue::Modp(Zeroizing::new(private.to_vec())),
                    public,
                })
            }
        }
    }

    /// The group.
    pub fn group(&self) -> KeGroup {
        self.group
    }

    /// The public value as the KE payload carries it.
    pub fn public_value(&self) -> &[u8] {
        &self.public
    }

    /// g^ir from the peer's KE payload data: the x coordinate for ECP
    /// (RFC 5903 section 7), the X25519 output (RFC 8031), the MODP value
    /// left-padded to 256 bytes (RFC 7296 section 2.14). Peer values that
    /// are not group elements are refused (points off the curve, MODP
    /// values outside 2..p-2, an all-zero X25519 result).
    /// For ML-KEM, `peer_public` is the responder's ciphertext and the
    /// result ML-KEM.Decaps's key.
    pub fn shared_secret(&self, peer_public: &[u8]) -> Result<SecretBytes, CryptoError> {
        if let PrivateValue::Kem(dk) = &self.private {
            return dk.decapsulate(peer_public);
        }
        let expected = self.group.public_len();
        if peer_public.len() != expected {
            return Err(CryptoError::PublicValueLength {
                expected,
                got: peer_public.len(),
            });
        }
        match &self.private {
            PrivateValue::Ecdh(key) => {
                let alg = key.algorithm();
                let encoded: Vec<u8> = match self.group {
                    KeGroup::Ecp256 | KeGroup::Ecp384 => {
                        let mut v = Vec::with_capacity(expected + 1);
                        v.push(0x04);
                        v.extend_from_slice(peer_public);
                        v
                    }
                    _ => peer_public.to_vec(),
                };
                let peer = agreement::UnparsedPublicKey::new(alg, &encoded);
                let secret = agreement::agree(key, peer, CryptoError::InvalidPublicValue, |s| {
                    Ok(SecretBytes::from_slice(s))
                })?;
                // RFC 7748 section 6.1 / RFC 8031 section 2.3: an all-zero
                // X25519 output means a small-order peer value.
                if secret.expose().iter().all(|&b| b == 0) {
                    return Err(CryptoError::InvalidPublicValue);
                }
                Ok(secret)
            }
            PrivateValue::Modp(exponent) => modp::shared_secret(exponent, peer_public),
            PrivateValue::Kem(_) => Err(CryptoError::Internal),
        }
    }

    /// The responder's side of one exchange with `group`, given the
    /// initiator's KE payload data: our public value (KE payload data) and
    /// the shared secret. For Diffie-Hellman a fresh private value and
    /// g^ir; for ML-KEM an encapsulation to the initiator's key (the
    /// ciphertext and the key; randomness m from `rng`).
    pub fn respond(
        group: KeGroup,
        peer_public: &[u8],
        rng: &mut dyn RandomSource,
    ) -> Result<(Vec<u8>, SecretBytes), CryptoError> {
        if let Some(kem) = group.ml_kem() {
            return mlkem::encapsulate(kem, peer_public, rng);
        }
        let ke = Self::generate(group, rng)?;
        let shared = ke.shared_secret(peer_public)?;
        Ok((ke.public, shared))
    }
}

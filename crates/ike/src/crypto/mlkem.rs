//! ML-KEM (FIPS 203) as an IKEv2 key exchange method (RFC 9370 additional
//! key exchanges; IANA "Transform Type 4 - Key Exchange Method Transform
//! IDs" 35, 36, 37 for ML-KEM-512/768/1024).
//!
//! In IKE the exchange's initiator sends the encapsulation key in its KE
//! payload and the responder answers with a ciphertext; the shared secret
//! is the 32-byte ML-KEM key. RustCrypto's `ml-kem` is used because it
//! takes the key generation seed (d | z) and the encapsulation randomness
//! (m) from the caller: they come from the engine's [`RandomSource`], so
//! the engine's tests replay exchanges exactly and the C2SP accumulated
//! vectors check keygen, encapsulation and (implicit-rejection)
//! decapsulation. docs/ike.md, "ML-KEM (RFC 9370)", has the measurements.

use std::fmt;

use ml_kem::array::Array;
use ml_kem::{Decapsulate, KeyExport, MlKem1024, MlKem512, MlKem768};
use zeroize::Zeroizing;

use super::error::CryptoError;
use super::rng::RandomSource;
use super::secret::SecretBytes;

/// An ML-KEM parameter set.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MlKem {
    /// ML-KEM-512 (security category 1).
    MlKem512,
    /// ML-KEM-768 (security category 3).
    MlKem768,
    /// ML-KEM-1024 (security category 5).
    MlKem1024,
}

impl MlKem {
    /// Encapsulation key length: the initiator's KE payload data.
    pub fn encapsulation_key_len(self) -> usize {
        match self {
            MlKem::MlKem512 => 800,
            MlKem::MlKem768 => 1184,
            MlKem::MlKem1024 => 1568,
        }
    }

    /// Ciphertext length: the responder's KE payload data.
    pub fn ciphertext_len(self) -> usize {
        match self {
            MlKem::MlKem512 => 768,
            MlKem::MlKem768 => 1088,
            MlKem::MlKem1024 => 1568,
        }
    }

    /// Shared secret length (all parameter sets).
    pub const SHARED_LEN: usize = 32;
}

/// A decapsulation key; wiped on drop by `ml-kem` (its `zeroize`
/// feature), never printed.
pub enum DecapsulationKey {
    /// ML-KEM-512.
    K512(Box<ml_kem::DecapsulationKey<MlKem512>>),
    /// ML-KEM-768.
    K768(Box<ml_kem::DecapsulationKey<MlKem768>>),
    /// ML-KEM-1024.
    K1024(Box<ml_kem::DecapsulationKey<MlKem1024>>),
}

impl fmt::Debug for DecapsulationKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("DecapsulationKey(redacted)")
    }
}

impl DecapsulationKey {
    /// ML-KEM.KeyGen_internal(d, z) from the 64-byte seed d | z (FIPS 203
    /// Algorithm 16).
    pub fn from_seed(kem: MlKem, seed: &[u8; 64]) -> Self {
        let seed = Zeroizing::new(Array::from(*seed));
        match kem {
            MlKem::MlKem512 => Self::K512(Box::new(ml_kem::DecapsulationKey::from_seed(*seed))),
            MlKem::MlKem768 => Self::K768(Box::new(ml_kem::DecapsulationKey::from_seed(*seed))),
            MlKem::MlKem1024 => Self::K1024(Box::new(ml_kem::DecapsulationKey::from_seed(*seed))),
        }
    }

    /// A fresh key: d and z from `rng`.
    pub fn generate(kem: MlKem, rng: &mut dyn RandomSource) -> Result<Self, CryptoError> {
        let mut seed = Zeroizing::new([0u8; 64]);
        rng.fill(&mut seed[..])?;
        Ok(Self::from_seed(kem, &seed))
    }

    /// The parameter set.
    pub fn kem(&self) -> MlKem {
        match self {
            Self::K512(_) => MlKem::MlKem512,
            Self::K768(_) => MlKem::MlKem768,
            Self::K1024(_) => MlKem::MlKem1024,
        }
    }

    /// The encapsulation key (the KE payload data we send).
    pub fn encapsulation_key(&self) -> Vec<u8> {
        match self {
            Self::K512(k) => k.encapsulation_key().to_bytes().to_vec(),
            Self::K768(k) => k.encapsulation_key().to_bytes().to_vec(),
            Self::K1024(k) => k.encapsulation_key().to_bytes().to_vec(),
        }
    }

    /// The expanded decapsulation key dk (FIPS 203 encoding, 1632/2400/3168
    /// bytes): for known-answer tests and the cross-check with aws-lc only.
    #[doc(hidden)]
    #[allow(deprecated)]
    pub fn expanded_bytes(&self) -> SecretBytes {
        use ml_kem::ExpandedKeyEncoding;
        match self {
            Self::K512(k) => SecretBytes::from_slice(&k.to_expanded_bytes()),
            Self::K768(k) => SecretBytes::from_slice(&k.to_expanded_bytes()),
            Self::K1024(k) => SecretBytes::from_slice(&k.to_expanded_bytes()),
        }
    }

    /// ML-KEM.Decaps: the shared secret for the peer's ciphertext. A
    /// ciphertext of the wrong length is an error; any other invalid
    /// ciphertext yields the implicit-rejection key (FIPS 203 6.3), so the
    /// exchange fails later, at the peer's AUTH, as it must.
    pub fn decapsulate(&self, ciphertext: &[u8]) -> Result<SecretBytes, CryptoError> {
        let expected = self.kem().ciphertext_len();
        let wrong = || CryptoError::PublicValueLength {
            expected,
            got: ciphertext.len(),
        };
        let k = match self {
            Self::K512(k) => k.decapsulate_slice(ciphertext).map_err(|_| wrong())?,
            Self::K768(k) => k.decapsulate_slice(ciphertext).map_err(|_| wrong())?,
            Self::K1024(k) => k.decapsulate_slice(ciphertext).map_err(|_| wrong())?,
        };
        let secret = SecretBytes::from_slice(&k);
        let mut k = k;
        zeroize::Zeroize::zeroize(k.as_mut_slice());
        Ok(secret)
    }
}

/// ML-KEM.Encaps_internal(ek, m) (FIPS 203 Algorithm 17) after the
/// encapsulation key check of section 7.2 (length and modulus): the
/// ciphertext and the shared secret.
pub fn encapsulate_with(
    kem: MlKem,
    encapsulation_key: &[u8],
    m: &[u8; 32],
) -> Result<(Vec<u8>, SecretBytes), CryptoError> {
    let expected = kem.encapsulation_key_len();
    if encapsulation_key.len() != expected {
        return Err(CryptoError::PublicValueLength {
            expected,
            got: encapsulation_key.len(),
        });
    }
    let m = Array::from(*m);
    macro_rules! encaps {
        ($p:ty) => {{
            let key =
                Array::try_from(encapsulation_key).map_err(|_| CryptoError::InvalidPublicValue)?;
            let ek = ml_kem::EncapsulationKey::<$p>::new(&key)
                .map_err(|_| CryptoError::InvalidPublicValue)?;
            let (ct, mut k) = ek.encapsulate_deterministic(&m);
            let secret = SecretBytes::from_slice(&k);
            zeroize::Zeroize::zeroize(k.as_mut_slice());
            (ct.to_vec(), secret)
        }};
    }
    let out = match kem {
        MlKem::MlKem512 => encaps!(MlKem512),
        MlKem::MlKem768 => encaps!(MlKem768),
        MlKem::MlKem1024 => encaps!(MlKem1024),
    };
    Ok(out)
}

/// [`encapsulate_with`] with m drawn from `rng`.
pub fn encapsulate(
    kem: MlKem,
    encapsulation_key: &[u8],
    rng: &mut dyn RandomSource,
) -> Result<(Vec<u8>, SecretBytes), CryptoError> {
    let mut m = Zeroizing::new([0u8; 32]);
    rng.fill(&mut m[..])?;
    encapsulate_with(kem, encapsulation_key, &m)
}

//! The algorithms espgw's IKEv2 negotiates, with their IANA transform ids
//! (RFC 7296 section 3.3.2, IANA "IKEv2 Transform Attribute Types") and the
//! key sizes that key derivation needs.
//!
//! Each enum names only what espgw implements; anything else a peer offers
//! is skipped during proposal selection (see [`super::proposal`]).

/// Transform types (RFC 7296 section 3.3.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TransformType {
    /// 1: Encryption Algorithm (ENCR).
    Encryption,
    /// 2: Pseudorandom Function (PRF).
    Prf,
    /// 3: Integrity Algorithm (INTEG).
    Integrity,
    /// 4: Key Exchange Method (formerly Diffie-Hellman group).
    KeyExchange,
    /// 5: Extended Sequence Numbers (ESN).
    Esn,
    /// 6..=12: Additional Key Exchange 1..=7 (ADDKE1..ADDKE7, RFC 9370
    /// section 2.2); the value held is n (1..=7).
    AdditionalKeyExchange(u8),
    /// Any other (unassigned) type: a proposal that carries one is
    /// unacceptable (RFC 7296 section 3.3.6).
    Other(u8),
}

impl TransformType {
    /// The wire value.
    pub fn to_u8(self) -> u8 {
        match self {
            TransformType::Encryption => 1,
            TransformType::Prf => 2,
            TransformType::Integrity => 3,
            TransformType::KeyExchange => 4,
            TransformType::Esn => 5,
            TransformType::AdditionalKeyExchange(n) => n + 5,
            TransformType::Other(v) => v,
        }
    }

    /// From the wire value.
    pub fn from_u8(v: u8) -> Self {
        match v {
            1 => TransformType::Encryption,
            2 => TransformType::Prf,
            3 => TransformType::Integrity,
            4 => TransformType::KeyExchange,
            5 => TransformType::Esn,
            6..=12 => TransformType::AdditionalKeyExchange(v - 5),
            other => TransformType::Other(other),
        }
    }
}

/// One transform as it appears in an SA payload's proposal, reduced to what
/// negotiation looks at: its type, id and Key Length attribute (type 14, in
/// bits), the only attribute RFC 7296 defines. The message codec converts
/// its payload structures to and from this.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Transform {
    /// Transform type.
    pub kind: TransformType,
    /// Transform id within the type.
    pub id: u16,
    /// The Key Length attribute, when present.
    pub key_length: Option<u16>,
}

impl Transform {
    /// A transform without attributes.
    pub fn new(kind: TransformType, id: u16) -> Self {
        Transform {
            kind,
            id,
            key_length: None,
        }
    }
}

/// Encryption algorithms (transform type 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Encryption {
    /// ENCR_AES_CBC (12), 128-bit key (RFC 3602).
    AesCbc128,
    /// ENCR_AES_CBC (12), 256-bit key.
    AesCbc256,
    /// ENCR_AES_GCM_16 (20), 128-bit key, 16-octet ICV (RFC 4106, RFC 5282).
    AesGcm16_128,
    /// ENCR_AES_GCM_16 (20), 256-bit key.
    AesGcm16_256,
    /// ENCR_CHACHA20_POLY1305 (28) (RFC 7634); takes no Key Length attribute.
    ChaCha20Poly1305,
}

/// IANA id of ENCR_AES_CBC.
pub const ENCR_AES_CBC: u16 = 12;
/// IANA id of ENCR_AES_GCM_16.
pub const ENCR_AES_GCM_16: u16 = 20;
/// IANA id of ENCR_CHACHA20_POLY1305.
pub const ENCR_CHACHA20_POLY1305: u16 = 28;

impl Encryption {
    /// Every supported encryption algorithm.
    pub const ALL: [Encryption; 5] = [
        Encryption::AesCbc128,
        Encryption::AesCbc256,
        Encryption::AesGcm16_128,
        Encryption::AesGcm16_256,
        Encryption::ChaCha20Poly1305,
    ];

    /// The transform this algorithm is offered as.
    pub fn transform(self) -> Transform {
        let (id, key_length) = match self {
            Encryption::AesCbc128 => (ENCR_AES_CBC, Some(128)),
            Encryption::AesCbc256 => (ENCR_AES_CBC, Some(256)),
            Encryption::AesGcm16_128 => (ENCR_AES_GCM_16, Some(128)),
            Encryption::AesGcm16_256 => (ENCR_AES_GCM_16, Some(256)),
            Encryption::ChaCha20Poly1305 => (ENCR_CHACHA20_POLY1305, None),
        };
        Transform {
            kind: TransformType::Encryption,
            id,
            key_length,
        }
    }

    /// The algorithm a received transform names, if espgw implements it.
    /// AES requires the Key Length attribute (RFC 7296 section 3.3.5: "for
    /// algorithms with variable key length ... the attribute MUST be
    /// present"); ChaCha20-Poly1305 must not carry one (RFC 7634 section 3).
    pub fn from_transform(t: &Transform) -> Option<Self> {
        if t.kind != TransformType::Encryption {
            return None;
        }
        Self::ALL.into_iter().find(|e| e.transform() == *t)
    }

    /// Combined-mode (AEAD) algorithms carry their own integrity check;
    /// no integrity transform is negotiated with them (RFC 5282 section 8).
    pub fn is_aead(self) -> bool {
        !matches!(self, Encryption::AesCbc128 | Encryption::AesCbc256)
    }

    /// Cipher key length in bytes, without salt.
    pub fn cipher_key_len(self) -> usize {
        match self {
            Encryption::AesCbc128 | Encryption::AesGcm16_128 => 16,
            Encryption::AesCbc256 | Encryption::AesGcm16_256 | Encryption::ChaCha20Poly1305 => 32,
        }
    }

    /// Salt taken from the keying material after the key (RFC 5282 section
    /// 7.1 for IKE, RFC 4106 section 8.1 for ESP, RFC 7634 sections 3 and 4).
    pub fn salt_len(self) -> usize {
        if self.is_aead() {
            4
        } else {
            0
        }
    }

    /// Bytes taken from prf+ for one direction's encryption key: the key
    /// followed by the salt.
    pub fn keymat_len(self) -> usize {
        self.cipher_key_len() + self.salt_len()
    }

    /// Length of the IV carried in each SK payload (and ESP packet).
    pub fn iv_len(self) -> usize {
        if self.is_aead() {
            8
        } else {
            16
        }
    }

    /// Cipher block size for padding: 16 for CBC, 1 for the stream-like
    /// AEADs (which still carry the Pad Length byte).
    pub fn block_len(self) -> usize {
        if self.is_aead() {
            1
        } else {
            16
        }
    }

    /// ICV length of the AEAD's tag (0 for CBC: the integrity transform's).
    pub fn aead_icv_len(self) -> usize {
        if self.is_aead() {
            16
        } else {
            0
        }
    }
}

/// Pseudorandom functions (transform type 2), all HMAC-SHA2 (RFC 4868).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Prf {
    /// PRF_HMAC_SHA2_256 (5).
    HmacSha256,
    /// PRF_HMAC_SHA2_384 (6).
    HmacSha384,
    /// PRF_HMAC_SHA2_512 (7).
    HmacSha512,
}

impl Prf {
    /// Every supported PRF.
    pub const ALL: [Prf; 3] = [Prf::HmacSha256, Prf::HmacSha384, Prf::HmacSha512];

    /// IANA transform id.
    pub fn id(self) -> u16 {
        match self {
            Prf::HmacSha256 => 5,
            Prf::HmacSha384 => 6,
            Prf::HmacSha512 => 7,
        }
    }

    /// The transform this PRF is offered as.
    pub fn transform(self) -> Transform {
        Transform::new(TransformType::Prf, self.id())
    }

    /// The PRF a received transform names, if supported (no attributes).
    pub fn from_transform(t: &Transform) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.transform() == *t)
    }

    /// Output length, which is also the preferred key length that SK_d,
    /// SK_pi and SK_pr get (RFC 7296 section 2.14, RFC 4868 section 2.1.2).
    pub fn output_len(self) -> usize {
        match self {
            Prf::HmacSha256 => 32,
            Prf::HmacSha384 => 48,
            Prf::HmacSha512 => 64,
        }
    }
}

/// Integrity algorithms (transform type 3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Integrity {
    /// AUTH_HMAC_SHA1_96 (2): ESP only here (espgw's aes128-sha1 suite).
    HmacSha1_96,
    /// AUTH_HMAC_SHA2_256_128 (12).
    HmacSha256_128,
    /// AUTH_HMAC_SHA2_384_192 (13).
    HmacSha384_192,
    /// AUTH_HMAC_SHA2_512_256 (14).
    HmacSha512_256,
}

impl Integrity {
    /// Every supported integrity algorithm.
    pub const ALL: [Integrity; 4] = [
        Integrity::HmacSha1_96,
        Integrity::HmacSha256_128,
        Integrity::HmacSha384_192,
        Integrity::HmacSha512_256,
    ];

    /// IANA transform id.
    pub fn id(self) -> u16 {
        match self {
            Integrity::HmacSha1_96 => 2,
            Integrity::HmacSha256_128 => 12,
            Integrity::HmacSha384_192 => 13,
            Integrity::HmacSha512_256 => 14,
        }
    }

    /// The transform this algorithm is offered as.
    pub fn transform(self) -> Transform {
        Transform::new(TransformType::Integrity, self.id())
    }

    /// The algorithm a received transform names, if supported.
    pub fn from_transform(t: &Transform) -> Option<Self> {
        Self::ALL.into_iter().find(|i| i.transform() == *t)
    }

    /// Key length in bytes: the hash's output length (RFC 4868 section
    /// 2.1.1, RFC 2404 for SHA-1).
    pub fn key_len(self) -> usize {
        match self {
            Integrity::HmacSha1_96 => 20,
            Integrity::HmacSha256_128 => 32,
            Integrity::HmacSha384_192 => 48,
            Integrity::HmacSha512_256 => 64,
        }
    }

    /// Truncated ICV length in bytes.
    pub fn icv_len(self) -> usize {
        match self {
            Integrity::HmacSha1_96 => 12,
            Integrity::HmacSha256_128 => 16,
            Integrity::HmacSha384_192 => 24,
            Integrity::HmacSha512_256 => 32,
        }
    }
}

/// Key exchange methods (transform type 4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KeGroup {
    /// 14: 2048-bit MODP group (RFC 3526 section 3).
    Modp2048,
    /// 19: 256-bit random ECP group, NIST P-256 (RFC 5903).
    Ecp256,
    /// 20: 384-bit random ECP group, NIST P-384 (RFC 5903).
    Ecp384,
    /// 31: Curve25519 (RFC 8031).
    Curve25519,
    /// 35: ML-KEM-512 (FIPS 203); additional key exchanges only here.
    MlKem512,
    /// 36: ML-KEM-768 (FIPS 203); additional key exchanges only here.
    MlKem768,
    /// 37: ML-KEM-1024 (FIPS 203); additional key exchanges only here.
    MlKem1024,
}

impl KeGroup {
    /// The ML-KEM parameter sets, usable as RFC 9370 additional key
    /// exchanges (not in IKE_SA_INIT's KE payload: see docs/ike.md).
    pub const ML_KEM: [KeGroup; 3] = [KeGroup::MlKem512, KeGroup::MlKem768, KeGroup::MlKem1024];

    /// The ML-KEM parameter set, when this method is one.
    pub fn ml_kem(self) -> Option<super::mlkem::MlKem> {
        match self {
            KeGroup::MlKem512 => Some(super::mlkem::MlKem::MlKem512),
            KeGroup::MlKem768 => Some(super::mlkem::MlKem::MlKem768),
            KeGroup::MlKem1024 => Some(super::mlkem::MlKem::MlKem1024),
            _ => None,
        }
    }

    /// The method with this id among every one espgw implements (Diffie-
    /// Hellman groups and ML-KEM), for additional key exchanges.
    pub fn from_any_id(id: u16) -> Option<Self> {
        Self::ALL
            .into_iter()
            .chain(Self::ML_KEM)
            .find(|g| g.id() == id)
    }

    /// Every supported Diffie-Hellman group (the methods usable in
    /// IKE_SA_INIT and for PFS).
    pub const ALL: [KeGroup; 4] = [
        KeGroup::Modp2048,
        KeGroup::Ecp256,
        KeGroup::Ecp384,
        KeGroup::Curve25519,
    ];

    /// IANA transform id (the KE payload's group number).
    pub fn id(self) -> u16 {
        match self {
            KeGroup::Modp2048 => 14,
            KeGroup::Ecp256 => 19,
            KeGroup::Ecp384 => 20,
            KeGroup::Curve25519 => 31,
            KeGroup::MlKem512 => 35,
            KeGroup::MlKem768 => 36,
            KeGroup::MlKem1024 => 37,
        }
    }

    /// The group with this id, if supported.
    pub fn from_id(id: u16) -> Option<Self> {
        Self::ALL.into_iter().find(|g| g.id() == id)
    }

    /// The transform this group is offered as.
    pub fn transform(self) -> Transform {
        Transform::new(TransformType::KeyExchange, self.id())
    }

    /// The group a received transform names, if supported.
    pub fn from_transform(t: &Transform) -> Option<Self> {
        Self::ALL.into_iter().find(|g| g.transform() == *t)
    }

    /// Length of the public value in the KE payload, and of the shared
    /// secret g^ir: 256 for MODP-2048 (zero-padded to the modulus), x || y
    /// for ECP (RFC 5903 section 7), 32 for Curve25519 (RFC 8031 section 2).
    /// For ML-KEM, the exchange initiator's value (the encapsulation key);
    /// the responder's is the ciphertext ([`super::mlkem::MlKem::ciphertext_len`]).
    pub fn public_len(self) -> usize {
        match self {
            KeGroup::Modp2048 => 256,
            KeGroup::Ecp256 => 64,
            KeGroup::Ecp384 => 96,
            KeGroup::Curve25519 => 32,
            KeGroup::MlKem512 => 800,
            KeGroup::MlKem768 => 1184,
            KeGroup::MlKem1024 => 1568,
        }
    }

    /// Length of the shared secret g^ir (RFC 5903 section 7: the x
    /// coordinate only for ECP).
    pub fn shared_len(self) -> usize {
        match self {
            KeGroup::Modp2048 => 256,
            KeGroup::Ecp256 => 32,
            KeGroup::Ecp384 => 48,
            KeGroup::Curve25519 => 32,
            KeGroup::MlKem512 | KeGroup::MlKem768 | KeGroup::MlKem1024 => 32,
        }
    }
}

/// Transform id "NONE" for the Key Exchange Method type: a CHILD_SA
/// proposal that allows no PFS group says so with it (RFC 7296 3.3.2).
pub const KE_NONE: u16 = 0;

/// Extended Sequence Numbers (transform type 5, RFC 7296 section 3.3.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Esn {
    /// 0: 32-bit sequence numbers.
    No,
    /// 1: 64-bit extended sequence numbers.
    Yes,
}

impl Esn {
    /// IANA transform id.
    pub fn id(self) -> u16 {
        match self {
            Esn::No => 0,
            Esn::Yes => 1,
        }
    }

    /// The transform this choice is offered as.
    pub fn transform(self) -> Transform {
        Transform::new(TransformType::Esn, self.id())
    }

    /// The choice a received transform names.
    pub fn from_transform(t: &Transform) -> Option<Self> {
        [Esn::No, Esn::Yes]
            .into_iter()
            .find(|e| e.transform() == *t)
    }
}

/// The ESP suites espgw's data plane implements, named as its config names
/// them (docs/config.md, `tunnel.esp`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EspSuite {
    /// AES-128-GCM, 16-octet ICV.
    Aes128Gcm16,
    /// AES-256-GCM, 16-octet ICV.
    Aes256Gcm16,
    /// ChaCha20-Poly1305 (RFC 7634).
    ChaCha20Poly1305,
    /// AES-128-CBC with HMAC-SHA-256-128.
    Aes128Sha256,
    /// AES-256-CBC with HMAC-SHA-256-128.
    Aes256Sha256,
    /// AES-128-CBC with HMAC-SHA1-96.
    Aes128Sha1,
}

impl EspSuite {
    /// Every suite.
    pub const ALL: [EspSuite; 6] = [
        EspSuite::Aes128Gcm16,
        EspSuite::Aes256Gcm16,
        EspSuite::ChaCha20Poly1305,
        EspSuite::Aes128Sha256,
        EspSuite::Aes256Sha256,
        EspSuite::Aes128Sha1,
    ];

    /// The suite's name in espgw's config (`tunnel.esp`).
    pub fn config_name(self) -> &'static str {
        match self {
            EspSuite::Aes128Gcm16 => "aes128gcm16",
            EspSuite::Aes256Gcm16 => "aes256gcm16",
            EspSuite::ChaCha20Poly1305 => "chacha20poly1305",
            EspSuite::Aes128Sha256 => "aes128-sha256",
            EspSuite::Aes256Sha256 => "aes256-sha256",
            EspSuite::Aes128Sha1 => "aes128-sha1",
        }
    }

    /// Encryption and integrity transforms of the suite.
    pub fn algorithms(self) -> (Encryption, Option<Integrity>) {
        match self {
            EspSuite::Aes128Gcm16 => (Encryption::AesGcm16_128, None),
            EspSuite::Aes256Gcm16 => (Encryption::AesGcm16_256, None),
            EspSuite::ChaCha20Poly1305 => (Encryption::ChaCha20Poly1305, None),
            EspSuite::Aes128Sha256 => (Encryption::AesCbc128, Some(Integrity::HmacSha256_128)),
            EspSuite::Aes256Sha256 => (Encryption::AesCbc256, Some(Integrity::HmacSha256_128)),
            EspSuite::Aes128Sha1 => (Encryption::AesCbc128, Some(Integrity::HmacSha1_96)),
        }
    }

    /// The suite a negotiated (encryption, integrity) pair is, if the data
    /// plane has it.
    pub fn from_algorithms(enc: Encryption, integ: Option<Integrity>) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|s| s.algorithms() == (enc, integ))
    }

    /// Bytes of `key` in espgw's config for one direction: cipher key then
    /// salt (docs/config.md).
    pub fn key_len(self) -> usize {
        self.algorithms().0.keymat_len()
    }

    /// Bytes of `auth_key` (0 for the AEAD suites).
    pub fn auth_key_len(self) -> usize {
        self.algorithms().1.map_or(0, Integrity::key_len)
    }
}

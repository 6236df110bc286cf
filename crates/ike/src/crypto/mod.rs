//! IKEv2 cryptography: transforms and proposals (strongSwan names), PRF and
//! prf+, key derivation, key exchange, the SK payload's protection and PSK
//! authentication. No I/O, no clock: randomness comes in through
//! [`RandomSource`]. Described in docs/ike.md, "Cryptography".

pub mod auth;
pub mod cert;
pub(crate) mod der;
pub mod error;
pub mod kdf;
pub mod ke;
pub mod mlkem;
pub mod modp;
pub mod prf;
pub mod proposal;
pub mod rng;
pub mod secret;
pub mod signature;
pub mod sk;
pub mod transform;

pub use cert::CertError;
pub use error::CryptoError;
pub use kdf::{
    rekey_skeyseed, rekey_skeyseed_with_additional, skeyseed, ChildSaKeys, EspKeys, IkeSaKeys,
};
pub use ke::KeyExchange;
pub use proposal::{
    parse_esp_proposals, parse_ike_proposals, select_esp, select_ike, ChildSuite, EspProposal,
    IkeProposal, IkeSuite, ProposalError,
};
pub use rng::{RandomSource, SystemRandom};
pub use secret::SecretBytes;
pub use signature::{KeyKind, PrivateKey, SignatureScheme};
pub use sk::{Role, SkCipher};
pub use transform::{Encryption, Esn, EspSuite, Integrity, KeGroup, Prf, Transform, TransformType};

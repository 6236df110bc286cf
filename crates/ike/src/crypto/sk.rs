//! The Encrypted and Authenticated (SK) payload's protection (RFC 7296
//! section 3.14) for the IKE SA's own messages:
//!
//! - AES-GCM-16 (RFC 5282): 8-byte explicit IV, nonce = 4-byte salt from
//!   SK_e | IV, AAD = everything before the IV (IKE header, unencrypted
//!   payloads, SK payload header), 16-byte tag as the ICV.
//! - ChaCha20-Poly1305 (RFC 7634 section 3): the same layout.
//! - AES-CBC with HMAC-SHA2 (RFC 7296 3.14, RFC 4868): random 16-byte IV,
//!   padding to the block size with a Pad Length byte, ICV = truncated
//!   HMAC over everything from the IKE header to the Pad Length.
//!
//! The caller (the message codec) owns the framing: it asks
//! [`SkCipher::body_len`] for the SK payload body's size, writes the IKE
//! header and SK payload header with the final lengths, and passes those
//! bytes as `aad` with the inner payloads as `plaintext`. The returned body
//! (IV | ciphertext | ICV) follows the SK payload header on the wire.

use aes::cipher::generic_array::GenericArray;
use aes::cipher::{BlockDecrypt, BlockEncrypt, KeyInit};
use aes::{Aes128, Aes256};
use ring::{aead, hmac};
use subtle::ConstantTimeEq;

use super::error::CryptoError;
use super::kdf::IkeSaKeys;
use super::proposal::IkeSuite;
use super::rng::RandomSource;
use super::transform::{Encryption, Integrity};

/// Which end of the IKE SA we are (the original initiator keeps the role
/// across rekeys only for the new SA's own messages; the engine decides).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Sent the IKE_SA_INIT request: protects with SK_ei/SK_ai.
    Initiator,
    /// Answered it: protects with SK_er/SK_ar.
    Responder,
}

/// Boxed: the key schedules are 0.5-1 KiB each and the engine moves
/// these around with its SA state.
enum Cipher {
    Aead(Box<aead::LessSafeKey>),
    Cbc128(Box<Aes128>),
    Cbc256(Box<Aes256>),
}

/// One direction's SK payload protection.
pub struct SkCipher {
    encryption: Encryption,
    integrity: Option<Integrity>,
    cipher: Cipher,
    salt: [u8; 4],
    integ_key: Option<hmac::Key>,
}

impl std::fmt::Debug for SkCipher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SkCipher")
            .field("encryption", &self.encryption)
            .field("integrity", &self.integrity)
            .finish_non_exhaustive()
    }
}

fn hmac_algorithm(integ: Integrity) -> hmac::Algorithm {
    match integ {
        Integrity::HmacSha1_96 => hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY,
        Integrity::HmacSha256_128 => hmac::HMAC_SHA256,
        Integrity::HmacSha384_192 => hmac::HMAC_SHA384,
        Integrity::HmacSha512_256 => hmac::HMAC_SHA512,
    }
}

impl SkCipher {
    /// A cipher from one direction's keys: `enc_key` is SK_e (the cipher
    /// key followed by the 4-byte salt for AEAD), `integ_key` SK_a (empty
    /// for AEAD).
    pub fn new(
        encryption: Encryption,
        integrity: Option<Integrity>,
        enc_key: &[u8],
        integ_key: &[u8],
    ) -> Result<Self, CryptoError> {
        if enc_key.len() != encryption.keymat_len() {
            return Err(CryptoError::KeyLength {
                expected: encryption.keymat_len(),
                got: enc_key.len(),
            });
        }
        let expected_integ = match (encryption.is_aead(), integrity) {
            (true, None) => 0,
            (false, Some(i)) => i.key_len(),
            _ => return Err(CryptoError::SuiteMismatch),
        };
        if integ_key.len() != expected_integ {
            return Err(CryptoError::KeyLength {
                expected: expected_integ,
                got: integ_key.len(),
            });
        }
        let (key, salt_bytes) = enc_key.split_at(encryption.cipher_key_len());
        let mut salt = [0u8; 4];
        if encryption.is_aead() {
            salt.copy_from_slice(salt_bytes);
        }
        let cipher = match encryption {
            Encryption::AesGcm16_128 | Encryption::AesGcm16_256 | Encryption::ChaCha20Poly1305 => {
                let alg = match encryption {
                    Encryption::AesGcm16_128 => &aead::AES_128_GCM,
                    Encryption::AesGcm16_256 => &aead::AES_256_GCM,
                    _ => &aead::CHACHA20_POLY1305,
                };
                let unbound = aead::UnboundKey::new(alg, key).map_err(|_| CryptoError::Internal)?;
                Cipher::Aead(Box::new(aead::LessSafeKey::new(unbound)))
            }
            Encryption::AesCbc128 => Cipher::Cbc128(Box::new(
                Aes128::new_from_slice(key).map_err(|_| CryptoError::Internal)?,
            )),
            Encryption::AesCbc256 => Cipher::Cbc256(Box::new(
                Aes256::new_from_slice(key).map_err(|_| CryptoError::Internal)?,
            )),
        };
        let integ_key = integrity.map(|i| hmac::Key::new(hmac_algorithm(i), integ_key));
        Ok(SkCipher {
            encryption,
            integrity,
            cipher,
            salt,
            integ_key,
        })
    }

    /// The (outbound, inbound) pair for `role` from the IKE SA's keys.
    pub fn pair(
        suite: &IkeSuite,
        keys: &IkeSaKeys,
        role: Role,
    ) -> Result<(SkCipher, SkCipher), CryptoError> {
        let i_to_r = SkCipher::new(
            suite.encryption,
            suite.integrity,
            keys.sk_ei.expose(),
            keys.sk_ai.expose(),
        )?;
        let r_to_i = SkCipher::new(
            suite.encryption,
            suite.integrity,
            keys.sk_er.expose(),
            keys.sk_ar.expose(),
        )?;
        Ok(match role {
            Role::Initiator => (i_to_r, r_to_i),
            Role::Responder => (r_to_i, i_to_r),
        })
    }

    fn icv_len(&self) -> usize {
        self.integrity
            .map_or(self.encryption.aead_icv_len(), Integrity::icv_len)
    }

    /// Padding bytes for `plaintext_len`: the least that makes plaintext,
    /// padding and the Pad Length byte a whole number of cipher blocks.
    fn pad_len(&self, plaintext_len: usize) -> usize {
        let block = self.encryption.block_len();
        (block - (plaintext_len + 1) % block) % block
    }

    /// Size of the SK payload body (IV | encrypted data | ICV) that
    /// [`SkCipher::seal`] produces for `plaintext_len` bytes of inner
    /// payloads: what the SK payload header's length and the IKE header's
    /// length must account for before sealing.
    pub fn body_len(&self, plaintext_len: usize) -> usize {
        self.encryption.iv_len() + plaintext_len + self.pad_len(plaintext_len) + 1 + self.icv_len()
    }

    /// Encrypts and protects `plaintext` (the inner payloads). `aad` is the
    /// message from the IKE header's first byte through the SK payload's
    /// 4-byte generic header, lengths already final. The IV comes from
    /// `rng`.
    pub fn seal(
        &self,
        aad: &[u8],
        plaintext: &[u8],
        rng: &mut dyn RandomSource,
    ) -> Result<Vec<u8>, CryptoError> {
        let iv_len = self.encryption.iv_len();
        let pad = self.pad_len(plaintext.len());
        let mut body = Vec::with_capacity(self.body_len(plaintext.len()));
        body.resize(iv_len, 0);
        rng.fill(&mut body[..iv_len])?;
        body.extend_from_slice(plaintext);
        // Padding content is arbitrary (RFC 7296 3.14); zeros leak nothing.
        body.resize(body.len() + pad, 0);
        body.push(pad as u8);
        let (iv, data) = body.split_at_mut(iv_len);
        match &self.cipher {
            Cipher::Aead(key) => {
                let nonce = self.nonce(iv)?;
                let tag = key
                    .seal_in_place_separate_tag(nonce, aead::Aad::from(aad), data)
                    .map_err(|_| CryptoError::Internal)?;
                body.extend_from_slice(tag.as_ref());
            }
            Cipher::Cbc128(c) => cbc_encrypt(c.as_ref(), iv, data),
            Cipher::Cbc256(c) => cbc_encrypt(c.as_ref(), iv, data),
        }
        if let Some(integ) = self.integrity {
            let icv = self.hmac_icv(integ, aad, &body);
            body.extend_from_slice(&icv);
        }
        Ok(body)
    }

    /// Verifies and decrypts an SK payload body (IV | encrypted data |
    /// ICV) against `aad` (the bytes before it, as for
    /// [`SkCipher::seal`]), returning the inner payloads without padding.
    pub fn open(&self, aad: &[u8], body: &[u8]) -> Result<Vec<u8>, CryptoError> {
        let iv_len = self.encryption.iv_len();
        let icv_len = self.icv_len();
        let block = self.encryption.block_len();
        // At least IV, one block holding the Pad Length byte, and the ICV.
        if body.len() < iv_len + block + icv_len {
            return Err(CryptoError::SkMalformed);
        }
        let (protected, icv) = body.split_at(body.len() - icv_len);
        // (`usize::is_multiple_of` needs Rust 1.87; the workspace says 1.85.)
        #[allow(clippy::manual_is_multiple_of)]
        if (protected.len() - iv_len) % block != 0 {
            return Err(CryptoError::SkMalformed);
        }
        let mut plain = match &self.cipher {
            Cipher::Aead(key) => {
                let (iv, ct) = protected.split_at(iv_len);
                let nonce = self.nonce(iv)?;
                let mut buf = Vec::with_capacity(ct.len() + icv_len);
                buf.extend_from_slice(ct);
                buf.extend_from_slice(icv);
                let len = key
                    .open_in_place(nonce, aead::Aad::from(aad), &mut buf)
                    .map_err(|_| CryptoError::IntegrityCheckFailed)?
                    .len();
                buf.truncate(len);
                buf
            }
            Cipher::Cbc128(_) | Cipher::Cbc256(_) => {
                // Encrypt-then-MAC: check the ICV before touching the data.
                let integ = self.integrity.ok_or(CryptoError::Internal)?;
                let expected = self.hmac_icv(integ, aad, protected);
                if !bool::from(expected.as_slice().ct_eq(icv)) {
                    return Err(CryptoError::IntegrityCheckFailed);
                }
                let (iv, ct) = protected.split_at(iv_len);
                let mut buf = ct.to_vec();
                match &self.cipher {
                    Cipher::Cbc128(c) => cbc_decrypt(c.as_ref(), iv, &mut buf),
                    Cipher::Cbc256(c) => cbc_decrypt(c.as_ref(), iv, &mut buf),
                    Cipher::Aead(_) => return Err(CryptoError::Internal),
                }
                buf
            }
        };
        let pad = *plain.last().ok_or(CryptoError::SkMalformed)? as usize;
        if pad + 1 > plain.len() {
            return Err(CryptoError::BadPadding);
        }
        plain.truncate(plain.len() - pad - 1);
        Ok(plain)
    }

    fn nonce(&self, iv: &[u8]) -> Result<aead::Nonce, CryptoError> {
        let mut n = [0u8; 12];
        n[..4].copy_from_slice(&self.salt);
        n[4..].copy_from_slice(iv);
        aead::Nonce::try_assume_unique_for_key(&n).map_err(|_| CryptoError::Internal)
    }

    fn hmac_icv(&self, integ: Integrity, aad: &[u8], protected: &[u8]) -> Vec<u8> {
        let Some(key) = &self.integ_key else {
            return Vec::new();
        };
        let mut ctx = hmac::Context::with_key(key);
        ctx.update(aad);
        ctx.update(protected);
        let tag = ctx.sign();
        tag.as_ref()[..integ.icv_len()].to_vec()
    }
}

/// CBC encryption in place; `data` is a whole number of blocks.
fn cbc_encrypt<C: BlockEncrypt>(cipher: &C, iv: &[u8], data: &mut [u8]) {
    let mut chain = [0u8; 16];
    chain.copy_from_slice(iv);
    for block in data.chunks_exact_mut(16) {
        for (b, c) in block.iter_mut().zip(chain.iter()) {
            *b ^= c;
        }
        cipher.encrypt_block(GenericArray::from_mut_slice(block));
        chain.copy_from_slice(block);
    }
}

/// CBC decryption in place; `data` is a whole number of blocks.
fn cbc_decrypt<C: BlockDecrypt>(cipher: &C, iv: &[u8], data: &mut [u8]) {
    let mut chain = [0u8; 16];
    chain.copy_from_slice(iv);
    for block in data.chunks_exact_mut(16) {
        let mut next = [0u8; 16];
        next.copy_from_slice(block);
        cipher.decrypt_block(GenericArray::from_mut_slice(block));
        for (b, c) in block.iter_mut().zip(chain.iter()) {
            *b ^= c;
        }
        chain = next;
    }
}

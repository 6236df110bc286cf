//! AES-CBC (RFC 3602) from the RustCrypto `aes` crate (AES-NI when present).
//!
//! CBC is written out here instead of taking the `cbc` crate's
//! Encryptor/Decryptor, which own their cipher and so would copy the whole
//! key schedule for every packet. Encryption is serial by nature and runs in
//! one backend closure; decryption runs eight blocks at a time through
//! `decrypt_blocks` so AES-NI pipelines them.

use aes::cipher::consts::U16;
use aes::cipher::generic_array::GenericArray;
use aes::cipher::{BlockBackend, BlockClosure, BlockDecrypt, BlockEncrypt, BlockSizeUser, KeyInit};
use aes::{Aes128, Aes256};

use super::cbc_hmac::CbcCipher;
use super::Implementation;

/// Blocks decrypted per `decrypt_blocks` call.
const PAR_BLOCKS: usize = 8;

/// CBC encryption as one closure over the cipher's backend, so the CPU
/// feature dispatch happens once per packet, not once per block.
struct CbcEncrypt<'a> {
    iv: [u8; 16],
    buf: &'a mut [u8],
}

impl BlockSizeUser for CbcEncrypt<'_> {
    type BlockSize = U16;
}

impl BlockClosure for CbcEncrypt<'_> {
    fn call<B: BlockBackend<BlockSize = U16>>(self, backend: &mut B) {
        let mut chain = GenericArray::<u8, U16>::from(self.iv);
        for block in self.buf.chunks_exact_mut(16) {
            for (c, b) in chain.iter_mut().zip(block.iter()) {
                *c ^= b;
            }
            backend.proc_block_inplace(&mut chain);
            block.copy_from_slice(&chain);
        }
    }
}

fn encrypt_cbc<C: BlockEncrypt + BlockSizeUser<BlockSize = U16>>(
    cipher: &C,
    iv: &[u8; 16],
    buf: &mut [u8],
) {
    cipher.encrypt_with_backend(CbcEncrypt { iv: *iv, buf });
}

fn decrypt_cbc<C: BlockDecrypt + BlockSizeUser<BlockSize = U16>>(
    cipher: &C,
    iv: &[u8; 16],
    buf: &mut [u8],
) {
    let mut prev = *iv;
    for chunk in buf.chunks_mut(16 * PAR_BLOCKS) {
        let n = chunk.len() / 16;
        let mut blocks = [GenericArray::<u8, U16>::default(); PAR_BLOCKS];
        for (block, ct) in blocks.iter_mut().zip(chunk.chunks_exact(16)) {
            block.copy_from_slice(ct);
        }
        cipher.decrypt_blocks(&mut blocks[..n]);
        for (i, pt) in chunk.chunks_exact_mut(16).enumerate() {
            // pt still holds ciphertext block i: keep it as the next chain value.
            let mut ct = [0u8; 16];
            ct.copy_from_slice(pt);
            for ((out, d), p) in pt.iter_mut().zip(blocks[i].iter()).zip(prev.iter()) {
                *out = d ^ p;
            }
            prev = ct;
        }
    }
}

macro_rules! rustcrypto_aes_cbc {
    ($name:ident, $aes:ty, $key:expr, $doc:expr) => {
        #[doc = $doc]
        ///
        /// The `aes` crate's `zeroize` feature wipes the key schedule on drop.
        pub struct $name {
            aes: $aes,
        }

        impl CbcCipher for $name {
            const KEY_LEN: usize = $key;
            const IMPLEMENTATION: Implementation = Implementation::RustCrypto;

            fn new(key: &[u8]) -> Option<Self> {
                Some(Self {
                    aes: <$aes>::new_from_slice(key).ok()?,
                })
            }

            fn encrypt(&self, iv: &[u8; 16], buf: &mut [u8]) {
                encrypt_cbc(&self.aes, iv, buf)
            }

            fn decrypt(&self, iv: &[u8; 16], buf: &mut [u8]) {
                decrypt_cbc(&self.aes, iv, buf)
            }
        }
    };
}

rustcrypto_aes_cbc!(Aes128Cbc, Aes128, 16, "AES-128-CBC, RustCrypto.");
rustcrypto_aes_cbc!(Aes256Cbc, Aes256, 32, "AES-256-CBC, RustCrypto.");

#[cfg(test)]
mod tests {
    use super::*;

    /// CBC straight from its definition (SP 800-38A §6.2), one block at a time.
    fn reference_decrypt(aes: &Aes128, iv: &[u8; 16], ct: &[u8]) -> Vec<u8> {
        let mut prev = *iv;
        let mut out = Vec::new();
        for block in ct.chunks_exact(16) {
            let mut b = GenericArray::clone_from_slice(block);
            aes.decrypt_block(&mut b);
            out.extend(b.iter().zip(prev.iter()).map(|(d, p)| d ^ p));
            prev.copy_from_slice(block);
        }
        out
    }

    #[test]
    fn matches_the_definition_for_every_length_around_the_batch_size() {
        let key = [7u8; 16];
        let cbc = Aes128Cbc::new(&key).unwrap();
        let aes = Aes128::new_from_slice(&key).unwrap();
        let iv = [0x3cu8; 16];
        for blocks in 0..40 {
            let plain: Vec<u8> = (0..blocks * 16).map(|i| (i * 31 + blocks) as u8).collect();
            let mut buf = plain.clone();
            cbc.encrypt(&iv, &mut buf);
            assert_eq!(reference_decrypt(&aes, &iv, &buf), plain, "{blocks} blocks");
            cbc.decrypt(&iv, &mut buf);
            assert_eq!(buf, plain, "{blocks} blocks");
        }
    }
}

//! HMAC (RFC 2104) over SHA-256 and SHA-1, driven through the RustCrypto
//! compression functions (`sha2::compress256`, `sha1::compress`, which use
//! SHA-NI where the CPU has it).
//!
//! Why not the `hmac` crate: its keyed state is private and has no zeroize
//! support, so wiping it on drop took an `unsafe` cast. Here the two keyed
//! states (after the padded key XOR ipad / opad) are plain `[u32; N]` arrays
//! that `Zeroize` wipes safely, and per packet the work is the same: copy a
//! state, compress the message blocks (buffered and padded by `block_buffer`
//! as in the digests themselves), one more block for the outer hash.

use sha2::digest::block_buffer::{BlockBuffer, Eager};
use sha2::digest::generic_array::{typenum::U64, GenericArray};
use zeroize::Zeroize;

/// Bytes of one block of both hashes.
const BLOCK: usize = 64;
/// One block as the compression functions take it.
type Block = GenericArray<u8, U64>;

/// A Merkle-Damgard hash with 64-byte blocks and a big-endian length.
pub(crate) trait Md64 {
    /// The chaining state.
    type State: Copy + Zeroize + Send + Sync;
    /// The initial state (FIPS 180-4 §5.3).
    const IV: Self::State;
    /// Bytes of the digest.
    const OUT: usize;
    /// Absorbs `blocks` in order.
    fn compress(state: &mut Self::State, blocks: &[Block]);
    /// Writes the state as the big-endian digest into `out[..OUT]`.
    fn digest(state: &Self::State, out: &mut [u8]);
}

pub(crate) struct Sha256;
pub(crate) struct Sha1;

fn write_be(words: &[u32], out: &mut [u8]) {
    for (chunk, word) in out.chunks_exact_mut(4).zip(words) {
        chunk.copy_from_slice(&word.to_be_bytes());
    }
}

impl Md64 for Sha256 {
    type State = [u32; 8];
    const IV: [u32; 8] = [
        0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab,
        0x5be0cd19,
    ];
    const OUT: usize = 32;
    fn compress(state: &mut [u32; 8], blocks: &[Block]) {
        sha2::compress256(state, blocks);
    }
    fn digest(state: &[u32; 8], out: &mut [u8]) {
        write_be(state, &mut out[..Self::OUT]);
    }
}

impl Md64 for Sha1 {
    type State = [u32; 5];
    const IV: [u32; 5] = [0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476, 0xc3d2e1f0];
    const OUT: usize = 20;
    fn compress(state: &mut [u32; 5], blocks: &[Block]) {
        sha1::compress(state, blocks);
    }
    fn digest(state: &[u32; 5], out: &mut [u8]) {
        write_be(state, &mut out[..Self::OUT]);
    }
}

/// The two keyed states of HMAC-`H`, wiped on drop.
pub(crate) struct KeyedHmac<H: Md64> {
    inner: H::State,
    outer: H::State,
}

impl<H: Md64> KeyedHmac<H> {
    /// Keys HMAC with `key`, which must not be longer than a block (every
    /// ESP key is: 32 or 20 bytes); `None` if it is.
    pub(crate) fn new(key: &[u8]) -> Option<Self> {
        if key.len() > BLOCK {
            return None;
        }
        let mut pad = Block::default();
        pad[..key.len()].copy_from_slice(key);
        let keyed = |xor: u8| {
            let mut block = pad;
            block.iter_mut().for_each(|b| *b ^= xor);
            let mut state = H::IV;
            H::compress(&mut state, core::slice::from_ref(&block));
            block.as_mut_slice().zeroize();
            state
        };
        let (inner, outer) = (keyed(0x36), keyed(0x5c));
        pad.as_mut_slice().zeroize();
        Some(Self { inner, outer })
    }

    /// HMAC of the concatenation of `parts` into `out[..H::OUT]`.
    pub(crate) fn mac(&self, parts: &[&[u8]], out: &mut [u8; 32]) {
        // The same buffering and padding the `sha2` / `sha1` digests use:
        // whole blocks go to the compression function straight from the
        // input, only a partial block is copied.
        let mut state = self.inner;
        let mut buffer = BlockBuffer::<U64, Eager>::default();
        let mut len = BLOCK as u64; // the key block already absorbed
        for part in parts {
            len += part.len() as u64;
            buffer.digest_blocks(part, |blocks| H::compress(&mut state, blocks));
        }
        buffer.len64_padding_be(len * 8, |block| {
            H::compress(&mut state, core::slice::from_ref(block))
        });
        H::digest(&state, out);

        let mut state = self.outer;
        let mut buffer = BlockBuffer::<U64, Eager>::default();
        buffer.digest_blocks(&out[..H::OUT], |blocks| H::compress(&mut state, blocks));
        let len = (BLOCK + H::OUT) as u64;
        buffer.len64_padding_be(len * 8, |block| {
            H::compress(&mut state, core::slice::from_ref(block))
        });
        H::digest(&state, out);
    }
}

impl<H: Md64> Drop for KeyedHmac<H> {
    fn drop(&mut self) {
        self.inner.zeroize();
        self.outer.zeroize();
    }
}

#[cfg(test)]
mod tests {
    use hmac::{Hmac, Mac};

    use super::*;

    fn oracle256(key: &[u8], msg: &[u8]) -> Vec<u8> {
        let mut mac = Hmac::<sha2::Sha256>::new_from_slice(key).unwrap();
        mac.update(msg);
        mac.finalize().into_bytes().to_vec()
    }

    fn oracle1(key: &[u8], msg: &[u8]) -> Vec<u8> {
        let mut mac = Hmac::<sha1::Sha1>::new_from_slice(key).unwrap();
        mac.update(msg);
        mac.finalize().into_bytes().to_vec()
    }

    /// Every message length around the one- and two-block padding cases,
    /// split into parts at every kind of boundary, against the `hmac` crate.
    #[test]
    fn agrees_with_the_hmac_crate_at_every_length_and_split() {
        let data: Vec<u8> = (0..1200u32).map(|i| (i * 7 + 3) as u8).collect();
        // Every length to past four blocks, then across full batches.
        let lens = (0..300)
            .chain((300..1200).step_by(13))
            .chain([511, 512, 513, 575, 576, 1023, 1024, 1025, 1088]);
        for key_len in [0, 1, 20, 32, 63, 64] {
            let key: Vec<u8> = (0..key_len as u8).map(|i| i ^ 0xa5).collect();
            let sha256 = KeyedHmac::<Sha256>::new(&key).unwrap();
            let sha1 = KeyedHmac::<Sha1>::new(&key).unwrap();
            for len in lens.clone() {
                let msg = &data[..len];
                for split in [0, 1, 8, 24, 55, 56, 63, 64, 65, 128, 448, 512] {
                    let split = split.min(len);
                    let (a, b) = msg.split_at(split);
                    let (b, c) = b.split_at(b.len() / 2);
                    let parts: [&[u8]; 4] = [a, b, &[], c];
                    let mut out = [0u8; 32];
                    sha256.mac(&parts, &mut out);
                    let want = oracle256(&key, msg);
                    assert_eq!(out[..32], want[..], "sha256 key {key_len} len {len}");
                    sha1.mac(&parts, &mut out);
                    let want = oracle1(&key, msg);
                    assert_eq!(out[..20], want[..], "sha1 key {key_len} len {len}");
                }
            }
        }
    }

    #[test]
    fn keys_longer_than_a_block_are_refused() {
        assert!(KeyedHmac::<Sha256>::new(&[1; 65]).is_none());
    }
}

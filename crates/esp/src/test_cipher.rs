//! A toy cipher with the real layout, for unit tests of the engine only:
//! XOR "encryption" and an FNV-based "ICV". Not secure, never built outside tests.

use crate::crypto::{EspCipher, IcvMismatch};
use crate::Suite;

pub(crate) struct ToyCipher(pub Suite);

fn fnv(seed: u64, parts: &[&[u8]]) -> u64 {
    let mut h = seed;
    for part in parts {
        for &b in *part {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x100_0000_01b3);
        }
    }
    h
}

impl ToyCipher {
    fn icv(&self, authenticated: &[u8], seq: u64, esn: bool) -> [u8; 16] {
        let hi = if esn { (seq >> 32) as u32 } else { 0 }.to_be_bytes();
        let a = fnv(0xcbf2_9ce4_8422_2325, &[authenticated, &hi]);
        let b = fnv(0x84222325_cbf29ce4, &[&hi, authenticated]);
        let mut out = [0u8; 16];
        out[..8].copy_from_slice(&a.to_be_bytes());
        out[8..].copy_from_slice(&b.to_be_bytes());
        out
    }

    fn xor(seq: u64, payload: &mut [u8]) {
        for (i, b) in payload.iter_mut().enumerate() {
            *b ^= (seq as u8).wrapping_mul(31) ^ (i as u8) ^ 0x5A;
        }
    }
}

impl EspCipher for ToyCipher {
    fn suite(&self) -> Suite {
        self.0
    }

    fn seal(&self, esp: &mut [u8], seq: u64, esn: bool) {
        let (iv, icv) = (self.0.iv_len(), self.0.icv_len());
        let n = esp.len();
        for (i, b) in esp[8..8 + iv].iter_mut().enumerate() {
            *b = seq.to_be_bytes()[i % 8];
        }
        Self::xor(seq, &mut esp[8 + iv..n - icv]);
        let tag = self.icv(&esp[..n - icv], seq, esn);
        esp[n - icv..].copy_from_slice(&tag[..icv]);
    }

    fn open(&self, esp: &mut [u8], seq: u64, esn: bool) -> Result<(), IcvMismatch> {
        let (iv, icv) = (self.0.iv_len(), self.0.icv_len());
        let n = esp.len();
        let tag = self.icv(&esp[..n - icv], seq, esn);
        if esp[n - icv..] != tag[..icv] {
            return Err(IcvMismatch);
        }
        Self::xor(seq, &mut esp[8 + iv..n - icv]);
        Ok(())
    }
}

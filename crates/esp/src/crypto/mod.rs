//! Cipher backends behind one small trait, chosen by measurement
//! (see docs/crypto.md).
//!
//! INTERFACE (the ESP engine relies on exactly this; keep it):
//!
//! * [`EspCipher::seal`] and [`EspCipher::open`] get the whole ESP packet,
//!   from the SPI to the end of the ICV:
//!   `SPI(4) | SEQ(4) | IV(iv_len) | payload+padding+padlen+nexthdr | ICV(icv_len)`.
//!   The payload region is already padded to [`crate::Suite::block_align`].
//! * `seq` is the full 64-bit sequence number; `esn` says whether the high 32
//!   bits take part in the AAD (AEAD: SPI || seq-hi || seq-lo, RFC 4106 §5 /
//!   RFC 7634 §3) or are appended to the HMAC input (RFC 4303 §2.2.1).
//! * `seal` writes the IV (AEAD: the 64-bit sequence number, big endian, so a
//!   nonce is never reused under a key; CBC: unpredictable), encrypts the
//!   payload region in place and writes the ICV.
//! * `open` verifies the ICV in constant time *before* decrypting the payload
//!   region in place; on failure it returns [`IcvMismatch`] and the plaintext
//!   must not be trusted.
//! * Keys are zeroized on drop and never printed by `Debug`.

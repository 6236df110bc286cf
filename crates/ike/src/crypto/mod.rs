//! IKEv2 cryptography: transforms, PRF, key derivation, key exchange, SK payload.

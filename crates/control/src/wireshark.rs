//! Wireshark `esp_sa` lines for a config's SAs, so captures of the
//! unprotected side can be decrypted (Edit > Preferences > Protocols > ESP,
//! or the file ~/.config/wireshark/esp_sa).
//!
//! The record format is that of Wireshark's packet-ipsec.c UAT
//! (`esp_uat_flds`): protocol, source, destination, SPI, encryption
//! algorithm, encryption key, authentication algorithm, authentication key,
//! each a quoted string. AEAD keys include the 4-byte salt, as Wireshark
//! expects for "AES-GCM with 16 octet ICV [RFC4106]".

use espgw_esp::Suite;
use zeroize::Zeroizing;

use crate::config::{Config, SaKeys};

/// Wireshark's names for a suite's encryption and authentication algorithms.
pub fn algorithm_names(suite: Suite) -> (&'static str, &'static str) {
    match suite {
        Suite::Aes128Gcm16 | Suite::Aes256Gcm16 => ("AES-GCM with 16 octet ICV [RFC4106]", "NULL"),
        // Only Wireshark 4.2 and later know this one.
        Suite::Chacha20Poly1305 => ("ChaCha20 with Poly1305 [RFC7634]", "NULL"),
        Suite::Aes128Sha256 | Suite::Aes256Sha256 => {
            ("AES-CBC [RFC3602]", "HMAC-SHA-256-128 [RFC4868]")
        }
        Suite::Aes128Sha1 => ("AES-CBC [RFC3602]", "HMAC-SHA-1-96 [RFC2404]"),
    }
}

fn line(
    src: std::net::IpAddr,
    dst: std::net::IpAddr,
    suite: Suite,
    sa: &SaKeys,
) -> Zeroizing<String> {
    let (enc, auth) = algorithm_names(suite);
    let family = if src.is_ipv4() { "IPv4" } else { "IPv6" };
    let auth_key = sa.auth_key.as_ref().map(|k| k.to_hex());
    let auth_key = auth_key
        .as_ref()
        .map_or(String::new(), |k| format!("0x{}", k.as_str()));
    Zeroizing::new(format!(
        "\"{family}\",\"{src}\",\"{dst}\",\"{:#010x}\",\"{enc}\",\"0x{}\",\"{auth}\",\"{auth_key}\"",
        sa.spi,
        sa.key.to_hex().as_str(),
    ))
}

/// A tunnel's two `esp_sa` records: outbound, then inbound (the newest
/// inbound SA; one draining after a rekey is not in the tunnel).
pub fn tunnel_esp_sa_lines(t: &crate::config::Tunnel) -> [Zeroizing<String>; 2] {
    [
        line(t.local, t.remote, t.suite, &t.outbound),
        line(t.remote, t.local, t.suite, &t.inbound),
    ]
}

/// One `esp_sa` record per SA: for each tunnel, outbound then inbound.
/// The lines hold keys; they are zeroized when dropped.
pub fn esp_sa_lines(config: &Config) -> Vec<Zeroizing<String>> {
    let mut lines = Vec::new();
    for t in &config.tunnels {
        lines.push(line(t.local, t.remote, t.suite, &t.outbound));
        lines.push(line(t.remote, t.local, t.suite, &t.inbound));
    }
    lines
}

/// Wireshark's names (packet-isakmp.c, `vs_ikev2_encr_algs` and
/// `vs_ikev2_auth_algs`) for an IKE suite's encryption and integrity;
/// None for what Wireshark cannot decrypt (ChaCha20-Poly1305 in IKE).
pub fn ikev2_algorithm_names(
    suite: &espgw_ike::crypto::IkeSuite,
) -> Option<(&'static str, &'static str)> {
    use espgw_ike::crypto::{Encryption, Integrity};
    let enc = match suite.encryption {
        Encryption::AesCbc128 => "AES-CBC-128 [RFC3602]",
        Encryption::AesCbc256 => "AES-CBC-256 [RFC3602]",
        Encryption::AesGcm16_128 => "AES-GCM-128 with 16 octet ICV [RFC5282]",
        Encryption::AesGcm16_256 => "AES-GCM-256 with 16 octet ICV [RFC5282]",
        Encryption::ChaCha20Poly1305 => return None,
    };
    let integ = match suite.integrity {
        None => "NONE [RFC4306]",
        Some(Integrity::HmacSha1_96) => "HMAC_SHA1_96 [RFC2404]",
        Some(Integrity::HmacSha256_128) => "HMAC_SHA2_256_128 [RFC4868]",
        Some(Integrity::HmacSha384_192) => "HMAC_SHA2_384_192 [RFC4868]",
        Some(Integrity::HmacSha512_256) => "HMAC_SHA2_512_256 [RFC4868]",
    };
    Some((enc, integ))
}

/// One `ikev2_decryption_table` record (Wireshark's packet-isakmp.c UAT:
/// SPIi, SPIr, SK_ei, SK_er, encryption, SK_ai, SK_ar, integrity; SPIs
/// and keys in hex, names quoted; AEAD keys with their salt). None for a
/// suite Wireshark cannot decrypt. The line holds keys: zeroized on drop.
pub fn ikev2_line(s: &espgw_ike::engine::IkeSaSecrets) -> Option<Zeroizing<String>> {
    let (enc, integ) = ikev2_algorithm_names(&s.suite)?;
    let hex = |k: &espgw_ike::crypto::SecretBytes| {
        let mut out = Zeroizing::new(String::with_capacity(k.len() * 2));
        for b in k.expose() {
            out.push_str(&format!("{b:02x}"));
        }
        out
    };
    let (ei, er, ai, ar) = (hex(&s.sk_ei), hex(&s.sk_er), hex(&s.sk_ai), hex(&s.sk_ar));
    Some(Zeroizing::new(format!(
        "{:016x},{:016x},{},{},\"{enc}\",{},{},\"{integ}\"",
        s.spi_i,
        s.spi_r,
        ei.as_str(),
        er.as_str(),
        ai.as_str(),
        ar.as_str(),
    )))
}

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

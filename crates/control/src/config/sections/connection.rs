//! `[[connection]]` and its `[[connection.child]]` tables (IKEv2 peers,
//! swanctl.conf names). Model: `config/connection.rs`; reference:
//! docs/config.md.
//!
//! Keys the IKE engine cannot act on yet (a second child) are read and
//! checked like the others, then refused with "not supported yet" at
//! their key: never silently ignored.
//!
//! `auth = "pubkey"` loads `cert`, `key` and `cacerts` here, so `espgw
//! check` reports a key that is not the certificate's, or a certificate
//! that does not chain to one of the CAs at the current time, at its key.

use std::net::IpAddr;

use espgw_esp::SecretBytes;
use espgw_ike::crypto::{parse_esp_proposals, parse_ike_proposals};
use zeroize::Zeroizing;

use super::tunnel::{self, Env};
use super::Located;
use crate::config::connection::{
    Child, Connection, IkeAuth, IkeId, PubKeyAuth, StartAction, DEFAULT_CHILD_REKEY_TIME,
    DEFAULT_CHILD_REPLAY_WINDOW, DEFAULT_ESP_PROPOSALS, DEFAULT_IKE_PROPOSALS,
    DEFAULT_IKE_REKEY_TIME,
};
use crate::config::keys::read_small_regular_file;
use crate::config::model::{
    MssClamp, Policy, PolicyAction as Action, Tunnel, MAX_MSS_CLAMP, MIN_MSS_CLAMP,
};
use crate::config::net::Prefix;
use crate::config::perms;
use crate::config::reader::{join, Ctx, Field, Table};
use crate::config::source::SourceText;
use crate::config::{dn, Diagnostic};
use crate::tables::IpPrefix;

pub(crate) const KEYS: &[&str] = &[
    "name",
    "local",
    "remote",
    "local_id",
    "remote_id",
    "auth",
    "psk",
    "psk_file",
    "cert",
    "key",
    "cacerts",
    "proposals",
    "encap",
    "dpd_delay",
    "rekey_time",
    "reauth_time",
    "start_action",
    "fragmentation",
    "child",
];
pub(crate) const CHILD_KEYS: &[&str] = &[
    "name",
    "local_ts",
    "remote_ts",
    "esp_proposals",
    "rekey_time",
    "life_time",
    "rekey_bytes",
    "rekey_packets",
    "replay_window",
    "mss_clamp",
    "start_action",
    "per_cpu_sas",
];

/// The most `per_cpu_sas` a child may ask for: far beyond any core count
/// (each pair is an IKE exchange and two SAD entries), small enough that
/// a typo does not start thousands of exchanges.
pub(crate) const MAX_PER_CPU_SAS: u32 = 1024;

const PREFIXES: &str = "a list of prefixes like [\"10.1.0.0/24\"]";
/// The longest interval a time key takes: ten years, far beyond any sane
/// lifetime, and small enough that milliseconds never overflow.
const MAX_SECONDS: i128 = 10 * 365 * 24 * 3600;
/// A PSK shorter than this is guessable offline from one captured
/// IKE_AUTH exchange (RFC 7296 2.15 warns of the same).
const MIN_PSK_LEN: usize = 16;

const START_ACTIONS: &[(&str, StartAction)] = &[
    ("none", StartAction::None),
    ("start", StartAction::Start),
    ("trap", StartAction::Trap),
];

/// A connection, and what the tunnel reader also reports.
pub(crate) struct ReadConnection {
    pub connection: Option<Connection>,
    pub inline_keys: bool,
    /// Diagnostics about the psk_file (its own path).
    pub file_diags: Vec<Diagnostic>,
}

fn not_supported(ctx: &mut Ctx, key: &str, what: &str) {
    ctx.error(
        key,
        format!("{what} is not supported yet"),
        Some("leave it out (see docs/config.md [[connection]])"),
    );
}

/// strongSwan's reading of an identity string: an IP address, `@fqdn`,
/// `user@domain`, a distinguished name (with `=`: `C=CH, O=strongSwan,
/// CN=moon`), or a bare name (FQDN).
pub(crate) fn parse_id(s: &str) -> Result<IkeId, String> {
    if s.is_empty() {
        return Err("empty identity".into());
    }
    if dn::looks_like_dn(s) {
        let der = dn::dn_to_der(s).map_err(|e| format!("distinguished name {s:?}: {e}"))?;
        return Ok(IkeId::Dn {
            der,
            text: s.to_string(),
        });
    }
    if let Ok(ip) = s.parse::<IpAddr>() {
        return Ok(IkeId::Ip(ip));
    }
    if let Some(fqdn) = s.strip_prefix('@') {
        if fqdn.is_empty() || fqdn.starts_with('#') {
            return Err(format!("{s:?}: expected @name (key ids are not supported)"));
        }
        return Ok(IkeId::Fqdn(fqdn.to_string()));
    }
    if s.contains('@') {
        return Ok(IkeId::Email(s.to_string()));
    }
    Ok(IkeId::Fqdn(s.to_string()))
}

/// A PSK as strongSwan's secrets take it: `0x` hex, else the UTF-8 bytes.
fn psk_bytes(text: &str) -> Result<SecretBytes, String> {
    if text.starts_with("0x") || text.starts_with("0X") {
        return SecretBytes::from_hex(text);
    }
    if text.is_empty() {
        return Err("empty key".into());
    }
    Ok(SecretBytes::new(text.as_bytes().to_vec()))
}

fn seconds(ctx: &mut Ctx, t: &Table, key: &'static str, default: u64) -> Option<u64> {
    t.get(ctx, key)
        .map_or(Some(i128::from(default)), |f| f.int(ctx, 0, MAX_SECONDS))
        .map(|v| v as u64)
}

fn count(ctx: &mut Ctx, t: &Table, key: &'static str) -> Option<u64> {
    t.get(ctx, key)
        .map_or(Some(0), |f| f.int(ctx, 0, i128::from(u64::MAX)))
        .map(|v| v as u64)
}

fn prefixes(ctx: &mut Ctx, f: &Field) -> Option<Vec<Prefix>> {
    let items = f.one_or_many(ctx, PREFIXES);
    if items.is_empty() {
        f.error(ctx, "empty list", Some(PREFIXES));
        return None;
    }
    let parsed: Vec<Option<Prefix>> = items
        .iter()
        .map(|i| i.parse_with(ctx, "a prefix like \"10.1.0.0/24\"", Prefix::parse))
        .collect();
    parsed.into_iter().collect()
}

/// A proposal list: each item checked by espgw-ike's parser, the error
/// (which names the proposal) at the item.
fn proposals(
    ctx: &mut Ctx,
    t: &Table,
    key: &'static str,
    default: &[&str],
    esp: bool,
) -> Option<Vec<String>> {
    let expected = if esp {
        "strongSwan ESP proposals, e.g. [\"aes128gcm16\", \"aes128gcm16-x25519\"]"
    } else {
        "strongSwan IKE proposals, e.g. [\"aes256gcm16-prfsha384-ecp384\"]"
    };
    let Some(f) = t.get(ctx, key) else {
        return Some(default.iter().map(|s| s.to_string()).collect());
    };
    let items = f.one_or_many(ctx, expected);
    if items.is_empty() {
        f.error(ctx, "empty list", Some(expected));
        return None;
    }
    let mut out = Vec::new();
    let mut ok = true;
    for item in items {
        let Some(s) = item.str(ctx) else {
            ok = false;
            continue;
        };
        let checked = if esp {
            parse_esp_proposals(s).map(|_| ())
        } else {
            parse_ike_proposals(s).map(|_| ())
        };
        match checked {
            Ok(()) => out.push(s.to_string()),
            Err(e) => {
                item.error(ctx, e.to_string(), Some(expected));
                ok = false;
            }
        }
    }
    ok.then_some(out)
}

fn read_mss_clamp(ctx: &mut Ctx, f: &Field) -> Option<MssClamp> {
    if f.is_int() {
        f.int(ctx, i128::from(MIN_MSS_CLAMP), i128::from(MAX_MSS_CLAMP))
            .map(|v| MssClamp::Fixed(v as u16))
    } else {
        f.choice(ctx, &[("auto", MssClamp::Auto)])
    }
}

fn read_child(ctx: &mut Ctx, t: Table, default_start: StartAction) -> Option<Child> {
    let path = t.path.clone();
    let name = t
        .require(ctx, "name", "a child name")
        .and_then(|f| f.str(ctx).map(str::to_string));
    let local_ts = t
        .require(ctx, "local_ts", PREFIXES)
        .and_then(|f| prefixes(ctx, &f));
    let remote_ts = t
        .require(ctx, "remote_ts", PREFIXES)
        .and_then(|f| prefixes(ctx, &f));
    let esp_proposals = proposals(ctx, &t, "esp_proposals", DEFAULT_ESP_PROPOSALS, true);
    let rekey_time = seconds(ctx, &t, "rekey_time", DEFAULT_CHILD_REKEY_TIME);
    // strongSwan: life_time defaults to rekey_time + 10 % (rounded up, so
    // a short rekey_time still leaves time to rekey).
    let life_default = rekey_time.map_or(0, |r| r + r.div_ceil(10));
    let life_time = seconds(ctx, &t, "life_time", life_default);
    if let (Some(r), Some(l)) = (rekey_time, life_time) {
        if r > 0 && l > 0 && l <= r {
            ctx.error(
                &join(&path, "life_time"),
                format!("life_time {l} is not above rekey_time {r}: the SA would expire before its rekey"),
                Some(&format!("more than {r} (default: rekey_time + 10 %)")),
            );
        }
    }
    let rekey_bytes = count(ctx, &t, "rekey_bytes");
    let rekey_packets = count(ctx, &t, "rekey_packets");
    let replay_window = t
        .get(ctx, "replay_window")
        .map_or(Some(i128::from(DEFAULT_CHILD_REPLAY_WINDOW)), |f| {
            f.int(ctx, 0, i128::from(tunnel::MAX_REPLAY_WINDOW))
        })
        .map(|v| v as u32);
    if replay_window == Some(0) {
        ctx.warn(
            &join(&path, "replay_window"),
            "0 turns anti-replay off: captured ESP packets are accepted again (RFC 4303 3.4.3)",
        );
    }
    let mss_clamp = match t.get(ctx, "mss_clamp") {
        None => Some(None),
        Some(f) => read_mss_clamp(ctx, &f).map(Some),
    };
    let start_action = t
        .get(ctx, "start_action")
        .map_or(Some(default_start), |f| f.choice(ctx, START_ACTIONS));
    // RFC 9611: a count, or "auto" (one per data-plane worker, resolved
    // once [dataplane] is known: 0 until then).
    let per_cpu = match t.get(ctx, "per_cpu_sas") {
        None => Some((1, false)),
        Some(f) if f.is_int() => f
            .int(ctx, 1, i128::from(MAX_PER_CPU_SAS))
            .map(|v| (v as u32, false)),
        Some(f) => f.choice(ctx, &[("auto", (0, true))]),
    };
    t.finish(ctx);
    if let (Some(l), Some(r)) = (&local_ts, &remote_ts) {
        let paired = l
            .iter()
            .any(|a| r.iter().any(|b| a.is_ipv4() == b.is_ipv4()));
        if !paired {
            ctx.error(
                &join(&path, "remote_ts"),
                "no remote_ts prefix is of the same IP family as a local_ts prefix",
                Some("at least one IPv4 or IPv6 pair"),
            );
            return None;
        }
    }
    Some(Child {
        name: name?,
        local_ts: local_ts?,
        remote_ts: remote_ts?,
        esp_proposals: esp_proposals?,
        rekey_time: rekey_time?,
        life_time: life_time?,
        rekey_bytes: rekey_bytes?,
        rekey_packets: rekey_packets?,
        replay_window: replay_window?,
        mss_clamp: mss_clamp?,
        start_action: start_action?,
        per_cpu_sas: per_cpu?.0,
        per_cpu_auto: per_cpu?.1,
    })
}

/// Reads `psk` / `psk_file`: exactly one of them with `auth = "psk"`.
fn read_psk(
    ctx: &mut Ctx,
    t: &Table,
    env: &Env,
    inline: &mut bool,
    file_diags: &mut Vec<Diagnostic>,
) -> Option<SecretBytes> {
    let path = t.path.clone();
    let psk = t.get(ctx, "psk");
    let file = t.get(ctx, "psk_file");
    match (psk, file) {
        (Some(_), Some(f)) => {
            f.error(
                ctx,
                "psk and psk_file are both given",
                Some("one of the two"),
            );
            None
        }
        (None, None) => {
            ctx.error(
                &join(&path, "psk"),
                "auth = \"psk\" needs a pre-shared key",
                Some("psk = \"...\" or psk_file = \"path\""),
            );
            None
        }
        (Some(f), None) => {
            *inline = true;
            // Never echo the value: errors name a position only.
            let key = f.parse_with(ctx, "the key as text, or 0x-prefixed hex", psk_bytes)?;
            if key.len() < MIN_PSK_LEN {
                warn_short(&f, ctx, key.len());
            }
            Some(key)
        }
        (None, Some(f)) => {
            let rel = f.str(ctx)?;
            let full = env.base_dir.join(rel);
            let text = match read_small_regular_file(&full) {
                Ok(t) => Zeroizing::new(t),
                Err(e) => {
                    f.error(
                        ctx,
                        format!("cannot read psk file {rel:?}: {e}"),
                        Some("a readable regular file holding the key"),
                    );
                    return None;
                }
            };
            if env.host.check_permissions {
                let src = SourceText::new(&full, String::new());
                let mut fctx = Ctx::new(&src);
                perms::warn_if_unsafe(&mut fctx, &full, perms::Holds::Keys);
                file_diags.extend(fctx.diags);
            }
            // One line: the trailing newline an editor adds is no part of it.
            let line = text.trim_end_matches(['\n', '\r']);
            match psk_bytes(line) {
                Ok(k) => {
                    if k.len() < MIN_PSK_LEN {
                        warn_short(&f, ctx, k.len());
                    }
                    Some(k)
                }
                Err(e) => {
                    f.error(
                        ctx,
                        format!("psk file {rel:?}: {e}"),
                        Some("the key as text, or 0x-prefixed hex"),
                    );
                    None
                }
            }
        }
    }
}

/// Reads the PEM file a path field names (a regular file of at most
/// 64 KiB, like key files); errors at the field.
fn read_pem(
    ctx: &mut Ctx,
    f: &Field,
    env: &Env,
    what: &str,
) -> Option<(String, Zeroizing<String>)> {
    let rel = f.str(ctx)?;
    let full = env.base_dir.join(rel);
    match read_small_regular_file(&full) {
        Ok(t) => Some((rel.to_string(), Zeroizing::new(t))),
        Err(e) => {
            f.error(
                ctx,
                format!("cannot read {what} file {rel:?}: {e}"),
                Some("a readable regular PEM file"),
            );
            None
        }
    }
}

/// The UNIX time now, for checking our certificate's validity; the
/// engine itself reads no clock.
fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Reads and checks `cert`, `key` and `cacerts` with `auth = "pubkey"`.
fn read_pubkey(
    ctx: &mut Ctx,
    t: &Table,
    env: &Env,
    file_diags: &mut Vec<Diagnostic>,
) -> Option<PubKeyAuth> {
    use espgw_ike::crypto::{cert as x509, signature, PrivateKey};
    for key in ["psk", "psk_file"] {
        if let Some(f) = t.get(ctx, key) {
            f.error(
                ctx,
                format!("{key} is only for auth = \"psk\""),
                Some("leave it out with auth = \"pubkey\""),
            );
        }
    }
    let cert_field = t.require(
        ctx,
        "cert",
        "a PEM file with our certificate (then intermediates)",
    );
    let chain = cert_field.as_ref().and_then(|f| {
        let (rel, text) = read_pem(ctx, f, env, "cert")?;
        match x509::certs_from_pem(text.as_bytes()) {
            Ok(c) => Some((rel, c)),
            Err(e) => {
                f.error(
                    ctx,
                    format!("cert file {rel:?}: {e}"),
                    Some("PEM CERTIFICATE blocks, ours first"),
                );
                None
            }
        }
    });
    let key_field = t.require(ctx, "key", "a PEM file with our private key");
    let key = key_field.as_ref().and_then(|f| {
        let (rel, text) = read_pem(ctx, f, env, "key")?;
        if env.host.check_permissions {
            let full = env.base_dir.join(&rel);
            let src = SourceText::new(&full, String::new());
            let mut fctx = Ctx::new(&src);
            perms::warn_if_unsafe(&mut fctx, &full, perms::Holds::Keys);
            file_diags.extend(fctx.diags);
        }
        // Never echo the key: the error names the file only.
        match PrivateKey::from_pem(text.as_bytes()) {
            Ok(k) => Some((rel, k)),
            Err(_) => {
                f.error(
                    ctx,
                    format!("key file {rel:?}: no usable private key (ECDSA P-256/P-384 or RSA; PKCS#8, SEC1 or PKCS#1 PEM)"),
                    Some("the certificate's private key in PEM"),
                );
                None
            }
        }
    });
    let mut cacerts = Vec::new();
    let mut cas_ok = true;
    match t.get(ctx, "cacerts") {
        None => {
            ctx.error(
                &join(&t.path, "cacerts"),
                "auth = \"pubkey\" needs the CAs that issue the peers' certificates",
                Some("cacerts = [\"ca.pem\"]"),
            );
            cas_ok = false;
        }
        Some(f) => {
            let items = f.one_or_many(ctx, "a list of PEM file paths");
            if items.is_empty() {
                f.error(ctx, "empty list", Some("a list of PEM file paths"));
                cas_ok = false;
            }
            for item in items {
                let Some((rel, text)) = read_pem(ctx, &item, env, "cacerts") else {
                    cas_ok = false;
                    continue;
                };
                match x509::certs_from_pem(text.as_bytes()) {
                    Ok(c) => cacerts.extend(c),
                    Err(e) => {
                        item.error(
                            ctx,
                            format!("cacerts file {rel:?}: {e}"),
                            Some("PEM CERTIFICATE blocks"),
                        );
                        cas_ok = false;
                    }
                }
            }
        }
    }
    let ((cert_rel, chain), (key_rel, key)) = (chain?, key?);
    let ee = &chain[0];
    let probe = b"espgw check: does the key belong to the certificate?";
    let matches = key
        .sign_auth(None, probe)
        .ok()
        .is_some_and(|sig| signature::verify_auth(ee, probe, &sig).is_ok());
    if !matches {
        if let Some(f) = &key_field {
            f.error(
                ctx,
                format!("the key in {key_rel:?} is not the private key of the certificate in {cert_rel:?}"),
                Some("the certificate's own private key"),
            );
        }
        return None;
    }
    if !cas_ok {
        return None;
    }
    if let Err(e) = x509::validate_chain(ee, &chain[1..], &cacerts, unix_now()) {
        let subject = x509::subject(ee)
            .ok()
            .and_then(|s| dn::dn_text(&s))
            .unwrap_or_default();
        if let Some(f) = &cert_field {
            f.error(
                ctx,
                format!("the certificate \"{subject}\" in {cert_rel:?}: {e} (checked against cacerts, now)"),
                Some("a certificate valid now, issued (through the intermediates after it) by one of cacerts"),
            );
        }
        return None;
    }
    Some(PubKeyAuth {
        cert: chain,
        key,
        cacerts,
    })
}

fn warn_short(f: &Field, ctx: &mut Ctx, len: usize) {
    {
        ctx.warn(
            &f.path,
            format!(
                "the pre-shared key is {len} bytes: one captured IKE_AUTH lets an attacker \
                 guess it offline; use {MIN_PSK_LEN} or more random bytes"
            ),
        );
    }
}

pub(crate) fn read(ctx: &mut Ctx, t: Table, env: &Env) -> ReadConnection {
    let path = t.path.clone();
    let mut inline_keys = false;
    let mut file_diags = Vec::new();
    let name = t
        .require(ctx, "name", "a connection name")
        .and_then(|f| f.str(ctx).map(str::to_string));
    if let Some(n) = &name {
        if n.contains('/') {
            ctx.error(
                &join(&path, "name"),
                format!("{n:?} contains '/', which separates connection and child names"),
                Some("a name without '/'"),
            );
        }
    }
    let local = t
        .require(ctx, "local", "this gateway's outer address")
        .and_then(|f| f.parse::<IpAddr>(ctx, "an IP address", "an IPv4 or IPv6 address"));
    let remote = t
        .require(ctx, "remote", "the peer's address or \"%any\"")
        .and_then(|f| {
            if f.peek_str() == Some("%any") {
                Some(None)
            } else {
                f.parse::<IpAddr>(ctx, "an IP address", "an IPv4 or IPv6 address, or \"%any\"")
                    .map(Some)
            }
        });
    let local_id_field = t.get(ctx, "local_id");
    let local_id = match &local_id_field {
        None => Some(None),
        Some(f) => f
            .parse_with(
                ctx,
                "an IP address, @fqdn, fqdn, user@domain or a DN like \"C=CH, O=org, CN=name\"",
                parse_id,
            )
            .map(Some),
    };
    let remote_id = match t.get(ctx, "remote_id") {
        None => Some(None),
        Some(f) if f.peek_str() == Some("%any") => Some(None),
        Some(f) => f
            .parse_with(
                ctx,
                "an IP address, @fqdn, fqdn, user@domain, a DN or \"%any\"",
                parse_id,
            )
            .map(Some),
    };
    let auth_psk = t.get(ctx, "auth").map_or(Some(true), |f| {
        f.choice(ctx, &[("psk", true), ("pubkey", false)])
    });
    let mut auth = None;
    match auth_psk {
        Some(true) => {
            for key in ["cert", "key", "cacerts"] {
                if let Some(f) = t.get(ctx, key) {
                    f.error(
                        ctx,
                        format!("{key} is only for auth = \"pubkey\""),
                        Some("leave it out with auth = \"psk\""),
                    );
                }
            }
            auth = read_psk(ctx, &t, env, &mut inline_keys, &mut file_diags).map(IkeAuth::Psk);
        }
        Some(false) => {
            auth = read_pubkey(ctx, &t, env, &mut file_diags).map(|p| IkeAuth::PubKey(Box::new(p)));
        }
        None => {}
    }
    // strongSwan's defaults: our address with a PSK, our certificate's
    // subject with certificates; a configured one must be in it.
    let local_id = match (local_id, &auth) {
        (Some(None), Some(IkeAuth::PubKey(p))) => espgw_ike::crypto::cert::subject(&p.cert[0])
            .ok()
            .and_then(|der| {
                let text = dn::dn_text(&der)?;
                Some(IkeId::Dn { der, text })
            }),
        (Some(None), _) => local.map(IkeId::Ip),
        (Some(Some(id)), Some(IkeAuth::PubKey(p))) => {
            let ok = espgw_ike::crypto::cert::id_matches(&p.cert[0], &id.identification())
                .unwrap_or(false);
            if !ok {
                if let Some(f) = &local_id_field {
                    f.error(
                        ctx,
                        format!("{id} is not in our certificate (its subject DN or a subjectAltName): the peer would refuse it"),
                        Some("the certificate's subject DN or one of its subjectAltNames, or leave local_id out"),
                    );
                }
                None
            } else {
                Some(id)
            }
        }
        (Some(Some(id)), _) => Some(id),
        (None, _) => None,
    };
    let proposals = proposals(ctx, &t, "proposals", DEFAULT_IKE_PROPOSALS, false);
    let encap_auto = t.get(ctx, "encap").map_or(Some(true), |f| {
        f.choice(ctx, &[("auto", true), ("udp", false)])
    });
    let dpd_delay = seconds(ctx, &t, "dpd_delay", 0);
    let rekey_time = seconds(ctx, &t, "rekey_time", DEFAULT_IKE_REKEY_TIME);
    let reauth_time = seconds(ctx, &t, "reauth_time", 0);
    let start_action_field = t.get(ctx, "start_action");
    let start_action = start_action_field
        .as_ref()
        .map_or(Some(StartAction::None), |f| f.choice(ctx, START_ACTIONS));
    let fragmentation = t
        .get(ctx, "fragmentation")
        .map_or(Some(true), |f| f.bool(ctx));

    let mut children = Vec::new();
    let mut children_ok = true;
    let child_tables: Vec<Table> = match t.get(ctx, "child") {
        None => Vec::new(),
        Some(f) => f
            .array(ctx, "an array of tables ([[connection.child]])")
            .unwrap_or_default()
            .iter()
            .filter_map(|i| i.table(ctx, CHILD_KEYS))
            .collect(),
    };
    let n_children = child_tables.len();
    for ct in child_tables {
        match read_child(ctx, ct, start_action.unwrap_or(StartAction::None)) {
            Some(c) => children.push(c),
            None => children_ok = false,
        }
    }
    // "trap" initiates on the first packet, towards `remote`: with
    // "%any" there is no one to initiate to (as "start").
    if remote == Some(None) {
        for (i, c) in children.iter().enumerate() {
            if c.start_action == StartAction::Trap {
                let key = if start_action == Some(StartAction::Trap) {
                    join(&path, "start_action")
                } else {
                    format!("{path}.child[{i}].start_action")
                };
                ctx.error(
                    &key,
                    "start_action = \"trap\" initiates on the first packet, and remote = \"%any\" names no peer to initiate to",
                    Some("the peer's address as remote, or start_action = \"none\""),
                );
                children_ok = false;
                break;
            }
        }
    }
    if n_children == 0 {
        ctx.error(
            &join(&path, "child"),
            "a connection without a [[connection.child]] protects nothing",
            Some("one [[connection.child]] with local_ts and remote_ts"),
        );
        children_ok = false;
    } else if n_children > 1 {
        not_supported(
            ctx,
            &format!("{path}.child[1]"),
            "a second [[connection.child]] (the engine negotiates the one CHILD_SA of IKE_AUTH)",
        );
        children_ok = false;
    }
    for (i, c) in children.iter().enumerate() {
        if let Some(j) = children[..i].iter().position(|d| d.name == c.name) {
            ctx.error(
                &format!("{path}.child[{i}].name"),
                format!("duplicate child name {:?} (child[{j}])", c.name),
                Some("a unique name"),
            );
            children_ok = false;
        }
    }
    t.finish(ctx);

    let mut connection = None;
    if let (Some(name), Some(local), Some(remote)) = (name.clone(), local, remote) {
        // With "%any" only our side can be checked: the peer's route is
        // whatever address it comes from.
        let port = tunnel::check_endpoints(ctx, &path, local, remote.unwrap_or(local), env);
        if let (
            Some(port),
            Some(local_id),
            Some(remote_id),
            Some(auth),
            Some(proposals),
            Some(encap_auto),
            Some(dpd_delay),
            Some(rekey_time),
            Some(reauth_time),
            Some(_),
            Some(fragmentation),
            true,
            false,
        ) = (
            port,
            local_id,
            remote_id,
            auth,
            proposals,
            encap_auto,
            dpd_delay,
            rekey_time,
            reauth_time,
            start_action,
            fragmentation,
            children_ok,
            name.contains('/'),
        ) {
            connection = Some(Connection {
                name,
                local,
                remote,
                port,
                local_id,
                remote_id,
                auth,
                proposals,
                dpd_delay,
                rekey_time,
                reauth_time,
                fragmentation,
                force_encap: !encap_auto,
                children,
            });
        }
    }
    ReadConnection {
        connection,
        inline_keys,
        file_diags,
    }
}

/// Two selectors (address lists; empty = any) share a packet.
fn lists_overlap(a: &[IpPrefix], b: &[IpPrefix]) -> bool {
    a.is_empty() || b.is_empty() || a.iter().any(|x| b.iter().any(|y| x.overlaps(y)))
}

/// The (local, remote) prefix pairs of a child that can match a packet.
fn child_pairs(c: &Child) -> Vec<(Prefix, Prefix)> {
    c.local_ts
        .iter()
        .flat_map(|l| {
            c.remote_ts
                .iter()
                .filter(|r| r.is_ipv4() == l.is_ipv4())
                .map(|r| (*l, *r))
        })
        .collect()
}

/// Cross-checks: unique names (among connections, and against `[[tunnel]]`
/// names the children's tunnels would take), and the children's selectors
/// against the SPD.
///
/// A child's tunnel joins the SPD at run time, after every configured
/// entry of its priority (1000), and leaves it when its IKE SA fails.
/// So its traffic must not overlap a `[[tunnel]]` (two SAs for one
/// packet), another child, or a bypass `[[policy]]` at any priority (the
/// traffic would go out in clear while no CHILD_SA is up); a discard
/// policy consulted first only gets a warning, like a partly shadowed
/// tunnel.
pub(crate) fn check_connections(
    ctx: &mut Ctx,
    connections: &[Located<Connection>],
    tunnels: &[Located<Tunnel>],
    policies: &[Located<Policy>],
    default_action: Option<Action>,
) {
    for (i, c) in connections.iter().enumerate() {
        let earlier = &connections[..i];
        if let Some(first) = earlier.iter().find(|u| u.item.name == c.item.name) {
            let line = ctx.line_of(&first.path).unwrap_or(0);
            ctx.error(
                &format!("{}.name", c.path),
                format!(
                    "duplicate connection name {:?} (first at line {line})",
                    c.item.name
                ),
                Some("a unique name"),
            );
        }
        for (ci, child) in c.item.children.iter().enumerate() {
            let cpath = format!("{}.child[{ci}]", c.path);
            let tname = c.item.tunnel_name(child);
            if let Some(t) = tunnels.iter().find(|t| t.item.name == tname) {
                ctx.error(
                    &format!("{cpath}.name"),
                    format!("the SA manager names this child's tunnel {tname:?}, which [[tunnel]] at line {} already is", ctx.line_of(&t.path).unwrap_or(0)),
                    Some("another name"),
                );
            }
            let pairs = child_pairs(child);
            let hits = |l: &[IpPrefix], r: &[IpPrefix]| {
                pairs
                    .iter()
                    .any(|(a, b)| lists_overlap(&[*a], l) && lists_overlap(&[*b], r))
            };
            for t in tunnels {
                if hits(&t.item.local_ts, &t.item.remote_ts) {
                    ctx.error(
                        &format!("{cpath}.local_ts"),
                        format!(
                            "its traffic overlaps tunnel {:?} (line {}): two SAs for the same packets",
                            t.item.name,
                            ctx.line_of(&t.path).unwrap_or(0)
                        ),
                        Some("selectors disjoint from every [[tunnel]]"),
                    );
                }
            }
            for p in policies {
                let src: Vec<IpPrefix> = p.item.src.into_iter().collect();
                let dst: Vec<IpPrefix> = p.item.dst.into_iter().collect();
                if !hits(&src, &dst) {
                    continue;
                }
                let line = ctx.line_of(&p.path).unwrap_or(0);
                match p.item.action {
                    Action::Bypass => ctx.error(
                        &format!("{cpath}.local_ts"),
                        format!(
                            "its traffic overlaps the bypass policy at line {line}: it would go out in clear whenever no CHILD_SA is up"
                        ),
                        Some("selectors disjoint from every bypass [[policy]]"),
                    ),
                    Action::Discard if p.item.priority <= tunnel::DEFAULT_PRIORITY => ctx.warn(
                        &format!("{cpath}.local_ts"),
                        format!(
                            "the discard policy at line {line} is consulted first and takes part of its traffic"
                        ),
                    ),
                    Action::Discard => {}
                }
            }
            for (d, other) in connections[..=i].iter().enumerate() {
                let upto = if d == i {
                    ci
                } else {
                    other.item.children.len()
                };
                for (oi, o) in other.item.children[..upto].iter().enumerate() {
                    let l: Vec<IpPrefix> = o.local_ts.clone();
                    let r: Vec<IpPrefix> = o.remote_ts.clone();
                    if hits(&l, &r) {
                        ctx.error(
                            &format!("{cpath}.local_ts"),
                            format!(
                                "its traffic overlaps child {:?} of connection {:?} ({}.child[{oi}])",
                                o.name, other.item.name, other.path
                            ),
                            Some("selectors disjoint from every other child"),
                        );
                    }
                }
            }
        }
    }
    if default_action == Some(Action::Bypass) && !connections.is_empty() {
        ctx.warn(
            "default_action",
            "bypass: a connection's traffic goes out in clear until its first CHILD_SA is up \
             (afterwards a discard entry keeps its place while no SA is up); add a discard \
             [[policy]] for the children's selectors",
        );
    }
}

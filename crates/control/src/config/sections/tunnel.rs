//! `[[tunnel]]`: endpoints, traffic selectors, suite, SA options and keys.

use std::net::IpAddr;
use std::path::Path;

use espgw_esp::Suite;

use super::Located;
use crate::config::keys::{self, DirKeys};
use crate::config::model::{
    EncapMode, Lifetime, Limits, MssClamp, Port, PortId, Route, SaKeys, Side, Tunnel,
    MAX_MSS_CLAMP, MIN_MSS_CLAMP,
};
use crate::config::net::Prefix;
use crate::config::reader::{join, Ctx, Field, Table};
use crate::config::{Diagnostic, HostFacts};

pub(crate) const KEYS: &[&str] = &[
    "name",
    "local",
    "remote",
    "local_ts",
    "remote_ts",
    "esp",
    "esn",
    "replay_window",
    "encap",
    "lifetime",
    "out",
    "in",
    "key_file",
    "priority",
    "mss_clamp",
];
const LIFETIME_KEYS: &[&str] = &[
    "seconds",
    "bytes",
    "packets",
    "soft_seconds",
    "soft_bytes",
    "soft_packets",
];
pub(crate) const DIR_KEYS: &[&str] = &["spi", "key", "auth_key"];

pub const DEFAULT_REPLAY_WINDOW: u32 = 1024;
/// The largest window the ESP engine supports.
pub const MAX_REPLAY_WINDOW: u32 = espgw_esp::MAX_REPLAY_WINDOW;
/// SPD priority of tunnels and policies that do not set one (lower wins).
pub const DEFAULT_PRIORITY: u32 = 1000;
/// Soft limits default to this share (percent) of the hard limit.
pub const SOFT_PERCENT: u64 = 90;

const PREFIXES: &str = "a list of prefixes like [\"10.1.0.0/24\"]";

/// What the tunnel reader needs from the rest of the config.
pub(crate) struct Env<'a> {
    pub ports: &'a [Port],
    pub routes: &'a [Route],
    pub base_dir: &'a Path,
    pub host: &'a HostFacts,
}

/// A tunnel, and whether its keys were written in the config file itself
/// (which then needs the permission check).
pub(crate) struct ReadTunnel {
    pub tunnel: Option<Tunnel>,
    pub inline_keys: bool,
    /// Diagnostics from the tunnel's key file, which has its own positions.
    pub key_file_diags: Vec<Diagnostic>,
}

fn ip(ctx: &mut Ctx, f: &Field) -> Option<IpAddr> {
    f.parse::<IpAddr>(ctx, "an IP address", "an IPv4 or IPv6 address")
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

fn read_lifetime(ctx: &mut Ctx, f: &Field) -> Option<Lifetime> {
    let t = f.table(ctx, LIFETIME_KEYS)?;
    let mut ok = true;
    let mut limit = |ctx: &mut Ctx, key: &'static str| -> Option<u64> {
        let v = t.get(ctx, key)?.int(ctx, 1, i128::from(u64::MAX));
        ok &= v.is_some();
        v.map(|v| v as u64)
    };
    let hard = Limits {
        seconds: limit(ctx, "seconds"),
        bytes: limit(ctx, "bytes"),
        packets: limit(ctx, "packets"),
    };
    let given_soft = Limits {
        seconds: limit(ctx, "soft_seconds"),
        bytes: limit(ctx, "soft_bytes"),
        packets: limit(ctx, "soft_packets"),
    };
    let mut soft = Limits::default();
    for (name, h, s, out) in [
        (
            "seconds",
            hard.seconds,
            given_soft.seconds,
            &mut soft.seconds,
        ),
        ("bytes", hard.bytes, given_soft.bytes, &mut soft.bytes),
        (
            "packets",
            hard.packets,
            given_soft.packets,
            &mut soft.packets,
        ),
    ] {
        *out = match (h, s) {
            (Some(h), Some(s)) if s >= h => {
                ctx.error(
                    &join(&t.path, &format!("soft_{name}")),
                    format!("soft limit {s} is not below the hard limit {h}"),
                    Some(&format!("less than {h}")),
                );
                ok = false;
                None
            }
            (Some(h), None) => Some(h / 100 * SOFT_PERCENT + h % 100 * SOFT_PERCENT / 100),
            (_, s) => s,
        };
    }
    t.finish(ctx);
    ok.then_some(Lifetime { hard, soft })
}

/// `mss_clamp = "auto"` or a number; absent: off.
fn read_mss_clamp(ctx: &mut Ctx, f: &Field) -> Option<MssClamp> {
    if f.is_int() {
        f.int(ctx, i128::from(MIN_MSS_CLAMP), i128::from(MAX_MSS_CLAMP))
            .map(|v| MssClamp::Fixed(v as u16))
    } else {
        f.choice(ctx, &[("auto", MssClamp::Auto)])
    }
}

fn read_spi(ctx: &mut Ctx, f: &Field) -> Option<u32> {
    let spi = f.int(ctx, 0, i128::from(u32::MAX))? as u32;
    if spi < 256 {
        f.error(
            ctx,
            format!("SPI {spi} is reserved (RFC 4303 section 2.1: 0 is never sent, 1-255 are reserved by IANA)"),
            Some("256..=4294967295"),
        );
        return None;
    }
    Some(spi)
}

/// One direction's table in the config: `out = { spi, key, auth_key }`.
struct DirRead {
    spi: Option<u32>,
    keys: DirKeys,
    ok: bool,
}

fn read_dir(ctx: &mut Ctx, t: &Table, key: &'static str, suite: Option<Suite>) -> DirRead {
    let Some(f) = t.require(ctx, key, "a table { spi, key, auth_key }") else {
        return DirRead {
            spi: None,
            keys: DirKeys::default(),
            ok: false,
        };
    };
    let Some(dt) = f.table(ctx, DIR_KEYS) else {
        return DirRead {
            spi: None,
            keys: DirKeys::default(),
            ok: false,
        };
    };
    let spi_field = dt.require(ctx, "spi", "an SPI in 256..=4294967295");
    let spi = spi_field.as_ref().and_then(|f| read_spi(ctx, f));
    let (keys, keys_ok) = keys::read_dir_keys(ctx, &dt, suite);
    dt.finish(ctx);
    DirRead {
        ok: keys_ok && spi.is_some(),
        spi,
        keys,
    }
}

/// Puts a direction's keys together from the config and the key file,
/// and reports what is missing.
fn merge_keys(
    ctx: &mut Ctx,
    path: &str,
    suite: Suite,
    inline: DirKeys,
    file: DirKeys,
    spi: u32,
) -> Option<SaKeys> {
    let key = match (inline.key, file.key) {
        (Some(_), Some(_)) => {
            ctx.error(
                &format!("{path}.key"),
                "key is given both here and in key_file",
                Some("one of the two"),
            );
            return None;
        }
        (Some(k), None) | (None, Some(k)) => k,
        (None, None) => {
            ctx.error(
                path,
                format!("missing key for {suite}"),
                Some(&format!(
                    "key = \"<{} hex bytes>\" or key_file",
                    suite.key_len()
                )),
            );
            return None;
        }
    };
    let auth_key = match (inline.auth_key, file.auth_key) {
        (Some(_), Some(_)) => {
            ctx.error(
                &format!("{path}.auth_key"),
                "auth_key is given both here and in key_file",
                Some("one of the two"),
            );
            return None;
        }
        (Some(k), None) | (None, Some(k)) => Some(k),
        (None, None) if suite.auth_key_len() > 0 => {
            ctx.error(
                path,
                format!("missing auth_key: {suite} needs an integrity key"),
                Some(&format!(
                    "auth_key = \"<{} hex bytes>\"",
                    suite.auth_key_len()
                )),
            );
            return None;
        }
        (None, None) => None,
    };
    Some(SaKeys { spi, key, auth_key })
}

pub(crate) fn read(ctx: &mut Ctx, t: Table, env: &Env) -> ReadTunnel {
    let path = t.path.clone();
    let name = t
        .require(ctx, "name", "a tunnel name")
        .and_then(|f| f.str(ctx).map(str::to_string));
    let local = t
        .require(ctx, "local", "this gateway's outer address")
        .and_then(|f| ip(ctx, &f));
    let remote = t
        .require(ctx, "remote", "the peer's outer address")
        .and_then(|f| ip(ctx, &f));
    let local_ts = t
        .require(ctx, "local_ts", PREFIXES)
        .and_then(|f| prefixes(ctx, &f));
    let remote_ts = t
        .require(ctx, "remote_ts", PREFIXES)
        .and_then(|f| prefixes(ctx, &f));
    let suite_choices: Vec<(&str, Suite)> = Suite::ALL.iter().map(|s| (s.name(), *s)).collect();
    let suite = t
        .require(ctx, "esp", "an ESP suite name")
        .and_then(|f| f.choice(ctx, &suite_choices));
    let esn = t.get(ctx, "esn").map_or(Some(false), |f| f.bool(ctx));
    let replay_window = t
        .get(ctx, "replay_window")
        .map_or(Some(DEFAULT_REPLAY_WINDOW as i128), |f| {
            f.int(ctx, 0, i128::from(MAX_REPLAY_WINDOW))
        })
        .map(|v| v as u32);
    if replay_window == Some(0) {
        ctx.warn(
            &format!("{path}.replay_window"),
            "0 turns anti-replay off: captured ESP packets of this tunnel are accepted again \
             (RFC 4303 3.4.3); leave it at the default unless a peer cannot keep order",
        );
    }
    let encap = t.get(ctx, "encap").map_or(Some(EncapMode::None), |f| {
        f.choice(
            ctx,
            &[("none", EncapMode::None), ("udp", EncapMode::udp_4500())],
        )
    });
    let lifetime = t
        .get(ctx, "lifetime")
        .map_or(Some(Lifetime::default()), |f| read_lifetime(ctx, &f));
    if let (Some(lt), Some(false)) = (&lifetime, esn) {
        if lt.hard.packets.is_some_and(|p| p > u64::from(u32::MAX)) {
            ctx.warn(
                &format!("{path}.lifetime.packets"),
                "without esn the SA expires after 2^32-1 packets anyway (the sequence number must not wrap)",
            );
        }
    }
    let priority = t
        .get(ctx, "priority")
        .map_or(Some(DEFAULT_PRIORITY as i128), |f| {
            f.int(ctx, 0, i128::from(u32::MAX))
        })
        .map(|v| v as u32);
    // Outer Option: the key is valid (absent = off); inner: its value.
    let mss_clamp = match t.get(ctx, "mss_clamp") {
        None => Some(None),
        Some(f) => read_mss_clamp(ctx, &f).map(Some),
    };
    let out = read_dir(ctx, &t, "out", suite);
    let inn = read_dir(ctx, &t, "in", suite);
    let inline_keys = out.keys.any() || inn.keys.any();
    let mut key_file_diags = Vec::new();
    let (file_out, file_in, file_ok) = match t.get(ctx, "key_file") {
        None => (DirKeys::default(), DirKeys::default(), true),
        Some(f) => match f.str(ctx) {
            None => (DirKeys::default(), DirKeys::default(), false),
            Some(rel) => {
                let read = keys::read_key_file(&env.base_dir.join(rel), &path, suite, env.host);
                if let Some(io_error) = read.io_error {
                    f.error(
                        ctx,
                        format!("cannot read key file {rel:?}: {io_error}"),
                        Some("a readable file"),
                    );
                }
                key_file_diags = read.diags;
                (read.out, read.inn, read.ok)
            }
        },
    };
    t.finish(ctx);

    let mut tunnel = None;
    if let (Some(name), Some(local), Some(remote), Some(local_ts), Some(remote_ts), Some(suite)) =
        (name, local, remote, local_ts, remote_ts, suite)
    {
        let endpoints = check_endpoints(ctx, &path, local, remote, env);
        check_selector_families(ctx, &path, &local_ts, &remote_ts);
        let out_keys = out.spi.and_then(|spi| {
            merge_keys(ctx, &format!("{path}.out"), suite, out.keys, file_out, spi)
        });
        let in_keys = inn
            .spi
            .and_then(|spi| merge_keys(ctx, &format!("{path}.in"), suite, inn.keys, file_in, spi));
        if let (
            Some(port),
            Some(esn),
            Some(replay_window),
            Some(encap),
            Some(lifetime),
            Some(priority),
            Some(mss_clamp),
            Some(outbound),
            Some(inbound),
            true,
            true,
            true,
        ) = (
            endpoints,
            esn,
            replay_window,
            encap,
            lifetime,
            priority,
            mss_clamp,
            out_keys,
            in_keys,
            out.ok,
            inn.ok,
            file_ok,
        ) {
            tunnel = Some(Tunnel {
                name,
                local,
                remote,
                port,
                local_ts,
                remote_ts,
                suite,
                esn,
                replay_window,
                encap,
                lifetime,
                outbound,
                inbound,
                priority,
                mss_clamp,
            });
        }
    }
    ReadTunnel {
        tunnel,
        inline_keys,
        key_file_diags,
    }
}

/// The local address must be on an unprotected port; the remote must be
/// reachable from it. Returns the port the tunnel leaves by.
pub(crate) fn check_endpoints(
    ctx: &mut Ctx,
    path: &str,
    local: IpAddr,
    remote: IpAddr,
    env: &Env,
) -> Option<PortId> {
    if local.is_ipv4() != remote.is_ipv4() {
        ctx.error(
            &format!("{path}.remote"),
            format!("remote {remote} and local {local} are of different IP families"),
            Some("both IPv4 or both IPv6"),
        );
        return None;
    }
    let unprotected = || {
        env.ports
            .iter()
            .enumerate()
            .filter(|(_, p)| p.side == Side::Unprotected)
    };
    let Some((id, port)) = unprotected().find(|(_, p)| p.on_link(local)) else {
        let subnets: Vec<String> = unprotected()
            .flat_map(|(_, p)| p.addresses.iter().map(|a| a.subnet().to_string()))
            .collect();
        ctx.error(
            &format!("{path}.local"),
            format!("local address {local} is not on any unprotected port's subnet"),
            Some(&if subnets.is_empty() {
                "an unprotected [[port]] with this address".to_string()
            } else {
                format!("an address in {}", subnets.join(" or "))
            }),
        );
        return None;
    };
    if !port.addresses.iter().any(|a| a.addr == local) {
        ctx.warn(
            &format!("{path}.local"),
            format!("local address {local} is not one of port {:?}'s addresses, so the gateway will not answer ARP/ND for it", port.name),
        );
    }
    let routed = env
        .routes
        .iter()
        .any(|r| r.port.0 == id && r.dest.contains(remote));
    if !port.on_link(remote) && !routed {
        ctx.error(
            &format!("{path}.remote"),
            format!("remote {remote} is neither on port {:?}'s subnet nor covered by a [[route]] via it", port.name),
            Some("a [[route]] with port = the unprotected port"),
        );
        return None;
    }
    Some(PortId(id))
}

/// A selector pairs each local prefix with each remote prefix of the same
/// family; a tunnel where no pair matches could never carry a packet.
fn check_selector_families(ctx: &mut Ctx, path: &str, local_ts: &[Prefix], remote_ts: &[Prefix]) {
    let paired = local_ts
        .iter()
        .any(|l| remote_ts.iter().any(|r| l.is_ipv4() == r.is_ipv4()));
    if !paired {
        ctx.error(
            &format!("{path}.remote_ts"),
            "no remote_ts prefix is of the same IP family as a local_ts prefix",
            Some("at least one IPv4 or IPv6 pair"),
        );
    }
}

/// Cross-checks between tunnels: names and SPIs.
pub(crate) fn check_tunnels(ctx: &mut Ctx, tunnels: &[Located<Tunnel>]) {
    for (i, t) in tunnels.iter().enumerate() {
        let earlier = &tunnels[..i];
        if let Some(first) = earlier.iter().find(|u| u.item.name == t.item.name) {
            let line = ctx.line_of(&first.path).unwrap_or(0);
            ctx.error(
                &format!("{}.name", t.path),
                format!(
                    "duplicate tunnel name {:?} (first at line {line})",
                    t.item.name
                ),
                Some("a unique name"),
            );
        }
        // Inbound packets find their SA by SPI alone, so inbound SPIs must be unique.
        if let Some(first) = earlier
            .iter()
            .find(|u| u.item.inbound.spi == t.item.inbound.spi)
        {
            ctx.error(
                &format!("{}.in.spi", t.path),
                format!(
                    "inbound SPI {:#x} is already used by tunnel {:?} (line {})",
                    t.item.inbound.spi,
                    first.item.name,
                    ctx.line_of(&format!("{}.in.spi", first.path)).unwrap_or(0)
                ),
                Some("a unique inbound SPI"),
            );
        }
        // One key, one SA: the same key (with its salt) in both directions
        // or in two SAs means two senders counting sequence numbers, that
        // is AEAD nonces, from 1 under it (RFC 4106 section 8, RFC 7634
        // section 4). Refused for every suite.
        let t_keys = [("out", &t.item.outbound.key), ("in", &t.item.inbound.key)];
        if t.item.outbound.key.expose() == t.item.inbound.key.expose() {
            ctx.error(
                &format!("{}.in.key", t.path),
                format!(
                    "tunnel {:?}: the in key equals the out key (both ends would send under one key)",
                    t.item.name
                ),
                Some("two different random keys, one per direction"),
            );
        }
        for (dir, key) in t_keys {
            let clash = earlier.iter().find_map(|u| {
                [("out", &u.item.outbound.key), ("in", &u.item.inbound.key)]
                    .into_iter()
                    .find(|(_, k)| k.expose() == key.expose())
                    .map(|(d, _)| (u, d))
            });
            if let Some((first, first_dir)) = clash {
                ctx.error(
                    &format!("{}.{dir}.key", t.path),
                    format!(
                        "tunnel {:?}: the {dir} key is already the {first_dir} key of tunnel {:?}",
                        t.item.name, first.item.name
                    ),
                    Some("a fresh random key for every SA"),
                );
            }
        }
        // The peer finds its SA by SPI too: two of our outbound SAs to the same peer must differ.
        if let Some(first) = earlier
            .iter()
            .find(|u| u.item.outbound.spi == t.item.outbound.spi && u.item.remote == t.item.remote)
        {
            ctx.error(
                &format!("{}.out.spi", t.path),
                format!(
                    "outbound SPI {:#x} to {} is already used by tunnel {:?}",
                    t.item.outbound.spi, t.item.remote, first.item.name
                ),
                Some("a unique SPI per peer"),
            );
        }
    }
}

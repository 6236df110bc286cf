//! `[gateway]`: name, control socket (and who may use it), metrics
//! endpoint, SA state directory, IKE retransmissions.

use std::net::SocketAddr;
use std::path::PathBuf;

use crate::config::model::{default_state_dir, Gateway};
use crate::config::reader::{Ctx, Table};

pub(crate) const KEYS: &[&str] = &[
    "name",
    "control_socket",
    "control_group",
    "metrics",
    "state_dir",
    "ike_retransmit_ms",
    "ike_retransmit_tries",
];

/// The IKE engine's retransmission defaults (strongSwan's, rounded: 4 s,
/// doubling, 5 retransmissions).
pub(crate) const IKE_RETRANSMIT_MS: u64 = 4_000;
pub(crate) const IKE_RETRANSMIT_TRIES: u32 = 5;

/// Where group names are looked up (no NSS: a gateway appliance's groups
/// are local).
const GROUP_FILE: &str = "/etc/group";

pub(crate) fn read(ctx: &mut Ctx, table: Option<Table>) -> Gateway {
    let mut gw = Gateway {
        name: "espgw".to_string(),
        control_socket: None,
        metrics: None,
        state_dir: default_state_dir("espgw"),
        control_group: None,
        ike_retransmit_ms: IKE_RETRANSMIT_MS,
        ike_retransmit_tries: IKE_RETRANSMIT_TRIES,
    };
    let Some(t) = table else { return gw };
    if let Some(f) = t.get(ctx, "name") {
        if let Some(name) = f.str(ctx) {
            if name.is_empty() || name.chars().any(|c| c.is_control() || c.is_whitespace()) {
                f.error(
                    ctx,
                    "name must be non-empty without spaces",
                    Some("a name like \"gw-a\""),
                );
            } else {
                gw.name = name.to_string();
                gw.state_dir = default_state_dir(name);
            }
        }
    }
    if let Some(f) = t.get(ctx, "control_socket") {
        if let Some(path) = f.str(ctx) {
            if path.is_empty() {
                f.error(ctx, "empty path", Some("a unix socket path"));
            } else {
                gw.control_socket = Some(PathBuf::from(path));
            }
        }
    }
    if let Some(f) = t.get(ctx, "control_group") {
        gw.control_group = if f.is_int() {
            f.int(ctx, 0, i128::from(u32::MAX)).map(|g| g as u32)
        } else {
            f.str(ctx).and_then(|name| {
                let groups = std::fs::read_to_string(GROUP_FILE).unwrap_or_default();
                let gid = gid_of(&groups, name);
                if gid.is_none() {
                    f.error(
                        ctx,
                        format!("no group {name:?} in {GROUP_FILE}"),
                        Some("a group name from /etc/group or a numeric gid"),
                    );
                }
                gid
            })
        };
        if gw.control_group == Some(0) {
            // Root may always connect; group 0 would add every member of "root".
            f.error(
                ctx,
                "group 0 (root) may not be the control group",
                Some("a dedicated group such as \"espgw\""),
            );
            gw.control_group = None;
        }
    }
    if let Some(f) = t.get(ctx, "metrics") {
        gw.metrics = f.parse::<SocketAddr>(
            ctx,
            "an IP:PORT address",
            "\"IP:PORT\", e.g. \"127.0.0.1:9100\"",
        );
        if let Some(addr) = gw.metrics.filter(|a| !a.ip().is_loopback()) {
            ctx.warn(
                "gateway.metrics",
                format!(
                    "{addr} is not a loopback address: anyone who reaches it reads tunnel names, \
                     SPIs and traffic counters without authentication; bind 127.0.0.1 (or ::1) \
                     and scrape through a proxy, or firewall the port"
                ),
            );
        }
    }
    if let Some(f) = t.get(ctx, "state_dir") {
        if let Some(path) = f.str(ctx) {
            if path.is_empty() || !path.starts_with('/') {
                f.error(
                    ctx,
                    "state_dir must be an absolute path",
                    Some("a directory such as \"/var/lib/espgw/gw-a\""),
                );
            } else {
                gw.state_dir = PathBuf::from(path);
            }
        }
    }
    if let Some(f) = t.get(ctx, "ike_retransmit_ms") {
        if let Some(ms) = f.int(ctx, 100, 60_000) {
            gw.ike_retransmit_ms = ms as u64;
        }
    }
    if let Some(f) = t.get(ctx, "ike_retransmit_tries") {
        if let Some(n) = f.int(ctx, 0, 20) {
            gw.ike_retransmit_tries = n as u32;
        }
    }
    t.finish(ctx);
    gw
}

/// The gid of group `name` in /etc/group text (`name:x:gid:members`).
fn gid_of(groups: &str, name: &str) -> Option<u32> {
    groups.lines().find_map(|l| {
        let mut parts = l.split(':');
        (parts.next() == Some(name))
            .then(|| parts.nth(1).and_then(|g| g.parse().ok()))
            .flatten()
    })
}

#[cfg(test)]
mod tests {
    use super::gid_of;

    #[test]
    fn group_names_resolve_from_group_file_lines() {
        let text = "root:x:0:\nespgw:x:998:alice,bob\n# comment\nbad:x:zz:\n";
        assert_eq!(gid_of(text, "espgw"), Some(998));
        assert_eq!(gid_of(text, "root"), Some(0));
        assert_eq!(gid_of(text, "esp"), None);
        assert_eq!(gid_of(text, "bad"), None);
        assert_eq!(gid_of(text, "alice"), None);
    }
}

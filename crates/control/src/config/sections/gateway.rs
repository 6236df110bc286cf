//! `[gateway]`: name, control socket, metrics endpoint.

use std::net::SocketAddr;
use std::path::PathBuf;

use crate::config::model::{default_state_dir, Gateway};
use crate::config::reader::{Ctx, Table};

pub(crate) const KEYS: &[&str] = &["name", "control_socket", "metrics", "state_dir"];

pub(crate) fn read(ctx: &mut Ctx, table: Option<Table>) -> Gateway {
    let mut gw = Gateway {
        name: "espgw".to_string(),
        control_socket: None,
        metrics: None,
        state_dir: default_state_dir("espgw"),
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
    if let Some(f) = t.get(ctx, "metrics") {
        gw.metrics = f.parse::<SocketAddr>(
            ctx,
            "an IP:PORT address",
            "\"IP:PORT\", e.g. \"127.0.0.1:9100\"",
        );
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
    t.finish(ctx);
    gw
}

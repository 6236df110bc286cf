//! `sa_add`'s tunnel: the fields of a `[[tunnel]]` table sent as JSON,
//! validated by the config reader itself.
//!
//! The tunnel goes into a small TOML document next to the running
//! config's ports and routes (which the checks of `local`/`remote` need)
//! and is read with [`parse_str`], so a live tunnel passes exactly the
//! checks a tunnel in gateway.toml passes, with the same messages.

use std::path::{Path, PathBuf};

use serde_json::Value;
use toml::{Table, Value as Toml};

use crate::config::{parse_str, Config, HostFacts, Port, Route, Side, Tunnel};

/// Reads tunnels for a running gateway.
#[derive(Debug, Clone)]
pub struct TunnelParser {
    ports: Vec<Port>,
    routes: Vec<Route>,
    /// `key_file` paths are relative to the config's directory.
    base_dir: PathBuf,
}

impl TunnelParser {
    pub fn new(config: &Config) -> TunnelParser {
        TunnelParser {
            ports: config.ports.clone(),
            routes: config.routes.clone(),
            base_dir: config
                .source
                .parent()
                .map_or_else(|| PathBuf::from("."), Path::to_path_buf),
        }
    }

    /// The tunnel `fields` describes, or every problem found, one per line.
    pub fn parse(&self, fields: &Value) -> Result<Tunnel, String> {
        let Value::Object(map) = fields else {
            return Err("tunnel must be a JSON object".into());
        };
        // The gateway would read any path it can, as root, for whoever can
        // reach the socket (and tell readable files from missing ones by its
        // error): keys come in the request. `espgw ctl sa add --tunnel-toml`
        // sends them from a file or standard input on the client's side.
        if map.contains_key("key_file") {
            return Err(
                "tunnel.key_file: not accepted over the control socket; send the keys in out/in \
                 (espgw ctl sa add --tunnel-toml FILE|- reads them on your side)"
                    .into(),
            );
        }
        let tunnel = to_toml(fields, "tunnel")?;
        let mut doc = Table::new();
        doc.insert(
            "port".into(),
            Toml::Array(self.ports.iter().map(port).collect()),
        );
        doc.insert(
            "route".into(),
            Toml::Array(self.routes.iter().map(|r| self.route(r)).collect()),
        );
        doc.insert("tunnel".into(), Toml::Array(vec![tunnel]));
        let text = toml::to_string(&doc).map_err(|e| format!("tunnel: {e}"))?;
        let host = HostFacts::assumed(1);
        let source = self.base_dir.join("<sa_add>");
        match parse_str(&source, text, &host) {
            Ok((mut config, _warnings)) if config.tunnels.len() == 1 => {
                Ok(config.tunnels.remove(0))
            }
            Ok(_) => Err("tunnel: not read".into()),
            Err(diags) => Err(diags
                .iter()
                .filter(|d| d.is_error())
                .map(|d| {
                    let key = d.key.strip_prefix("tunnel[0]").unwrap_or(&d.key);
                    let mut line = format!("tunnel{key}: {}", d.message);
                    if let Some(e) = &d.expected {
                        line.push_str(&format!(" (expected {e})"));
                    }
                    line
                })
                .collect::<Vec<_>>()
                .join("\n")),
        }
    }

    fn route(&self, r: &Route) -> Toml {
        let mut t = Table::new();
        t.insert("dest".into(), Toml::String(r.dest.to_string()));
        t.insert("via".into(), Toml::String(r.via.to_string()));
        let port = self.ports.get(r.port.0).map_or("", |p| p.name.as_str());
        t.insert("port".into(), Toml::String(port.to_string()));
        Toml::Table(t)
    }
}

fn port(p: &Port) -> Toml {
    let mut t = Table::new();
    t.insert("name".into(), Toml::String(p.name.clone()));
    let side = match p.side {
        Side::Protected => "protected",
        Side::Unprotected => "unprotected",
    };
    t.insert("side".into(), Toml::String(side.into()));
    t.insert("device".into(), Toml::String(p.device.clone()));
    t.insert(
        "address".into(),
        Toml::Array(
            p.addresses
                .iter()
                .map(|a| Toml::String(a.to_string()))
                .collect(),
        ),
    );
    if let Some(mac) = p.mac {
        t.insert("mac".into(), Toml::String(mac.to_string()));
    }
    Toml::Table(t)
}

/// JSON to TOML; errors name the key path, never a value.
fn to_toml(v: &Value, path: &str) -> Result<Toml, String> {
    Ok(match v {
        Value::Null => return Err(format!("{path}: null is not a value")),
        Value::Bool(b) => Toml::Boolean(*b),
        Value::Number(n) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => Toml::Integer(i),
            (None, Some(_)) if n.is_u64() => {
                return Err(format!("{path}: number too large"));
            }
            (None, Some(f)) => Toml::Float(f),
            (None, None) => return Err(format!("{path}: not a number")),
        },
        // JSON has no hex numbers: an SPI may come as "0xa001".
        Value::String(s) if path.ends_with(".spi") => match parse_int(s) {
            Some(n) => Toml::Integer(n),
            None => Toml::String(s.clone()),
        },
        Value::String(s) => Toml::String(s.clone()),
        Value::Array(items) => Toml::Array(
            items
                .iter()
                .enumerate()
                .map(|(i, x)| to_toml(x, &format!("{path}[{i}]")))
                .collect::<Result<_, _>>()?,
        ),
        Value::Object(obj) => {
            let mut t = Table::new();
            for (k, x) in obj {
                t.insert(k.clone(), to_toml(x, &format!("{path}.{k}"))?);
            }
            Toml::Table(t)
        }
    })
}

/// `"0x..."` hex or decimal.
fn parse_int(s: &str) -> Option<i64> {
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => i64::from_str_radix(hex, 16).ok(),
        None => s.parse().ok(),
    }
}

//! The control socket's requests and responses: JSON lines.
//!
//! One request per line, one response per line:
//! `{"cmd":"status"}` -> `{"ok":true,...}` or `{"ok":false,"error":"..."}`.
//!
//! The protocol is written once, here, for both ends of the socket: the
//! gateway reads a line with [`Request::parse`], `espgw ctl` (the client,
//! [`super::client`]) builds the same [`Request`] and writes it with
//! [`Request::to_json`]; the answers are the reply types below
//! ([`SaListReply`], [`TunnelReply`], [`RekeyReply`], and
//! [`super::status::Status`] / [`super::status::StatsSnapshot`]), which the
//! gateway serializes and the client deserializes. A test checks that
//! every request survives `to_json` then `parse` unchanged.
//!
//! Requests are read as generic JSON first and their fields picked out by
//! hand, so that no error message ever quotes a value (serde's typed
//! errors would echo a mistyped key). Keys are accepted in `sa_add` and
//! `sa_rekey` and appear in no response, error or log line.

use serde::ser::SerializeMap;
use serde::{Deserialize, Serialize, Serializer};
use serde_json::{json, Map, Value};
use zeroize::Zeroizing;

use super::status::SaInfo;
use crate::config::{SaKeys, SecretBytes};
use crate::ike::IkeSaInfo;

/// The longest request line accepted (a tunnel with keys is well below).
pub const MAX_REQUEST_BYTES: usize = 64 * 1024;

/// A parsed request.
pub enum Request {
    Status,
    SaList,
    Stats,
    /// `tunnel`: the fields of a `[[tunnel]]` table, as JSON.
    SaAdd {
        tunnel: Value,
    },
    /// By tunnel name, or by any SPI of the tunnel.
    SaDel {
        target: DelTarget,
    },
    /// New keys for the outbound SA, the inbound SA, or both.
    SaRekey {
        tunnel: String,
        outbound: Option<SaKeys>,
        inbound: Option<SaKeys>,
    },
    /// `ike_list`, `ike_initiate`, `ike_terminate`, `ike_rekey`.
    Ike(IkeCommand),
    /// `keys_wireshark`: the running SAs' keys as Wireshark records
    /// ([`KeysReply`]); answered to root and the gateway's own user only.
    KeysWireshark,
}

/// The `ike_*` requests (connections by their `[[connection]]` name).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IkeCommand {
    List,
    Initiate {
        connection: String,
    },
    /// The IKE SA (and its CHILD_SAs), or with `child` only that CHILD_SA
    /// (the IKE SA stays up).
    Terminate {
        connection: String,
        child: Option<String>,
    },
    /// The IKE SA, or with `child` that CHILD_SA.
    Rekey {
        connection: String,
        child: Option<String>,
    },
}

/// What `sa_del` names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DelTarget {
    Tunnel(String),
    Spi(u32),
}

impl std::fmt::Debug for Request {
    /// Names the command only: requests may hold keys.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.command())
    }
}

impl Request {
    /// The `cmd` value, for logs.
    pub fn command(&self) -> &'static str {
        match self {
            Request::Status => "status",
            Request::SaList => "sa_list",
            Request::Stats => "stats",
            Request::SaAdd { .. } => "sa_add",
            Request::SaDel { .. } => "sa_del",
            Request::SaRekey { .. } => "sa_rekey",
            Request::Ike(IkeCommand::List) => "ike_list",
            Request::Ike(IkeCommand::Initiate { .. }) => "ike_initiate",
            Request::Ike(IkeCommand::Terminate { .. }) => "ike_terminate",
            Request::Ike(IkeCommand::Rekey { .. }) => "ike_rekey",
            Request::KeysWireshark => "keys_wireshark",
        }
    }

    /// Parses one request line.
    pub fn parse(line: &str) -> Result<Request, String> {
        // serde_json's syntax errors give a position, never the text.
        let value: Value =
            serde_json::from_str(line).map_err(|e| format!("request is not JSON: {e}"))?;
        let Value::Object(obj) = value else {
            return Err("request must be a JSON object".into());
        };
        let cmd = str_field(&obj, "cmd")?.ok_or("request has no \"cmd\"")?;
        let allowed: &[&str] = match cmd {
            "status" | "sa_list" | "stats" | "keys_wireshark" => &["cmd"],
            "sa_add" => &["cmd", "tunnel"],
            "sa_del" => &["cmd", "tunnel", "spi"],
            "sa_rekey" => &["cmd", "tunnel", "out", "in"],
            "ike_list" => &["cmd"],
            "ike_initiate" => &["cmd", "connection"],
            "ike_terminate" | "ike_rekey" => &["cmd", "connection", "child"],
            _ => {
                return Err(
                    "unknown cmd (expected status, sa_list, sa_add, sa_del, sa_rekey, stats, \
                     ike_list, ike_initiate, ike_terminate, ike_rekey or keys_wireshark)"
                        .into(),
                )
            }
        };
        if let Some(k) = obj.keys().find(|k| !allowed.contains(&k.as_str())) {
            return Err(format!("{cmd}: unknown field {:?}", truncate(k)));
        }
        Ok(match cmd {
            "status" => Request::Status,
            "sa_list" => Request::SaList,
            "stats" => Request::Stats,
            "keys_wireshark" => Request::KeysWireshark,
            "ike_list" => Request::Ike(IkeCommand::List),
            "ike_initiate" | "ike_terminate" | "ike_rekey" => {
                let connection = str_field(&obj, "connection")?
                    .ok_or_else(|| format!("{cmd} needs \"connection\" (a name)"))?
                    .to_string();
                let child = str_field(&obj, "child")?.map(str::to_string);
                Request::Ike(match cmd {
                    "ike_initiate" => IkeCommand::Initiate { connection },
                    "ike_terminate" => IkeCommand::Terminate { connection, child },
                    _ => IkeCommand::Rekey { connection, child },
                })
            }
            "sa_add" => match obj.get("tunnel") {
                Some(t @ Value::Object(_)) => Request::SaAdd { tunnel: t.clone() },
                _ => return Err("sa_add needs \"tunnel\": { ...[[tunnel]] fields... }".into()),
            },
            "sa_del" => {
                let target = match (str_field(&obj, "tunnel")?, obj.get("spi")) {
                    (Some(name), None) => DelTarget::Tunnel(name.to_string()),
                    (None, Some(spi)) => DelTarget::Spi(spi_value(spi, "spi")?),
                    _ => return Err("sa_del needs \"tunnel\" (a name) or \"spi\"".into()),
                };
                Request::SaDel { target }
            }
            _ => {
                let tunnel = str_field(&obj, "tunnel")?
                    .ok_or("sa_rekey needs \"tunnel\" (a name)")?
                    .to_string();
                let outbound = obj.get("out").map(|v| sa_keys(v, "out")).transpose()?;
                let inbound = obj.get("in").map(|v| sa_keys(v, "in")).transpose()?;
                if outbound.is_none() && inbound.is_none() {
                    return Err("sa_rekey needs \"out\", \"in\" or both".into());
                }
                Request::SaRekey {
                    tunnel,
                    outbound,
                    inbound,
                }
            }
        })
    }

    /// Whether the request holds key material (`sa_add`, `sa_rekey`): the
    /// client sends those only to a socket it trusts.
    pub fn carries_keys(&self) -> bool {
        matches!(self, Request::SaAdd { .. } | Request::SaRekey { .. })
    }

    /// The request as a JSON value (what [`Request::parse`] reads back),
    /// for tests and `--json` output; it holds keys as plain strings, so
    /// the client writes its request line with [`Request::write_line`].
    pub fn to_json(&self) -> Value {
        // Serializing into a Value fails only for maps with non-string
        // keys, which a request has none of.
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// The request line, newline-terminated, in a buffer that is zeroized
    /// when dropped and sized so that it does not reallocate (leaving
    /// copies of keys behind) for any request the gateway accepts.
    pub fn write_line(&self) -> Result<Zeroizing<Vec<u8>>, String> {
        let mut line = Zeroizing::new(Vec::with_capacity(MAX_REQUEST_BYTES + 1));
        serde_json::to_writer(&mut *line, self).map_err(|e| e.to_string())?;
        line.push(b'\n');
        Ok(line)
    }
}

/// The wire form, written in sorted key order (as a `serde_json::Value`
/// prints it): `{"cmd":..., fields...}`. Keys go out as lowercase hex from
/// zeroizing buffers.
impl Serialize for Request {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut m = serializer.serialize_map(None)?;
        // Sorted: "child" comes before "cmd".
        if let Request::Ike(
            IkeCommand::Rekey { child: Some(c), .. } | IkeCommand::Terminate { child: Some(c), .. },
        ) = self
        {
            m.serialize_entry("child", c)?;
        }
        m.serialize_entry("cmd", self.command())?;
        match self {
            Request::Status | Request::SaList | Request::Stats | Request::KeysWireshark => {}
            Request::Ike(IkeCommand::List) => {}
            Request::Ike(
                IkeCommand::Initiate { connection }
                | IkeCommand::Terminate { connection, .. }
                | IkeCommand::Rekey { connection, .. },
            ) => m.serialize_entry("connection", connection)?,
            Request::SaAdd { tunnel } => m.serialize_entry("tunnel", tunnel)?,
            Request::SaDel { target } => match target {
                DelTarget::Spi(spi) => m.serialize_entry("spi", spi)?,
                DelTarget::Tunnel(name) => m.serialize_entry("tunnel", name)?,
            },
            Request::SaRekey {
                tunnel,
                outbound,
                inbound,
            } => {
                if let Some(k) = inbound {
                    m.serialize_entry("in", &WireKeys(k))?;
                }
                if let Some(k) = outbound {
                    m.serialize_entry("out", &WireKeys(k))?;
                }
                m.serialize_entry("tunnel", tunnel)?;
            }
        }
        m.end()
    }
}

/// `{"auth_key": "hex", "key": "hex", "spi": ..}`, the form [`sa_keys`]
/// reads.
struct WireKeys<'a>(&'a SaKeys);

impl Serialize for WireKeys<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut m = serializer.serialize_map(None)?;
        if let Some(a) = &self.0.auth_key {
            m.serialize_entry("auth_key", a.to_hex().as_str())?;
        }
        m.serialize_entry("key", self.0.key.to_hex().as_str())?;
        m.serialize_entry("spi", &self.0.spi)?;
        m.end()
    }
}

/// The answer to `sa_list`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SaListReply {
    pub sas: Vec<SaInfo>,
}

/// The answer to `sa_add` and `sa_del`: the tunnel added or deleted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TunnelReply {
    pub tunnel: String,
}

/// The answer to `sa_rekey`: the SPIs now in use, `null` for a direction
/// not rekeyed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RekeyReply {
    pub tunnel: String,
    pub out_spi: Option<u32>,
    pub in_spi: Option<u32>,
}

/// The answer to `keys_wireshark`: Wireshark `ikev2_decryption_table`
/// records of the IKE SAs and `esp_sa` records of the SAs (each tunnel's
/// outbound and newest inbound SA), as `crate::wireshark` writes them.
/// Holds keys: only root and the gateway's user get it (the socket
/// checks), and `Debug` prints the counts only.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeysReply {
    pub ikev2: Vec<String>,
    pub esp_sa: Vec<String>,
    /// IKE SAs whose suite Wireshark cannot decrypt (ChaCha20-Poly1305),
    /// by our SPI, so their absence is explained.
    #[serde(default)]
    pub ikev2_skipped: Vec<String>,
}

impl std::fmt::Debug for KeysReply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "KeysReply({} ikev2, {} esp_sa)",
            self.ikev2.len(),
            self.esp_sa.len()
        )
    }
}

impl Drop for KeysReply {
    fn drop(&mut self) {
        use zeroize::Zeroize;
        self.ikev2.zeroize();
        self.esp_sa.zeroize();
    }
}

/// The answer to `ike_list`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IkeListReply {
    pub sas: Vec<IkeSaInfo>,
}

/// The answer to `ike_initiate`, `ike_terminate` and `ike_rekey`: what was
/// started (the exchanges finish later; `ike list` shows the outcome).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IkeReply {
    pub connection: String,
    pub done: String,
}

/// Names from requests are echoed in errors; keep that short.
fn truncate(s: &str) -> String {
    s.chars().take(64).collect()
}

fn str_field<'a>(obj: &'a Map<String, Value>, key: &str) -> Result<Option<&'a str>, String> {
    match obj.get(key) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(format!("\"{key}\" must be a string")),
    }
}

/// An SPI as a JSON number or a string (`"0xa001"` or decimal).
pub fn spi_value(v: &Value, what: &str) -> Result<u32, String> {
    let n = match v {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
            Some(hex) => u64::from_str_radix(hex, 16).ok(),
            None => s.parse().ok(),
        },
        _ => None,
    };
    n.and_then(|n| u32::try_from(n).ok())
        .filter(|n| *n >= 256)
        .ok_or_else(|| {
            format!("\"{what}\" must be an SPI in 256..=4294967295 (0x100..=0xffffffff)")
        })
}

fn secret(v: &Value, what: &str) -> Result<SecretBytes, String> {
    match v {
        // from_hex's errors name a position, never the text.
        Value::String(s) => SecretBytes::from_hex(s).map_err(|e| format!("{what}: {e}")),
        _ => Err(format!("{what} must be a hex string")),
    }
}

/// `{"spi": .., "key": "hex", "auth_key": "hex"}`: one direction's keys,
/// in a request or in the key file of `espgw ctl sa rekey --keys-file`.
pub fn sa_keys(v: &Value, dir: &str) -> Result<SaKeys, String> {
    let Value::Object(obj) = v else {
        return Err(format!(
            "\"{dir}\" must be an object {{spi, key, auth_key}}"
        ));
    };
    if let Some(k) = obj
        .keys()
        .find(|k| !["spi", "key", "auth_key"].contains(&k.as_str()))
    {
        return Err(format!("{dir}: unknown key {:?}", truncate(k)));
    }
    let spi = spi_value(
        obj.get("spi")
            .ok_or_else(|| format!("{dir}: missing spi"))?,
        &format!("{dir}.spi"),
    )?;
    let key = secret(
        obj.get("key")
            .ok_or_else(|| format!("{dir}: missing key"))?,
        &format!("{dir}.key"),
    )?;
    let auth_key = obj
        .get("auth_key")
        .map(|k| secret(k, &format!("{dir}.auth_key")))
        .transpose()?;
    Ok(SaKeys { spi, key, auth_key })
}

/// `{"ok":true, ...fields}`.
pub fn ok(fields: Value) -> Value {
    let mut obj = Map::new();
    obj.insert("ok".into(), Value::Bool(true));
    if let Value::Object(extra) = fields {
        obj.extend(extra);
    }
    Value::Object(obj)
}

/// `{"ok":false,"error":...}`.
pub fn error(message: impl Into<String>) -> Value {
    json!({"ok": false, "error": message.into()})
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "00112233445566778899aabbccddeeff01020304";

    #[test]
    fn commands_parse() {
        for (line, cmd) in [
            (r#"{"cmd":"status"}"#, "status"),
            (r#"{"cmd":"sa_list"}"#, "sa_list"),
            (r#"{"cmd":"stats"}"#, "stats"),
            (r#"{"cmd":"sa_del","tunnel":"t"}"#, "sa_del"),
            (r#"{"cmd":"sa_add","tunnel":{"name":"t"}}"#, "sa_add"),
        ] {
            assert_eq!(Request::parse(line).unwrap().command(), cmd);
        }
        let Request::SaDel { target } =
            Request::parse(r#"{"cmd":"sa_del","spi":"0xa001"}"#).unwrap()
        else {
            panic!()
        };
        assert_eq!(target, DelTarget::Spi(0xa001));
        let line =
            format!(r#"{{"cmd":"sa_rekey","tunnel":"t","in":{{"spi":4096,"key":"{KEY}"}}}}"#);
        let Request::SaRekey {
            tunnel,
            outbound,
            inbound,
        } = Request::parse(&line).unwrap()
        else {
            panic!()
        };
        assert_eq!(tunnel, "t");
        assert!(outbound.is_none());
        let inbound = inbound.unwrap();
        assert_eq!(inbound.spi, 4096);
        assert_eq!(inbound.key.len(), 20);
    }

    #[test]
    fn errors_never_quote_values() {
        let bad = [
            format!(r#"{{"cmd":"sa_rekey","tunnel":"t","in":{{"spi":4096,"key":"{KEY}zz"}}}}"#),
            format!(r#"{{"cmd":"sa_rekey","tunnel":"t","in":{{"spi":4096,"key":["{KEY}"]}}}}"#),
            format!(r#"{{"cmd":"sa_rekey","tunnel":"t","in":{{"spi":"{KEY}","key":"00"}}}}"#),
            format!(r#"{{"cmd":"sa_rekey","tunnel":"t","in":{{"spi":1,"key":"{KEY}"}}}}"#),
            format!(r#"{{"cmd":"sa_rekey","tunnel":"t","in":{{"spi":4096,"key":"{KEY}""#),
            format!(r#"{{"cmd":"{KEY}"}}"#),
        ];
        for line in &bad {
            let e = Request::parse(line).unwrap_err();
            assert!(!e.contains(KEY) && !e.contains("0011"), "{e}");
        }
        assert!(Request::parse(r#"{"cmd":"status","x":1}"#).is_err());
        assert!(Request::parse("[1]").is_err());
        assert!(Request::parse(r#"{"cmd":"sa_rekey","tunnel":"t"}"#).is_err());
        assert!(Request::parse(r#"{"cmd":"ike_initiate"}"#).is_err());
        assert!(Request::parse(r#"{"cmd":"ike_list","connection":"c"}"#).is_err());
        assert!(Request::parse(r#"{"cmd":"ike_rekey","connection":"c","child":1}"#).is_err());
    }

    fn keys(spi: u32, key: &str, auth_key: Option<&str>) -> SaKeys {
        SaKeys {
            spi,
            key: SecretBytes::from_hex(key).unwrap(),
            auth_key: auth_key.map(|a| SecretBytes::from_hex(a).unwrap()),
        }
    }

    /// What the client writes is what the gateway reads: every request
    /// goes through `to_json`, the wire, and `parse` unchanged.
    #[test]
    fn every_request_survives_the_wire() {
        let same_keys = |a: &Option<SaKeys>, b: &Option<SaKeys>| match (a, b) {
            (None, None) => true,
            (Some(a), Some(b)) => a.spi == b.spi && a.key == b.key && a.auth_key == b.auth_key,
            _ => false,
        };
        let requests = [
            Request::Status,
            Request::SaList,
            Request::Stats,
            Request::SaAdd {
                tunnel: json!({"name": "u", "out": {"spi": 0xc001, "key": KEY}}),
            },
            Request::SaDel {
                target: DelTarget::Tunnel("t".into()),
            },
            Request::SaDel {
                target: DelTarget::Spi(0xa001),
            },
            Request::SaRekey {
                tunnel: "t".into(),
                outbound: Some(keys(0xa002, KEY, Some("0011"))),
                inbound: None,
            },
            Request::SaRekey {
                tunnel: "t".into(),
                outbound: Some(keys(0xa002, KEY, None)),
                inbound: Some(keys(0xb002, "0x99887766", None)),
            },
            Request::Ike(IkeCommand::List),
            Request::Ike(IkeCommand::Initiate {
                connection: "c".into(),
            }),
            Request::Ike(IkeCommand::Terminate {
                connection: "c".into(),
                child: None,
            }),
            Request::Ike(IkeCommand::Terminate {
                connection: "c".into(),
                child: Some("net".into()),
            }),
            Request::Ike(IkeCommand::Rekey {
                connection: "c".into(),
                child: None,
            }),
            Request::Ike(IkeCommand::Rekey {
                connection: "c".into(),
                child: Some("net".into()),
            }),
        ];
        for request in &requests {
            let line = request.to_json().to_string();
            let written = request.write_line().unwrap();
            assert_eq!(written.as_slice(), format!("{line}\n").as_bytes());
            let back = Request::parse(&line).unwrap_or_else(|e| panic!("{request:?}: {e}"));
            assert_eq!(back.carries_keys(), request.carries_keys());
            let same = match (request, &back) {
                (Request::Status, Request::Status)
                | (Request::SaList, Request::SaList)
                | (Request::Stats, Request::Stats) => true,
                (Request::SaAdd { tunnel: a }, Request::SaAdd { tunnel: b }) => a == b,
                (Request::SaDel { target: a }, Request::SaDel { target: b }) => a == b,
                (Request::Ike(a), Request::Ike(b)) => a == b,
                (
                    Request::SaRekey {
                        tunnel: t1,
                        outbound: o1,
                        inbound: i1,
                    },
                    Request::SaRekey {
                        tunnel: t2,
                        outbound: o2,
                        inbound: i2,
                    },
                ) => t1 == t2 && same_keys(o1, o2) && same_keys(i1, i2),
                _ => false,
            };
            assert!(same, "{request:?} came back as {back:?} from {line}");
        }
    }

    /// The replies the gateway writes are the ones the client reads.
    #[test]
    fn replies_round_trip() {
        let rekey = RekeyReply {
            tunnel: "t".into(),
            out_spi: None,
            in_spi: Some(0xb002),
        };
        let v = serde_json::to_value(&rekey).unwrap();
        assert_eq!(v, json!({"tunnel": "t", "out_spi": null, "in_spi": 0xb002}));
        assert_eq!(serde_json::from_value::<RekeyReply>(v).unwrap(), rekey);
        let t = TunnelReply { tunnel: "u".into() };
        let v = serde_json::to_value(&t).unwrap();
        assert_eq!(v, json!({"tunnel": "u"}));
        assert_eq!(serde_json::from_value::<TunnelReply>(v).unwrap(), t);
    }
}

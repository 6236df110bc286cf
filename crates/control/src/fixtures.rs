//! Test configs: the demo topology's gateway TOML, written once.
//!
//! Built only for tests (`cfg(test)`) and for other crates' tests through
//! the `fixtures` feature (`espgw-control = { features = ["fixtures"] }`
//! in their `[dev-dependencies]`); never part of a gateway binary.
//!
//! The demo topology (docs/architecture.md, configs/): gateway 1 at
//! 192.0.2.1 protects 10.1.0.0/24, gateway 2 at 192.0.2.2 protects
//! 10.2.0.0/24, one tunnel "t" between them with SPIs 0xa001 (1 -> 2) and
//! 0xb001 (2 -> 1). [`GatewayToml::demo`] renders either end; its setters
//! change what a test needs (name, workers, tunnels, keys, lifetimes,
//! default action, extra lines) and leave the rest as the demo has it.
//!
//! Keys: the config refuses a key used twice and equal out/in keys, so a
//! tunnel's keys default to [`key_for_spi`], distinct for every SPI and the
//! same on both gateways for the same SA.
//!
//! `bench/run-vs-bench.sh` keeps a shell heredoc of gateway 1 (it runs the
//! built binary and has no Rust at hand); its comment points here.

/// A 20-byte AES-GCM key plus salt in hex, derived from the SPI: every SA
/// of a fixture gets a key of its own, and both ends of an SA the same.
pub fn key_for_spi(spi: u32) -> String {
    let b = spi.to_be_bytes();
    (0..20u8)
        .map(|i| {
            let byte = b[usize::from(i % 4)] ^ i.wrapping_mul(0x3b) ^ 0x5a;
            format!("{byte:02x}")
        })
        .collect()
}

/// One `[[tunnel]]` table.
#[derive(Debug, Clone)]
pub struct TunnelToml {
    pub name: String,
    pub local: String,
    pub remote: String,
    pub local_ts: Vec<String>,
    pub remote_ts: Vec<String>,
    pub esp: String,
    pub replay_window: Option<u32>,
    pub encap: Option<String>,
    /// More `key = value` lines of the table (e.g. `lifetime = {...}`).
    pub lines: Vec<String>,
    /// `(spi, key hex)` of the outbound and the inbound SA.
    pub out: (u32, String),
    pub inbound: (u32, String),
}

impl TunnelToml {
    /// Tunnel "t" of gateway `me` (1 or 2) of the demo pair.
    pub fn demo(me: u8) -> TunnelToml {
        let peer = 3 - me;
        let (out_spi, in_spi) = if me == 1 {
            (0xa001, 0xb001)
        } else {
            (0xb001, 0xa001)
        };
        TunnelToml {
            name: "t".into(),
            local: format!("192.0.2.{me}"),
            remote: format!("192.0.2.{peer}"),
            local_ts: vec![format!("10.{me}.0.0/24")],
            remote_ts: vec![format!("10.{peer}.0.0/24")],
            esp: "aes128gcm16".into(),
            replay_window: None,
            encap: None,
            lines: Vec::new(),
            out: (out_spi, key_for_spi(out_spi)),
            inbound: (in_spi, key_for_spi(in_spi)),
        }
    }

    /// Explicit keys (hex) for the outbound and the inbound SA.
    pub fn keys(mut self, out_key: &str, in_key: &str) -> TunnelToml {
        self.out.1 = out_key.into();
        self.inbound.1 = in_key.into();
        self
    }

    /// One more line of the table, e.g. `lifetime = { seconds = 100 }`;
    /// an empty line is left out.
    pub fn line(mut self, line: &str) -> TunnelToml {
        if !line.trim().is_empty() {
            self.lines.push(line.into());
        }
        self
    }

    pub fn replay_window(mut self, window: u32) -> TunnelToml {
        self.replay_window = Some(window);
        self
    }

    fn render(&self, t: &mut String) {
        let list = |l: &[String]| {
            l.iter()
                .map(|s| format!("{s:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        open_table(t);
        t.push_str(&format!(
            "[[tunnel]]\nname = {:?}\nlocal = {:?}\nremote = {:?}\nlocal_ts = [{}]\nremote_ts = [{}]\nesp = {:?}\n",
            self.name,
            self.local,
            self.remote,
            list(&self.local_ts),
            list(&self.remote_ts),
            self.esp
        ));
        if let Some(w) = self.replay_window {
            t.push_str(&format!("replay_window = {w}\n"));
        }
        if let Some(e) = &self.encap {
            t.push_str(&format!("encap = {e:?}\n"));
        }
        for l in &self.lines {
            t.push_str(l);
            t.push('\n');
        }
        t.push_str(&format!(
            "out = {{ spi = {:#x}, key = {:?} }}\nin = {{ spi = {:#x}, key = {:?} }}\n",
            self.out.0, self.out.1, self.inbound.0, self.inbound.1
        ));
    }
}

/// A whole gateway config.
#[derive(Debug, Clone)]
pub struct GatewayToml {
    pub default_action: Option<String>,
    pub name: String,
    /// More lines of `[gateway]` (state_dir, control_socket, ...).
    pub gateway_lines: Vec<String>,
    pub workers: Option<u32>,
    pub mtu: Option<u32>,
    /// More lines of `[dataplane]` (poll, eal, ...).
    pub dataplane_lines: Vec<String>,
    /// The protected and the unprotected port's DPDK device.
    pub devices: [String; 2],
    /// The protected port's addresses (one or more).
    pub prot_addresses: Vec<String>,
    pub unprot_address: String,
    /// Tables after the ports (`[[route]]`, `[[neighbor]]`, ...).
    pub sections: Vec<String>,
    pub tunnels: Vec<TunnelToml>,
    /// Appended at the end, after the last tunnel (so it may continue that
    /// tunnel's table, or open tables of its own).
    pub extra: String,
}

impl GatewayToml {
    /// Gateway `me` (1 or 2) of the demo pair: "gw-{me}", one worker, null
    /// devices, tunnel "t" to the other gateway.
    pub fn demo(me: u8) -> GatewayToml {
        GatewayToml {
            default_action: None,
            name: format!("gw-{me}"),
            gateway_lines: Vec::new(),
            workers: Some(1),
            mtu: None,
            dataplane_lines: Vec::new(),
            devices: ["net_null0".into(), "net_null1".into()],
            prot_addresses: vec![format!("10.{me}.0.1/24")],
            unprot_address: format!("192.0.2.{me}/24"),
            sections: Vec::new(),
            tunnels: vec![TunnelToml::demo(me)],
            extra: String::new(),
        }
    }

    pub fn name(mut self, name: &str) -> GatewayToml {
        self.name = name.into();
        self
    }

    /// `[dataplane].workers`; `None` leaves the key out (its default).
    pub fn workers(mut self, workers: Option<u32>) -> GatewayToml {
        self.workers = workers;
        self
    }

    pub fn mtu(mut self, mtu: u32) -> GatewayToml {
        self.mtu = Some(mtu);
        self
    }

    /// `default_action`: "discard" or "bypass".
    pub fn default_action(mut self, action: &str) -> GatewayToml {
        self.default_action = Some(action.into());
        self
    }

    pub fn devices(mut self, prot: &str, unprot: &str) -> GatewayToml {
        self.devices = [prot.into(), unprot.into()];
        self
    }

    /// One more address on the protected port (an IPv6 one, say).
    pub fn prot_address(mut self, address: &str) -> GatewayToml {
        self.prot_addresses.push(address.into());
        self
    }

    pub fn gateway_line(mut self, line: &str) -> GatewayToml {
        self.gateway_lines.push(line.into());
        self
    }

    pub fn dataplane_line(mut self, line: &str) -> GatewayToml {
        self.dataplane_lines.push(line.into());
        self
    }

    pub fn section(mut self, text: &str) -> GatewayToml {
        self.sections.push(text.into());
        self
    }

    /// Changes every tunnel (the demo has one: "t").
    pub fn map_tunnels(mut self, f: impl Fn(TunnelToml) -> TunnelToml) -> GatewayToml {
        self.tunnels = self.tunnels.into_iter().map(f).collect();
        self
    }

    /// One more tunnel.
    pub fn tunnel(mut self, tunnel: TunnelToml) -> GatewayToml {
        self.tunnels.push(tunnel);
        self
    }

    pub fn extra(mut self, text: &str) -> GatewayToml {
        self.extra = text.into();
        self
    }

    /// The config text.
    pub fn render(&self) -> String {
        let mut t = String::new();
        if let Some(a) = &self.default_action {
            t.push_str(&format!("default_action = {a:?}\n"));
        }
        open_table(&mut t);
        t.push_str(&format!("[gateway]\nname = {:?}\n", self.name));
        for l in &self.gateway_lines {
            t.push_str(l);
            t.push('\n');
        }
        open_table(&mut t);
        t.push_str("[dataplane]\n");
        if let Some(w) = self.workers {
            t.push_str(&format!("workers = {w}\n"));
        }
        if let Some(m) = self.mtu {
            t.push_str(&format!("mtu = {m}\n"));
        }
        for l in &self.dataplane_lines {
            t.push_str(l);
            t.push('\n');
        }
        let prot = match self.prot_addresses.as_slice() {
            [one] => format!("{one:?}"),
            many => format!(
                "[{}]",
                many.iter()
                    .map(|a| format!("{a:?}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        for (name, side, device, address) in [
            ("prot", "protected", &self.devices[0], &prot),
            (
                "unprot",
                "unprotected",
                &self.devices[1],
                &format!("{:?}", self.unprot_address),
            ),
        ] {
            open_table(&mut t);
            t.push_str(&format!(
                "[[port]]\nname = \"{name}\"\nside = \"{side}\"\ndevice = {device:?}\naddress = {address}\n"
            ));
        }
        for s in &self.sections {
            open_table(&mut t);
            t.push_str(s);
            if !s.ends_with('\n') {
                t.push('\n');
            }
        }
        for tunnel in &self.tunnels {
            tunnel.render(&mut t);
        }
        t.push_str(&self.extra);
        t
    }
}

/// A blank line before each table (not at the top), as a person writes
/// the file: tests that assert diagnostics' line numbers count them.
fn open_table(t: &mut String) {
    if !t.is_empty() {
        t.push('\n');
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::HostFacts;
    use std::path::Path;

    fn parses(text: String) -> crate::config::Config {
        let host = HostFacts::assumed(2);
        match crate::parse_str(Path::new("fixture.toml"), text.clone(), &host) {
            Ok((c, _)) => c,
            Err(d) => panic!("{text}\n{d:?}"),
        }
    }

    #[test]
    fn both_demo_gateways_are_valid_and_mirror_each_other() {
        let one = parses(GatewayToml::demo(1).render());
        let two = parses(GatewayToml::demo(2).default_action("bypass").render());
        assert_eq!(one.gateway.name, "gw-1");
        assert_eq!(two.gateway.name, "gw-2");
        let (t1, t2) = (&one.tunnels[0], &two.tunnels[0]);
        assert_eq!(t1.outbound.spi, t2.inbound.spi);
        assert_eq!(t1.outbound.key, t2.inbound.key);
        assert_eq!(t1.inbound.key, t2.outbound.key);
        assert_ne!(t1.outbound.key, t1.inbound.key);
    }

    #[test]
    fn options_reach_the_config() {
        let second = TunnelToml {
            name: "u".into(),
            remote: "192.0.2.3".into(),
            remote_ts: vec!["10.3.0.0/24".into()],
            out: (0xc001, key_for_spi(0xc001)),
            inbound: (0xd001, key_for_spi(0xd001)),
            ..TunnelToml::demo(1)
        };
        let text = GatewayToml::demo(1)
            .name("gw-x")
            .workers(Some(2))
            .mtu(9000)
            .prot_address("fd00:1::1/64")
            .map_tunnels(|t| {
                t.replay_window(128)
                    .line("lifetime = { seconds = 100 }")
                    .line("")
            })
            .tunnel(second)
            .render();
        let c = parses(text);
        assert_eq!(c.gateway.name, "gw-x");
        assert_eq!(c.dataplane.workers, 2);
        assert_eq!(c.tunnels.len(), 2);
        assert_eq!(c.tunnels[0].replay_window, 128);
        assert_eq!(c.tunnels[1].outbound.spi, 0xc001);
    }
}

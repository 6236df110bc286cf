//! Security policy database lookup: first matching rule wins.
//!
//! Rules are in the config's SPD order (priority, then file order). Each
//! selector is written from the protected side: `local` is the protected
//! host's address, `remote` the far side's. An outbound packet (protected
//! port in) matches with `local = src`; a plaintext packet arriving on an
//! unprotected port is checked the other way round (`local = dst`).

use std::net::IpAddr;

use espgw_control::config::net::Prefix;

/// What the SPD says to do with a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Through the tunnel with this index.
    Protect(usize),
    /// Forward in the clear.
    Bypass,
    /// Drop.
    Discard,
}

/// A 5-tuple pattern; `None` matches anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Selector {
    pub local: Option<Prefix>,
    pub remote: Option<Prefix>,
    pub proto: Option<u8>,
    /// Inclusive port range on the protected side.
    pub local_port: Option<(u16, u16)>,
    /// Inclusive port range on the far side.
    pub remote_port: Option<(u16, u16)>,
}

/// The fields of a packet the SPD looks at, oriented from the protected side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Flow {
    pub local: IpAddr,
    pub remote: IpAddr,
    pub proto: u8,
    /// `None` when the protocol has no ports or they are not in this
    /// packet (a non-first fragment); then port selectors do not match.
    pub local_port: Option<u16>,
    pub remote_port: Option<u16>,
}

fn port_in(range: Option<(u16, u16)>, port: Option<u16>) -> bool {
    match (range, port) {
        (None, _) => true,
        (Some((a, b)), Some(p)) => a <= p && p <= b,
        (Some(_), None) => false,
    }
}

impl Selector {
    /// True when `flow` matches every field.
    #[inline]
    pub fn matches(&self, flow: &Flow) -> bool {
        self.local.is_none_or(|p| p.contains(flow.local))
            && self.remote.is_none_or(|p| p.contains(flow.remote))
            && self.proto.is_none_or(|p| p == flow.proto)
            && port_in(self.local_port, flow.local_port)
            && port_in(self.remote_port, flow.remote_port)
    }
}

/// One SPD entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpdRule {
    pub selector: Selector,
    pub action: Action,
}

/// The ordered rules and the default action.
#[derive(Debug, Clone)]
pub struct Spd {
    rules: Vec<SpdRule>,
    default: Action,
}

/// The SPD's decision and whether a rule (rather than the default) made it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    pub action: Action,
    pub by_default: bool,
}

impl Spd {
    pub fn new(rules: Vec<SpdRule>, default: Action) -> Spd {
        Spd { rules, default }
    }

    /// The first rule matching `flow`, or the default. A linear scan: SPDs
    /// of gateways like this one hold a handful of rules; a large SPD would
    /// want the control plane's compiled lookup instead.
    #[inline]
    pub fn lookup(&self, flow: &Flow) -> Decision {
        match self.rules.iter().find(|r| r.selector.matches(flow)) {
            Some(r) => Decision {
                action: r.action,
                by_default: false,
            },
            None => Decision {
                action: self.default,
                by_default: true,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Option<Prefix> {
        Some(Prefix::parse(s).unwrap())
    }

    fn flow(local: &str, remote: &str, proto: u8, rport: Option<u16>) -> Flow {
        Flow {
            local: local.parse().unwrap(),
            remote: remote.parse().unwrap(),
            proto,
            local_port: Some(40000),
            remote_port: rport,
        }
    }

    #[test]
    fn first_match_wins_and_default_applies() {
        let any = Selector {
            local: None,
            remote: None,
            proto: None,
            local_port: None,
            remote_port: None,
        };
        let spd = Spd::new(
            vec![
                SpdRule {
                    selector: Selector {
                        proto: Some(6),
                        remote_port: Some((22, 22)),
                        ..any
                    },
                    action: Action::Discard,
                },
                SpdRule {
                    selector: Selector {
                        local: p("10.1.0.0/24"),
                        remote: p("10.2.0.0/24"),
                        ..any
                    },
                    action: Action::Protect(0),
                },
            ],
            Action::Discard,
        );
        let d = spd.lookup(&flow("10.1.0.10", "10.2.0.10", 17, Some(53)));
        assert_eq!(d.action, Action::Protect(0));
        assert!(!d.by_default);
        let d = spd.lookup(&flow("10.1.0.10", "10.2.0.10", 6, Some(22)));
        assert_eq!(d.action, Action::Discard);
        assert!(!d.by_default);
        // A port selector never matches a packet without ports.
        let d = spd.lookup(&flow("10.1.0.10", "10.2.0.10", 6, None));
        assert_eq!(d.action, Action::Protect(0));
        let d = spd.lookup(&flow("10.1.0.10", "10.3.0.10", 17, Some(53)));
        assert_eq!(d.action, Action::Discard);
        assert!(d.by_default);
        // Families never cross.
        let d = spd.lookup(&flow("fd00:1::1", "fd00:2::1", 17, Some(53)));
        assert!(d.by_default);
    }
}

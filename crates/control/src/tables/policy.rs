//! Policy rules as the control plane states them, the packet key they are
//! matched against, and the plain linear-scan meaning of "first match" that
//! every faster structure must agree with.

use std::net::IpAddr;

use super::prefix::{Family, IpPrefix, PortRange};

/// The index of a tunnel in the gateway's tunnel list; the SAD maps it to
/// the tunnel's current outbound SA.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TunnelId(pub u32);

/// What to do with a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    /// Encrypt into the tunnel.
    Protect(TunnelId),
    /// Forward in the clear.
    Bypass,
    /// Drop (counted).
    Discard,
}

/// A rule's position in the list it was built from (config order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RuleId(pub u32);

/// The header fields a policy looks at. Protocols without ports carry 0 in
/// `sport`/`dport`, so a rule that names ports does not match them unless
/// its range includes 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FlowKey {
    pub src: IpAddr,
    pub dst: IpAddr,
    pub proto: u8,
    pub sport: u16,
    pub dport: u16,
}

impl FlowKey {
    /// The same flow seen from the other side: addresses and ports swapped.
    /// Selectors are written for outbound traffic (source = protected
    /// side); a packet that arrived through a tunnel (or in the clear on the
    /// unprotected port) is checked against the same SPD with its key
    /// reversed, e.g. "does the decrypted packet belong to this tunnel".
    pub fn reversed(&self) -> FlowKey {
        FlowKey {
            src: self.dst,
            dst: self.src,
            proto: self.proto,
            sport: self.dport,
            dport: self.sport,
        }
    }
}

/// The packets a rule applies to. An empty address list means any address
/// of either family; a non-empty list matches only addresses inside one of
/// its prefixes (so a list of IPv4 prefixes never matches IPv6 traffic).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Selector {
    pub src: Vec<IpPrefix>,
    pub dst: Vec<IpPrefix>,
    /// IP protocol number; `None` for any.
    pub proto: Option<u8>,
    pub sport: PortRange,
    pub dport: PortRange,
}

/// True when `ip` is in the address list (empty = any).
fn list_matches(list: &[IpPrefix], ip: IpAddr) -> bool {
    list.is_empty() || list.iter().any(|p| p.contains(ip))
}

/// The part of an address list that applies to `family`: `None` when the
/// list can never match that family, `Some(vec![])` for any address of it.
pub(crate) fn family_part(list: &[IpPrefix], family: Family) -> Option<Vec<IpPrefix>> {
    if list.is_empty() {
        return Some(Vec::new());
    }
    let part: Vec<IpPrefix> = list
        .iter()
        .copied()
        .filter(|p| p.family() == family)
        .collect();
    if part.is_empty() {
        None
    } else if part.iter().any(IpPrefix::is_any) {
        Some(Vec::new())
    } else {
        Some(part)
    }
}

impl Selector {
    /// The reference meaning of a selector. A key whose source and
    /// destination differ in family (no real packet) matches nothing.
    pub fn matches(&self, key: &FlowKey) -> bool {
        Family::of(key.src) == Family::of(key.dst)
            && list_matches(&self.src, key.src)
            && list_matches(&self.dst, key.dst)
            && (self.proto.is_none() || self.proto == Some(key.proto))
            && self.sport.contains(key.sport)
            && self.dport.contains(key.dport)
    }
}

/// One SPD entry: a tunnel's traffic selectors or a bypass/discard policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// Lower values are consulted first; ties go to the earlier rule.
    pub priority: u32,
    pub selector: Selector,
    pub action: Action,
}

/// The rule ids of `rules` in the order they are consulted: by priority,
/// then by position.
pub fn consult_order(rules: &[Rule]) -> Vec<RuleId> {
    let mut order: Vec<RuleId> = (0..rules.len()).map(|i| RuleId(i as u32)).collect();
    // A stable sort keeps config order among equal priorities.
    order.sort_by_key(|id| rules[id.0 as usize].priority);
    order
}

/// The first rule that matches `key`, by a scan of every rule in consult
/// order. This is the definition the compiled SPD is tested against; it is
/// O(rules) and not meant for the data plane.
pub fn linear_first_match(rules: &[Rule], key: &FlowKey) -> Option<RuleId> {
    rules
        .iter()
        .enumerate()
        .filter(|(_, rule)| rule.selector.matches(key))
        .min_by_key(|(i, rule)| (rule.priority, *i))
        .map(|(i, _)| RuleId(i as u32))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(src: &str, dst: &str, proto: u8, sport: u16, dport: u16) -> FlowKey {
        FlowKey {
            src: src.parse().unwrap(),
            dst: dst.parse().unwrap(),
            proto,
            sport,
            dport,
        }
    }

    #[test]
    fn selector_fields_all_apply() {
        let sel = Selector {
            src: vec!["10.0.0.0/8".parse().unwrap()],
            dst: vec![
                "192.168.1.0/24".parse().unwrap(),
                "2001:db8::/32".parse().unwrap(),
            ],
            proto: Some(17),
            sport: PortRange::ANY,
            dport: PortRange::single(53),
        };
        assert!(sel.matches(&key("10.1.1.1", "192.168.1.9", 17, 999, 53)));
        assert!(!sel.matches(&key("11.1.1.1", "192.168.1.9", 17, 999, 53)));
        assert!(!sel.matches(&key("10.1.1.1", "192.168.2.9", 17, 999, 53)));
        assert!(!sel.matches(&key("10.1.1.1", "192.168.1.9", 6, 999, 53)));
        assert!(!sel.matches(&key("10.1.1.1", "192.168.1.9", 17, 999, 54)));
        // The v6 destination cannot pair with a v4-only source list.
        assert!(!sel.matches(&key("::1", "2001:db8::1", 17, 999, 53)));
        assert!(!sel.matches(&key("10.1.1.1", "2001:db8::1", 17, 999, 53)));
    }

    #[test]
    fn reversed_keys_match_the_outbound_selector() {
        let sel = Selector {
            src: vec!["10.1.0.0/24".parse().unwrap()],
            dst: vec!["10.2.0.0/24".parse().unwrap()],
            proto: Some(6),
            sport: PortRange::ANY,
            dport: PortRange::single(443),
        };
        let inbound = key("10.2.0.9", "10.1.0.7", 6, 443, 40000);
        assert!(!sel.matches(&inbound));
        assert!(sel.matches(&inbound.reversed()));
        assert_eq!(inbound.reversed().reversed(), inbound);
    }

    #[test]
    fn empty_lists_match_both_families() {
        let sel = Selector::default();
        assert!(sel.matches(&key("10.1.1.1", "10.2.2.2", 1, 0, 0)));
        assert!(sel.matches(&key("::1", "::2", 58, 0, 0)));
        assert!(!sel.matches(&key("::1", "10.2.2.2", 58, 0, 0)));
    }

    #[test]
    fn priority_then_position_decides() {
        let any = |priority, action| Rule {
            priority,
            selector: Selector::default(),
            action,
        };
        let rules = [
            any(5, Action::Bypass),
            any(1, Action::Discard),
            any(1, Action::Protect(TunnelId(0))),
        ];
        let k = key("1.1.1.1", "2.2.2.2", 6, 1, 2);
        assert_eq!(linear_first_match(&rules, &k), Some(RuleId(1)));
        assert_eq!(consult_order(&rules), vec![RuleId(1), RuleId(2), RuleId(0)]);
        assert_eq!(linear_first_match(&[], &k), None);
    }

    #[test]
    fn family_part_splits_lists() {
        let v4: IpPrefix = "10.0.0.0/8".parse().unwrap();
        let v6: IpPrefix = "2001:db8::/32".parse().unwrap();
        assert_eq!(family_part(&[], Family::V4), Some(vec![]));
        assert_eq!(family_part(&[v4], Family::V6), None);
        assert_eq!(family_part(&[v4, v6], Family::V6), Some(vec![v6]));
        assert_eq!(
            family_part(&[v4, IpPrefix::any(Family::V4)], Family::V4),
            Some(vec![])
        );
    }
}

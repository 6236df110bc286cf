//! Negotiated traffic selectors (address ranges) as the data plane's
//! prefixes.

use std::net::IpAddr;

use espgw_ike::message::TrafficSelector;

use crate::config::net::Prefix;

/// Why a negotiated selector cannot be installed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SelectorError {
    /// A protocol or port range: the SPD entry of a tunnel is addresses only.
    NarrowerThanAddresses,
    /// A selector type other than an IPv4/IPv6 range.
    UnknownType,
    /// start > end.
    Empty,
}

impl std::fmt::Display for SelectorError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SelectorError::NarrowerThanAddresses => {
                "a selector with a protocol or ports (tunnels select by address only)"
            }
            SelectorError::UnknownType => "a selector type other than an address range",
            SelectorError::Empty => "an empty selector range",
        })
    }
}

/// The last address of the `bits`-bit block starting at `cur`.
fn block_last(cur: u128, bits: u32) -> u128 {
    if bits >= 128 {
        u128::MAX
    } else {
        cur | ((1u128 << bits) - 1)
    }
}

/// The fewest prefixes that cover exactly `start..=end` (`width` bits).
fn range_to_prefixes(start: u128, end: u128, width: u32, v4: bool, out: &mut Vec<Prefix>) {
    let mut cur = start;
    loop {
        // The largest block aligned at `cur` that does not pass `end`.
        let mut bits = if cur == 0 {
            width
        } else {
            cur.trailing_zeros().min(width)
        };
        while bits > 0 && block_last(cur, bits) > end {
            bits -= 1;
        }
        let addr = if v4 {
            IpAddr::from(std::net::Ipv4Addr::from(cur as u32))
        } else {
            IpAddr::from(std::net::Ipv6Addr::from(cur))
        };
        out.push(Prefix::new(addr, (width - bits) as u8));
        let last = block_last(cur, bits);
        if last >= end {
            return;
        }
        cur = last + 1;
    }
}

/// The selectors as prefixes; any protocol or port restriction is refused.
pub fn to_prefixes(list: &[TrafficSelector]) -> Result<Vec<Prefix>, SelectorError> {
    let mut out = Vec::new();
    for ts in list {
        match ts {
            TrafficSelector::Ipv4 {
                ip_protocol,
                start_port,
                end_port,
                start,
                end,
            } => {
                if *ip_protocol != 0 || *start_port != 0 || *end_port != u16::MAX {
                    return Err(SelectorError::NarrowerThanAddresses);
                }
                let (s, e) = (u32::from(*start), u32::from(*end));
                if s > e {
                    return Err(SelectorError::Empty);
                }
                range_to_prefixes(u128::from(s), u128::from(e), 32, true, &mut out);
            }
            TrafficSelector::Ipv6 {
                ip_protocol,
                start_port,
                end_port,
                start,
                end,
            } => {
                if *ip_protocol != 0 || *start_port != 0 || *end_port != u16::MAX {
                    return Err(SelectorError::NarrowerThanAddresses);
                }
                let (s, e) = (u128::from(*start), u128::from(*end));
                if s > e {
                    return Err(SelectorError::Empty);
                }
                range_to_prefixes(s, e, 128, false, &mut out);
            }
            _ => return Err(SelectorError::UnknownType),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use espgw_ike::engine::cidr_selector;

    fn p(s: &str) -> Prefix {
        Prefix::parse(s).unwrap()
    }

    #[test]
    fn cidr_selectors_come_back_as_themselves() {
        for s in [
            "10.1.0.0/24",
            "0.0.0.0/0",
            "192.0.2.7/32",
            "2001:db8::/64",
            "::/0",
        ] {
            let ts = cidr_selector(s).unwrap();
            assert_eq!(to_prefixes(&[ts]).unwrap(), vec![p(s)], "{s}");
        }
    }

    #[test]
    fn ranges_split_into_the_fewest_prefixes() {
        let ts = TrafficSelector::Ipv4 {
            ip_protocol: 0,
            start_port: 0,
            end_port: u16::MAX,
            start: "10.0.0.1".parse().unwrap(),
            end: "10.0.0.6".parse().unwrap(),
        };
        assert_eq!(
            to_prefixes(&[ts]).unwrap(),
            vec![
                p("10.0.0.1/32"),
                p("10.0.0.2/31"),
                p("10.0.0.4/31"),
                p("10.0.0.6/32")
            ]
        );
    }

    #[test]
    fn protocols_and_ports_are_refused() {
        let ts = TrafficSelector::Ipv4 {
            ip_protocol: 6,
            start_port: 0,
            end_port: u16::MAX,
            start: "10.0.0.0".parse().unwrap(),
            end: "10.0.0.255".parse().unwrap(),
        };
        assert_eq!(
            to_prefixes(&[ts]),
            Err(SelectorError::NarrowerThanAddresses)
        );
    }
}

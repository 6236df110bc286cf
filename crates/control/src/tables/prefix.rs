//! Address prefixes and port ranges: the values a policy selector is made of.
//!
//! Kept independent of the config model so the tables build from any source
//! (the config, the control socket, tests). The config parses into these
//! very types (`config::net::Prefix` is [`IpPrefix`]): one prefix type and
//! one port range type in the workspace.

use core::fmt;
use core::str::FromStr;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The address family of an address or prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Family {
    V4,
    V6,
}

impl Family {
    pub const ALL: [Family; 2] = [Family::V4, Family::V6];

    pub fn of(ip: IpAddr) -> Family {
        match ip {
            IpAddr::V4(_) => Family::V4,
            IpAddr::V6(_) => Family::V6,
        }
    }

    /// Address width in bits.
    pub fn width(self) -> u8 {
        match self {
            Family::V4 => 32,
            Family::V6 => 128,
        }
    }
}

/// The address as a number in the low bits of a `u128`.
pub(crate) fn ip_bits(ip: IpAddr) -> u128 {
    match ip {
        IpAddr::V4(v4) => u32::from(v4) as u128,
        IpAddr::V6(v6) => u128::from(v6),
    }
}

/// The netmask of a `len`-bit prefix in a `width`-bit family, in the low
/// `width` bits of a `u128`.
pub(crate) fn mask128(width: u8, len: u8) -> u128 {
    let full = if width >= 128 {
        u128::MAX
    } else {
        (1u128 << width) - 1
    };
    if len == 0 {
        0
    } else {
        (u128::MAX << (width - len.min(width))) & full
    }
}

/// Splits `"IP/LEN"` (or a bare address, taken as a host prefix) into an
/// address and a prefix length valid for its family. The messages say what
/// was expected; the config shows them next to the key.
pub(crate) fn parse_addr_len(s: &str) -> Result<(IpAddr, u8), String> {
    let Some((ip, len)) = s.split_once('/') else {
        let ip: IpAddr = s
            .parse()
            .map_err(|_| format!("{s:?} is not an IP prefix"))?;
        return Ok((ip, Family::of(ip).width()));
    };
    let ip: IpAddr = ip
        .parse()
        .map_err(|_| format!("{ip:?} is not an IPv4 or IPv6 address"))?;
    let width = Family::of(ip).width();
    let len: u8 = len
        .parse()
        .ok()
        .filter(|l| *l <= width)
        .ok_or_else(|| format!("prefix length {len:?} is not 0..={width}"))?;
    Ok((ip, len))
}

/// A network prefix (`10.1.0.0/24`, `2001:db8::/48`) with its host bits
/// cleared, so equal networks compare equal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IpPrefix {
    addr: IpAddr,
    len: u8,
}

impl IpPrefix {
    /// The prefix of `addr` of length `len`, host bits cleared; a `len`
    /// longer than the family's width is clamped to it (a host prefix).
    pub fn new(addr: IpAddr, len: u8) -> IpPrefix {
        IpPrefix::from_bits(Family::of(addr), ip_bits(addr), len)
    }

    /// Parses `"IP/LEN"` strictly, as the config does: host bits are
    /// refused (a typo for another network) and a bare address is a host
    /// prefix (/32 or /128). [`FromStr`] is the lenient form.
    pub fn parse(s: &str) -> Result<IpPrefix, String> {
        let (ip, len) = parse_addr_len(s)?;
        let prefix = IpPrefix::new(ip, len);
        if prefix.addr != ip {
            return Err(format!("{s:?} has host bits set (did you mean {prefix}?)"));
        }
        Ok(prefix)
    }

    /// The prefix whose network is the low bits of `bits` (host bits are
    /// cleared; `len` is clamped to the family's width).
    pub(crate) fn from_bits(family: Family, bits: u128, len: u8) -> IpPrefix {
        let len = len.min(family.width());
        let bits = bits & mask128(family.width(), len);
        let addr = match family {
            Family::V4 => IpAddr::V4(Ipv4Addr::from(bits as u32)),
            Family::V6 => IpAddr::V6(Ipv6Addr::from(bits)),
        };
        IpPrefix { addr, len }
    }

    /// A single address (`/32` or `/128`).
    pub fn host(addr: IpAddr) -> IpPrefix {
        IpPrefix {
            addr,
            len: Family::of(addr).width(),
        }
    }

    /// Every address of `family` (`0.0.0.0/0` or `::/0`).
    pub fn any(family: Family) -> IpPrefix {
        let addr = match family {
            Family::V4 => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            Family::V6 => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
        };
        IpPrefix { addr, len: 0 }
    }

    pub fn addr(&self) -> IpAddr {
        self.addr
    }

    pub fn prefix_len(&self) -> u8 {
        self.len
    }

    /// True for `/0`: the prefix holds every address of its family.
    pub fn is_any(&self) -> bool {
        self.len == 0
    }

    pub fn family(&self) -> Family {
        Family::of(self.addr)
    }

    pub fn is_ipv4(&self) -> bool {
        self.addr.is_ipv4()
    }

    /// The network bits in the low bits of a `u128`.
    pub(crate) fn bits(&self) -> u128 {
        ip_bits(self.addr)
    }

    /// True when `ip` is inside the prefix (same family only).
    pub fn contains(&self, ip: IpAddr) -> bool {
        let family = self.family();
        family == Family::of(ip)
            && (ip_bits(ip) ^ self.bits()) & mask128(family.width(), self.len) == 0
    }

    /// True when every address of `other` is inside this prefix.
    pub fn covers(&self, other: &IpPrefix) -> bool {
        self.len <= other.len && self.contains(other.addr)
    }

    /// True when the two prefixes share an address.
    pub fn overlaps(&self, other: &IpPrefix) -> bool {
        self.covers(other) || other.covers(self)
    }
}

impl fmt::Display for IpPrefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

/// Parsing failed: the text is not `ADDRESS/LEN` (or a bare address).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrefixParseError(pub String);

impl fmt::Display for PrefixParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?} is not an IP prefix (ADDRESS/LEN)", self.0)
    }
}

impl std::error::Error for PrefixParseError {}

impl FromStr for IpPrefix {
    type Err = PrefixParseError;

    /// `"10.0.0.0/8"`, `"2001:db8::/32"`, or a bare address as a host
    /// prefix. Host bits are cleared rather than refused: refusing them is
    /// [`IpPrefix::parse`]'s job, which the config uses.
    fn from_str(s: &str) -> Result<IpPrefix, PrefixParseError> {
        parse_addr_len(s)
            .map(|(addr, len)| IpPrefix::new(addr, len))
            .map_err(|_| PrefixParseError(s.to_string()))
    }
}

/// An inclusive range of transport ports, `first..=last`.
///
/// [`PortRange::new`] and [`PortRange::parse`] never make an empty range.
/// The fields are public for the data plane's own matcher; a range built
/// by hand with `first > last` contains no port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PortRange {
    pub first: u16,
    pub last: u16,
}

impl PortRange {
    /// Every port.
    pub const ANY: PortRange = PortRange {
        first: 0,
        last: u16::MAX,
    };

    /// `first..=last`; `None` when `first > last`.
    pub fn new(first: u16, last: u16) -> Option<PortRange> {
        (first <= last).then_some(PortRange { first, last })
    }

    pub fn single(port: u16) -> PortRange {
        PortRange {
            first: port,
            last: port,
        }
    }

    /// Parses `"80"` or `"1024-65535"`.
    pub fn parse(s: &str) -> Result<PortRange, String> {
        let bad = || format!("{s:?} is not a port or a port range");
        let (a, b) = s.split_once('-').unwrap_or((s, s));
        let first: u16 = a.trim().parse().map_err(|_| bad())?;
        let last: u16 = b.trim().parse().map_err(|_| bad())?;
        PortRange::new(first, last).ok_or_else(|| format!("{s:?} is an empty range"))
    }

    pub fn is_any(&self) -> bool {
        *self == PortRange::ANY
    }

    #[inline]
    pub fn contains(&self, port: u16) -> bool {
        self.first <= port && port <= self.last
    }

    pub fn covers(&self, other: &PortRange) -> bool {
        self.first <= other.first && other.last <= self.last
    }

    /// True when some port is in both.
    pub fn overlaps(&self, other: &PortRange) -> bool {
        self.first <= other.last && other.first <= self.last
    }
}

impl Default for PortRange {
    fn default() -> PortRange {
        PortRange::ANY
    }
}

impl fmt::Display for PortRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.first == self.last {
            write!(f, "{}", self.first)
        } else {
            write!(f, "{}-{}", self.first, self.last)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> IpPrefix {
        s.parse().unwrap()
    }

    #[test]
    fn host_bits_are_cleared() {
        assert_eq!(p("10.1.2.3/24"), p("10.1.2.0/24"));
        assert_eq!(
            p("2001:db8::1/32").addr(),
            "2001:db8::".parse::<IpAddr>().unwrap()
        );
        assert_eq!(p("10.1.2.3").prefix_len(), 32);
        assert!("10.0.0.0/33".parse::<IpPrefix>().is_err());
        assert!("::/129".parse::<IpPrefix>().is_err());
        assert!("banana/3".parse::<IpPrefix>().is_err());
    }

    #[test]
    fn containment_respects_family_and_length() {
        assert!(p("10.0.0.0/8").contains("10.255.0.1".parse().unwrap()));
        assert!(!p("10.0.0.0/8").contains("11.0.0.1".parse().unwrap()));
        assert!(!p("0.0.0.0/0").contains("::1".parse().unwrap()));
        assert!(p("::/0").contains("::1".parse().unwrap()));
        assert!(p("10.0.0.0/8").covers(&p("10.1.0.0/16")));
        assert!(!p("10.1.0.0/16").covers(&p("10.0.0.0/8")));
        assert!(p("10.1.0.0/16").overlaps(&p("10.0.0.0/8")));
        assert!(!p("10.1.0.0/16").overlaps(&p("10.2.0.0/16")));
    }

    #[test]
    fn strict_parse_contains_and_covers() {
        let p = |s: &str| IpPrefix::parse(s).unwrap();
        assert!(p("10.1.0.0/24").contains("10.1.0.255".parse().unwrap()));
        assert!(!p("10.1.0.0/24").contains("10.1.1.0".parse().unwrap()));
        assert!(!p("0.0.0.0/0").contains("::1".parse().unwrap()));
        assert!(p("::/0").contains("2001:db8::1".parse().unwrap()));
        assert!(p("10.0.0.0/8").covers(&p("10.1.0.0/16")));
        assert!(!p("10.1.0.0/16").covers(&p("10.0.0.0/8")));
        assert!(p("10.1.0.0/16").overlaps(&p("10.0.0.0/8")));
        assert!(!p("10.1.0.0/16").overlaps(&p("10.2.0.0/16")));
        assert_eq!(p("10.1.2.3"), p("10.1.2.3/32"));
        assert_eq!(p("2001:db8::/32").prefix_len(), 32);
        assert_eq!(
            IpPrefix::new("10.1.2.3".parse().unwrap(), 40),
            p("10.1.2.3/32")
        );
    }

    #[test]
    fn strict_parse_refuses_host_bits_and_bad_lengths() {
        assert!(IpPrefix::parse("10.1.0.1/24")
            .unwrap_err()
            .contains("10.1.0.0/24"));
        assert!(IpPrefix::parse("10.1.0.0/33").is_err());
        assert!(IpPrefix::parse("2001:db8::/129").is_err());
        assert!(IpPrefix::parse("10.1.0/24").is_err());
    }

    #[test]
    fn port_ranges_parse() {
        let r = PortRange::parse("1000-2000").unwrap();
        assert!(r.covers(&PortRange::parse("1500").unwrap()));
        assert!(r.overlaps(&PortRange::parse("2000-3000").unwrap()));
        assert!(!r.overlaps(&PortRange::parse("2001-3000").unwrap()));
        assert!(PortRange::parse("2-1").is_err());
        assert!(PortRange::parse("70000").is_err());
        assert_eq!(r.to_string(), "1000-2000");
        assert_eq!(PortRange::single(53).to_string(), "53");
    }

    #[test]
    fn port_ranges() {
        assert!(PortRange::new(5, 4).is_none());
        let r = PortRange::new(1000, 2000).unwrap();
        assert!(r.contains(1000) && r.contains(2000) && !r.contains(2001));
        assert!(PortRange::ANY.covers(&r));
        assert!(!r.covers(&PortRange::ANY));
    }
}

//! Address prefixes and port ranges: the values a policy selector is made of.
//!
//! Kept independent of the config model so the tables build from any source
//! (the config, the control socket, tests); the config layer converts into
//! these types.

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

/// A network prefix (`10.1.0.0/24`, `2001:db8::/48`) with its host bits
/// cleared, so equal networks compare equal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IpPrefix {
    addr: IpAddr,
    len: u8,
}

impl IpPrefix {
    /// The prefix of `addr` of length `len`, host bits cleared; `None` when
    /// `len` is longer than the family's width.
    pub fn new(addr: IpAddr, len: u8) -> Option<IpPrefix> {
        let family = Family::of(addr);
        (len <= family.width()).then(|| IpPrefix::from_bits(family, ip_bits(addr), len))
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
    /// the config checker's job, which can say where they came from.
    fn from_str(s: &str) -> Result<IpPrefix, PrefixParseError> {
        let err = || PrefixParseError(s.to_string());
        match s.split_once('/') {
            None => s.parse().map(IpPrefix::host).map_err(|_| err()),
            Some((addr, len)) => {
                let addr: IpAddr = addr.parse().map_err(|_| err())?;
                let len: u8 = len.parse().map_err(|_| err())?;
                IpPrefix::new(addr, len).ok_or_else(err)
            }
        }
    }
}

/// An inclusive range of transport ports; never empty.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PortRange {
    lo: u16,
    hi: u16,
}

impl PortRange {
    /// Every port.
    pub const ANY: PortRange = PortRange {
        lo: 0,
        hi: u16::MAX,
    };

    /// `lo..=hi`; `None` when `lo > hi`.
    pub fn new(lo: u16, hi: u16) -> Option<PortRange> {
        (lo <= hi).then_some(PortRange { lo, hi })
    }

    pub fn single(port: u16) -> PortRange {
        PortRange { lo: port, hi: port }
    }

    pub fn lo(&self) -> u16 {
        self.lo
    }

    pub fn hi(&self) -> u16 {
        self.hi
    }

    pub fn is_any(&self) -> bool {
        *self == PortRange::ANY
    }

    #[inline]
    pub fn contains(&self, port: u16) -> bool {
        self.lo <= port && port <= self.hi
    }

    pub fn covers(&self, other: &PortRange) -> bool {
        self.lo <= other.lo && other.hi <= self.hi
    }
}

impl Default for PortRange {
    fn default() -> PortRange {
        PortRange::ANY
    }
}

impl fmt::Display for PortRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.lo == self.hi {
            write!(f, "{}", self.lo)
        } else {
            write!(f, "{}-{}", self.lo, self.hi)
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
    fn port_ranges() {
        assert!(PortRange::new(5, 4).is_none());
        let r = PortRange::new(1000, 2000).unwrap();
        assert!(r.contains(1000) && r.contains(2000) && !r.contains(2001));
        assert!(PortRange::ANY.covers(&r));
        assert!(!r.covers(&PortRange::ANY));
    }
}

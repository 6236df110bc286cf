//! Address types of the config: prefixes, interface addresses, MACs, port
//! ranges and lcore lists. Each parses from the config's text form and
//! explains what it expected when it cannot.

use core::fmt;
use std::net::IpAddr;

/// The address bits of `ip` as a number, and the family's width in bits.
fn bits(ip: IpAddr) -> (u128, u8) {
    match ip {
        IpAddr::V4(v4) => (u32::from(v4) as u128, 32),
        IpAddr::V6(v6) => (u128::from(v6), 128),
    }
}

/// The netmask of a `len`-bit prefix in a `width`-bit family.
fn mask(width: u8, len: u8) -> u128 {
    if len == 0 {
        0
    } else {
        let full = if width == 128 {
            u128::MAX
        } else {
            (1u128 << width) - 1
        };
        (u128::MAX << (width - len)) & full
    }
}

fn ip_from_bits(family_of: IpAddr, v: u128) -> IpAddr {
    match family_of {
        IpAddr::V4(_) => IpAddr::V4((v as u32).into()),
        IpAddr::V6(_) => IpAddr::V6(v.into()),
    }
}

/// Splits `"IP/LEN"` into an address and a prefix length valid for its family.
fn parse_addr_len(s: &str) -> Result<(IpAddr, u8), String> {
    let (ip, len) = s
        .split_once('/')
        .ok_or_else(|| format!("{s:?} has no prefix length"))?;
    let ip: IpAddr = ip
        .parse()
        .map_err(|_| format!("{ip:?} is not an IPv4 or IPv6 address"))?;
    let width = bits(ip).1;
    let len: u8 = len
        .parse()
        .ok()
        .filter(|l| *l <= width)
        .ok_or_else(|| format!("prefix length {len:?} is not 0..={width}"))?;
    Ok((ip, len))
}

/// A network prefix such as `10.1.0.0/24` or `2001:db8::/32`. Host bits are
/// always zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Prefix {
    addr: IpAddr,
    len: u8,
}

impl Prefix {
    /// A prefix; host bits of `addr` are cleared.
    pub fn new(addr: IpAddr, len: u8) -> Prefix {
        let (v, width) = bits(addr);
        let len = len.min(width);
        Prefix {
            addr: ip_from_bits(addr, v & mask(width, len)),
            len,
        }
    }

    /// Parses `"IP/LEN"`, refusing host bits (a typo for another network) and
    /// accepting a bare address as a host prefix (/32 or /128).
    pub fn parse(s: &str) -> Result<Prefix, String> {
        if !s.contains('/') {
            let ip: IpAddr = s
                .parse()
                .map_err(|_| format!("{s:?} is not an IP prefix"))?;
            return Ok(Prefix::new(ip, bits(ip).1));
        }
        let (ip, len) = parse_addr_len(s)?;
        let prefix = Prefix::new(ip, len);
        if prefix.addr != ip {
            return Err(format!("{s:?} has host bits set (did you mean {prefix}?)"));
        }
        Ok(prefix)
    }

    pub fn addr(&self) -> IpAddr {
        self.addr
    }

    pub fn prefix_len(&self) -> u8 {
        self.len
    }

    pub fn is_ipv4(&self) -> bool {
        self.addr.is_ipv4()
    }

    /// True when `ip` is inside this prefix (same family only).
    pub fn contains(&self, ip: IpAddr) -> bool {
        let (a, width) = bits(self.addr);
        let (b, width_b) = bits(ip);
        width == width_b && (a ^ b) & mask(width, self.len) == 0
    }

    /// True when every address of `other` is inside this prefix.
    pub fn covers(&self, other: &Prefix) -> bool {
        self.len <= other.len && self.contains(other.addr)
    }

    /// True when the two prefixes share at least one address.
    pub fn overlaps(&self, other: &Prefix) -> bool {
        self.covers(other) || other.covers(self)
    }
}

impl fmt::Display for Prefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

/// An address configured on a port, with the length of its subnet
/// (`10.1.0.1/24`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct IfAddr {
    pub addr: IpAddr,
    pub prefix_len: u8,
}

impl IfAddr {
    pub fn parse(s: &str) -> Result<IfAddr, String> {
        let (addr, prefix_len) = parse_addr_len(s)?;
        Ok(IfAddr { addr, prefix_len })
    }

    /// The directly attached subnet.
    pub fn subnet(&self) -> Prefix {
        Prefix::new(self.addr, self.prefix_len)
    }
}

impl fmt::Display for IfAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix_len)
    }
}

/// An Ethernet MAC address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MacAddr(pub [u8; 6]);

impl MacAddr {
    /// Parses `aa:bb:cc:dd:ee:ff` (or with `-`); refuses group (multicast
    /// and broadcast) addresses, which no port or neighbor can have.
    pub fn parse(s: &str) -> Result<MacAddr, String> {
        let parts: Vec<&str> = s.split([':', '-']).collect();
        let mut mac = [0u8; 6];
        let well_formed = parts.len() == 6
            && parts
                .iter()
                .zip(mac.iter_mut())
                .all(|(p, b)| p.len() == 2 && u8::from_str_radix(p, 16).map(|v| *b = v).is_ok());
        if !well_formed {
            return Err(format!("{s:?} is not a MAC address"));
        }
        if mac[0] & 1 != 0 {
            return Err(format!("{s:?} is a multicast/broadcast MAC address"));
        }
        Ok(MacAddr(mac))
    }
}

impl fmt::Display for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let m = self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            m[0], m[1], m[2], m[3], m[4], m[5]
        )
    }
}

/// An inclusive range of TCP/UDP/SCTP ports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PortRange {
    pub first: u16,
    pub last: u16,
}

impl PortRange {
    /// Parses `"80"` or `"1024-65535"`.
    pub fn parse(s: &str) -> Result<PortRange, String> {
        let bad = || format!("{s:?} is not a port or a port range");
        let (a, b) = s.split_once('-').unwrap_or((s, s));
        let first: u16 = a.trim().parse().map_err(|_| bad())?;
        let last: u16 = b.trim().parse().map_err(|_| bad())?;
        if first > last {
            return Err(format!("{s:?} is an empty range"));
        }
        Ok(PortRange { first, last })
    }

    pub fn covers(&self, other: &PortRange) -> bool {
        self.first <= other.first && other.last <= self.last
    }

    pub fn overlaps(&self, other: &PortRange) -> bool {
        self.first <= other.last && other.first <= self.last
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

/// Parses an lcore list such as `"1-3,5"` into sorted, distinct core ids.
pub fn parse_lcores(s: &str) -> Result<Vec<u32>, String> {
    let mut cores = Vec::new();
    for part in s.split(',').map(str::trim) {
        let bad = || format!("{part:?} is not a core number or range");
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        let first: u32 = a.trim().parse().map_err(|_| bad())?;
        let last: u32 = b.trim().parse().map_err(|_| bad())?;
        if first > last {
            return Err(format!("{part:?} is an empty range"));
        }
        // Lcore ids are below DPDK's RTE_MAX_LCORE; refusing huge ranges also
        // keeps a typo from allocating millions of entries.
        if last >= MAX_LCORE {
            return Err(format!("core {last} is not below {MAX_LCORE}"));
        }
        for core in first..=last {
            if cores.contains(&core) {
                return Err(format!("core {core} is listed twice"));
            }
            cores.push(core);
        }
    }
    cores.sort_unstable();
    Ok(cores)
}

/// Highest lcore id + 1 that an lcore list may name.
pub const MAX_LCORE: u32 = 1024;

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Prefix {
        Prefix::parse(s).unwrap()
    }

    #[test]
    fn prefixes_contain_and_cover() {
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
    }

    #[test]
    fn prefixes_refuse_host_bits_and_bad_lengths() {
        assert!(Prefix::parse("10.1.0.1/24")
            .unwrap_err()
            .contains("10.1.0.0/24"));
        assert!(Prefix::parse("10.1.0.0/33").is_err());
        assert!(Prefix::parse("2001:db8::/129").is_err());
        assert!(Prefix::parse("10.1.0/24").is_err());
        assert!(IfAddr::parse("10.1.0.1").is_err());
        assert_eq!(
            IfAddr::parse("10.1.0.1/24").unwrap().subnet(),
            p("10.1.0.0/24")
        );
    }

    #[test]
    fn macs_parse_and_refuse_group_addresses() {
        let mac = MacAddr::parse("02:00:5e:10:00:0A").unwrap();
        assert_eq!(mac.to_string(), "02:00:5e:10:00:0a");
        assert!(MacAddr::parse("01:00:5e:00:00:01").is_err());
        assert!(MacAddr::parse("ff:ff:ff:ff:ff:ff").is_err());
        assert!(MacAddr::parse("02:00:5e:10:00").is_err());
        assert!(MacAddr::parse("02:00:5e:10:00:0g").is_err());
    }

    #[test]
    fn lcore_lists_expand() {
        assert_eq!(parse_lcores("1-3,5").unwrap(), vec![1, 2, 3, 5]);
        assert_eq!(parse_lcores("7").unwrap(), vec![7]);
        assert!(parse_lcores("3-1").is_err());
        assert!(parse_lcores("1,1").is_err());
        assert!(parse_lcores("1-x").is_err());
        assert!(parse_lcores("0-4000000000").is_err());
    }

    #[test]
    fn port_ranges() {
        let r = PortRange::parse("1000-2000").unwrap();
        assert!(r.covers(&PortRange::parse("1500").unwrap()));
        assert!(r.overlaps(&PortRange::parse("2000-3000").unwrap()));
        assert!(!r.overlaps(&PortRange::parse("2001-3000").unwrap()));
        assert!(PortRange::parse("2-1").is_err());
        assert!(PortRange::parse("70000").is_err());
    }
}

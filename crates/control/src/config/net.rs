//! Address types of the config: prefixes, interface addresses, MACs, port
//! ranges and lcore lists. Each parses from the config's text form and
//! explains what it expected when it cannot.
//!
//! Prefixes and port ranges are the tables' own types, so a parsed config
//! selector goes into the SPD as it is.

use core::fmt;
use std::net::IpAddr;

use crate::tables::parse_addr_len;
/// The config's name for [`crate::tables::IpPrefix`]: a network prefix with
/// host bits cleared; `Prefix::parse` is the config's strict parser.
pub use crate::tables::IpPrefix as Prefix;
pub use crate::tables::PortRange;

/// An address configured on a port, with the length of its subnet
/// (`10.1.0.1/24`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct IfAddr {
    pub addr: IpAddr,
    pub prefix_len: u8,
}

impl IfAddr {
    pub fn parse(s: &str) -> Result<IfAddr, String> {
        // A port address names its subnet: a bare address is not enough.
        if !s.contains('/') {
            return Err(format!("{s:?} has no prefix length"));
        }
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

    #[test]
    fn interface_addresses_need_a_length_and_name_their_subnet() {
        assert!(IfAddr::parse("10.1.0.1").is_err());
        assert_eq!(
            IfAddr::parse("10.1.0.1/24").unwrap().subnet(),
            Prefix::parse("10.1.0.0/24").unwrap()
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
}

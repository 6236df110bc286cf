//! The flows a case sends: `count` distinct UDP 5-tuples from the sending
//! side's network, so that per-flow state in the worker (the SPD flow
//! cache) is measured as traffic of many flows exercises it, not only on
//! its hit path. Flow `i` has UDP source port `FIRST_PORT + i % 50000` from
//! the `i / 50000`-th address after the sending host's (all inside the
//! sender's /24, which the tunnel's traffic selectors cover); destination
//! address and port are the same for every flow.
//!
//! `bench/run-vs-bench.sh` replays 64 flows with source ports 10000..10063:
//! the default `--flows 64` sends the same set.

use std::net::Ipv4Addr;

/// UDP source port of flow 0.
pub const FIRST_PORT: u16 = 10000;
/// Source ports used per source address before the next address is taken
/// (10000..=59999: clear of the well-known ports and of u16's end).
pub const PORTS_PER_ADDR: usize = 50_000;
/// UDP destination port of every flow.
pub const DST_PORT: u16 = 5001;

/// The default `--flows`: what `bench/run-vs-bench.sh` replays.
pub const DEFAULT_FLOWS: usize = 64;
/// The most `--flows`: 20 source addresses, which stay inside a /24 from
/// host .10 on (and the pre-built packets within memory, see `case`).
pub const MAX_FLOWS: usize = 1_000_000;

/// A set of `count` flows from `first_src` on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Flows {
    count: usize,
    first_src: Ipv4Addr,
}

impl Flows {
    /// `count` flows (1..=[`MAX_FLOWS`]) whose first source is `first_src`.
    /// The addresses after it must stay in its /24: the caller picks a host
    /// low enough (.10 leaves room for [`MAX_FLOWS`]).
    pub fn new(count: usize, first_src: Ipv4Addr) -> Result<Flows, String> {
        if !(1..=MAX_FLOWS).contains(&count) {
            return Err(format!("flows: {count} is outside 1..={MAX_FLOWS}"));
        }
        let last_host = usize::from(first_src.octets()[3]) + (count - 1) / PORTS_PER_ADDR;
        if last_host > 254 {
            return Err(format!(
                "flows: {count} flows from {first_src} leave its /24"
            ));
        }
        Ok(Flows { count, first_src })
    }

    /// How many flows.
    pub fn count(&self) -> usize {
        self.count
    }

    /// Source address and UDP source port of flow `i` (taken modulo
    /// [`count`](Flows::count)).
    pub fn source(&self, i: usize) -> (Ipv4Addr, u16) {
        let i = i % self.count;
        let addr = u32::from(self.first_src) + (i / PORTS_PER_ADDR) as u32;
        let port = FIRST_PORT + (i % PORTS_PER_ADDR) as u16;
        (Ipv4Addr::from(addr), port)
    }

    /// The flow a packet from `src`, UDP source port `sport` belongs to, or
    /// None when it is none of this set's.
    pub fn index_of(&self, src: Ipv4Addr, sport: u16) -> Option<usize> {
        let addr_offset = u32::from(src).checked_sub(u32::from(self.first_src))? as usize;
        let port_offset = usize::from(sport.checked_sub(FIRST_PORT)?);
        if port_offset >= PORTS_PER_ADDR {
            return None;
        }
        let i = addr_offset
            .checked_mul(PORTS_PER_ADDR)?
            .checked_add(port_offset)?;
        (i < self.count).then_some(i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    const HOST: Ipv4Addr = Ipv4Addr::new(10, 1, 0, 10);

    #[test]
    fn default_set_is_run_vs_bench_ports_from_one_host() {
        let f = Flows::new(DEFAULT_FLOWS, HOST).unwrap();
        assert_eq!(f.source(0), (HOST, 10000));
        assert_eq!(f.source(63), (HOST, 10063));
        assert_eq!(f.source(64), f.source(0), "cycles");
    }

    #[test]
    fn every_flow_is_distinct_and_maps_back_to_its_index() {
        let f = Flows::new(110_000, HOST).unwrap();
        let mut seen = HashSet::new();
        for i in 0..f.count() {
            let (src, port) = f.source(i);
            assert!(seen.insert((src, port)), "flow {i} repeats");
            assert_eq!(f.index_of(src, port), Some(i));
        }
        // Past 50000 ports the next address is taken, inside the /24.
        assert_eq!(f.source(49_999), (HOST, 59_999));
        assert_eq!(f.source(50_000), (Ipv4Addr::new(10, 1, 0, 11), 10000));
        assert_eq!(f.source(109_999).0, Ipv4Addr::new(10, 1, 0, 12));
    }

    #[test]
    fn packets_of_other_flows_are_not_members() {
        let f = Flows::new(64, HOST).unwrap();
        assert_eq!(f.index_of(HOST, 10064), None, "one port past the set");
        assert_eq!(f.index_of(HOST, 9999), None);
        assert_eq!(f.index_of(HOST, 40000), None);
        assert_eq!(f.index_of(Ipv4Addr::new(10, 1, 0, 9), 10000), None);
        assert_eq!(f.index_of(Ipv4Addr::new(10, 1, 0, 11), 10000), None);
        let big = Flows::new(50_001, HOST).unwrap();
        assert_eq!(
            big.index_of(Ipv4Addr::new(10, 1, 0, 11), 10000),
            Some(50_000)
        );
        assert_eq!(big.index_of(Ipv4Addr::new(10, 1, 0, 11), 10001), None);
        assert_eq!(big.index_of(HOST, 60_000), None, "port past the range");
    }

    #[test]
    fn counts_out_of_range_or_past_the_prefix_are_refused() {
        assert!(Flows::new(0, HOST).is_err());
        assert!(Flows::new(MAX_FLOWS + 1, HOST).is_err());
        assert!(Flows::new(MAX_FLOWS, HOST).is_ok());
        assert!(Flows::new(50_001, Ipv4Addr::new(10, 1, 0, 254)).is_err());
    }
}

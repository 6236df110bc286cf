//! Which mempool each port's receive queues fill from: one pool per NUMA
//! socket that has ports, so that a NIC writes received packets into
//! memory on its own socket (DPDK's own examples do the same; a NIC that
//! DMAs into the other socket's memory crosses the socket link for every
//! packet, and on dual-socket appliances with a NIC on each socket that
//! is the difference between line rate and not).
//!
//! A packet's buffer goes back to the pool it came from when freed,
//! whichever port sent it, so nothing else needs to know. Ports whose
//! socket DPDK does not know (-1: virtual devices, or a platform without
//! NUMA information) take the first pool; with no known socket at all
//! there is one pool on any socket, as before.

/// The plan: the sockets to make a pool on (in the order of the first
/// port on each; `-1` alone: one pool on any socket), and per port the
/// index of its pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolPlan {
    pub sockets: Vec<i32>,
    pub port_pool: Vec<usize>,
}

impl PoolPlan {
    /// The plan for ports on `sockets` (DPDK's `rte_eth_dev_socket_id`,
    /// -1 when unknown).
    pub fn for_ports(port_sockets: &[i32]) -> PoolPlan {
        let mut sockets: Vec<i32> = Vec::new();
        for &s in port_sockets {
            if s >= 0 && !sockets.contains(&s) {
                sockets.push(s);
            }
        }
        if sockets.is_empty() {
            sockets.push(-1);
        }
        let port_pool = port_sockets
            .iter()
            .map(|s| sockets.iter().position(|k| k == s).unwrap_or(0))
            .collect();
        PoolPlan { sockets, port_pool }
    }

    /// Which ports each pool serves, for the log: `socket 0: a, b; socket
    /// 1: c` (`names` by port, in the order of the plan's ports).
    pub fn describe(&self, names: &[&str]) -> String {
        self.sockets
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let ports: Vec<&str> = names
                    .iter()
                    .zip(&self.port_pool)
                    .filter(|(_, &k)| k == i)
                    .map(|(n, _)| *n)
                    .collect();
                format!("socket {s}: {}", ports.join(", "))
            })
            .collect::<Vec<_>>()
            .join("; ")
    }

    /// The name of pool `i` (DPDK names are unique per process): the one
    /// pool keeps the name it always had.
    pub fn name(&self, i: usize) -> String {
        if self.sockets.len() == 1 {
            "espgw_mbufs".to_string()
        } else {
            format!("espgw_mbufs_s{}", self.sockets[i])
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_pool_per_socket_with_ports() {
        // Virtual devices (and single-socket hosts): one pool, as before.
        let p = PoolPlan::for_ports(&[-1, -1]);
        assert_eq!(
            (p.sockets.clone(), p.port_pool.clone()),
            (vec![-1], vec![0, 0])
        );
        assert_eq!(p.name(0), "espgw_mbufs");
        let p = PoolPlan::for_ports(&[0, 0, -1]);
        assert_eq!(
            (p.sockets.clone(), p.port_pool.clone()),
            (vec![0], vec![0, 0, 0])
        );
        assert_eq!(p.name(0), "espgw_mbufs");
        // A NIC on each socket of a dual-socket appliance.
        let p = PoolPlan::for_ports(&[1, 0, 1, -1]);
        assert_eq!(p.sockets, vec![1, 0]);
        assert_eq!(p.port_pool, vec![0, 1, 0, 0], "unknown takes the first");
        assert_eq!(
            (p.name(0), p.name(1)),
            ("espgw_mbufs_s1".into(), "espgw_mbufs_s0".into())
        );
        assert_eq!(
            p.describe(&["a", "b", "c", "d"]),
            "socket 1: a, c, d; socket 0: b"
        );
        assert!(PoolPlan::for_ports(&[]).port_pool.is_empty());
    }
}

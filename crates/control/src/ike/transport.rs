//! How IKE datagrams leave the driver. The driver is sans I/O; a
//! transport sends what [`super::IkeDriver::poll_transmit`] returns, and
//! whoever receives datagrams calls [`super::IkeDriver::handle_datagram`].
//!
//! - Production: the data plane's punt rings ([`super::PuntTransport`],
//!   punt.rs). Workers hand UDP 500 and non-ESP UDP 4500 for our addresses
//!   to the control thread and send what it queues (docs/ike.md "Gateway
//!   integration").
//! - [`UdpTransport`]: kernel UDP sockets on local:500 and local:4500, for
//!   development and tests without the punt path. ESP in UDP 4500 is NOT
//!   handled here: the socket would receive it as a datagram without the
//!   non-ESP marker and the engine counts it as `not_ike`.
//! - [`MemoryTransport`]: a queue, for in-process tests.

use std::collections::VecDeque;
use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

use espgw_ike::engine::Transmit;

/// Sends IKE datagrams (best effort: a lost one is retransmitted by the
/// engine).
pub trait IkeTransport: Send {
    fn send(&mut self, datagram: Transmit);
}

/// Keeps what was sent, for a test to deliver.
#[derive(Debug, Default)]
pub struct MemoryTransport {
    pub sent: VecDeque<Transmit>,
}

impl IkeTransport for MemoryTransport {
    fn send(&mut self, datagram: Transmit) {
        self.sent.push_back(datagram);
    }
}

/// A received datagram: source, our address it came to, UDP payload.
pub type Received = (SocketAddr, SocketAddr, Vec<u8>);

/// Kernel UDP sockets on our address, ports 500 and 4500 (binding them
/// needs CAP_NET_BIND_SERVICE).
#[derive(Debug)]
pub struct UdpTransport {
    ike: UdpSocket,
    nat_t: UdpSocket,
}

impl UdpTransport {
    /// Binds `local:ike_port` and `local:nat_t_port` (500 and 4500 for a
    /// real peer; other ports for tests that run unprivileged).
    pub fn bind(local: std::net::IpAddr, ike_port: u16, nat_t_port: u16) -> io::Result<Self> {
        let ike = UdpSocket::bind(SocketAddr::new(local, ike_port))?;
        let nat_t = UdpSocket::bind(SocketAddr::new(local, nat_t_port))?;
        Ok(UdpTransport { ike, nat_t })
    }

    /// Another handle on the same sockets: one sends (inside the
    /// service), one receives (the loop).
    pub fn try_clone(&self) -> io::Result<Self> {
        Ok(UdpTransport {
            ike: self.ike.try_clone()?,
            nat_t: self.nat_t.try_clone()?,
        })
    }

    pub fn local_addrs(&self) -> io::Result<(SocketAddr, SocketAddr)> {
        Ok((self.ike.local_addr()?, self.nat_t.local_addr()?))
    }

    /// Waits up to `timeout` for a datagram on either socket.
    pub fn recv(&self, timeout: Duration) -> io::Result<Option<Received>> {
        let mut buf = vec![0u8; 65536];
        // Poll both sockets in short turns: std has no select.
        let step = Duration::from_millis(5).min(timeout.max(Duration::from_millis(1)));
        let deadline = std::time::Instant::now() + timeout;
        loop {
            for s in [&self.ike, &self.nat_t] {
                s.set_read_timeout(Some(step))?;
                match s.recv_from(&mut buf) {
                    Ok((n, src)) => {
                        buf.truncate(n);
                        return Ok(Some((src, s.local_addr()?, buf)));
                    }
                    Err(e)
                        if e.kind() == io::ErrorKind::WouldBlock
                            || e.kind() == io::ErrorKind::TimedOut => {}
                    Err(e) => return Err(e),
                }
            }
            if std::time::Instant::now() >= deadline {
                return Ok(None);
            }
        }
    }
}

impl IkeTransport for UdpTransport {
    fn send(&mut self, t: Transmit) {
        let sock = if t.src.port() == self.nat_t.local_addr().map_or(0, |a| a.port()) {
            &self.nat_t
        } else {
            &self.ike
        };
        if let Err(e) = sock.send_to(&t.payload, t.dst) {
            tracing::warn!(dst = %t.dst, error = %e, "IKE: send failed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn udp_transport_sends_from_the_socket_of_the_source_port() {
        let lo: std::net::IpAddr = "127.0.0.1".parse().unwrap();
        let mut a = UdpTransport::bind(lo, 0, 0).unwrap();
        let b = UdpTransport::bind(lo, 0, 0).unwrap();
        let (a_ike, a_nat) = a.local_addrs().unwrap();
        let (b_ike, b_nat) = b.local_addrs().unwrap();
        a.send(Transmit {
            src: a_ike,
            dst: b_ike,
            payload: vec![1, 2, 3],
        });
        let (src, dst, payload) = b.recv(Duration::from_secs(5)).unwrap().unwrap();
        assert_eq!((src, dst, payload), (a_ike, b_ike, vec![1, 2, 3]));
        a.send(Transmit {
            src: a_nat,
            dst: b_nat,
            payload: vec![0, 0, 0, 0, 9],
        });
        let (src, dst, payload) = b.recv(Duration::from_secs(5)).unwrap().unwrap();
        assert_eq!((src, dst, payload), (a_nat, b_nat, vec![0, 0, 0, 0, 9]));
        assert!(b.recv(Duration::from_millis(20)).unwrap().is_none());
    }
}

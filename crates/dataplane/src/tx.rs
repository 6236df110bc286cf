//! Per-port transmit buffers filled by a worker during a burst and drained
//! by the runtime (DPDK TX burst) or by tests.

use espgw_wire::PacketBuf;

/// One buffer of outgoing frames per port.
#[derive(Debug)]
pub struct TxQueues<B> {
    queues: Vec<Vec<B>>,
}

impl<B: PacketBuf> TxQueues<B> {
    /// Buffers for `ports` ports, each with room for `capacity` frames
    /// before it grows (it grows rather than drop: a burst can fan out).
    pub fn new(ports: usize, capacity: usize) -> Self {
        TxQueues {
            queues: (0..ports).map(|_| Vec::with_capacity(capacity)).collect(),
        }
    }

    /// Queues `frame` for `port`.
    #[inline]
    pub fn push(&mut self, port: usize, frame: B) {
        self.queues[port].push(frame);
    }

    /// The frames queued for `port`.
    pub fn queued(&self, port: usize) -> &[B] {
        &self.queues[port]
    }

    /// Takes the frames queued for `port`, in order, keeping the capacity.
    pub fn drain(&mut self, port: usize) -> std::vec::Drain<'_, B> {
        self.queues[port].drain(..)
    }

    /// Number of ports.
    pub fn ports(&self) -> usize {
        self.queues.len()
    }

    /// Frames queued on all ports.
    pub fn len(&self) -> usize {
        self.queues.iter().map(Vec::len).sum()
    }

    /// True when nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.queues.iter().all(Vec::is_empty)
    }
}

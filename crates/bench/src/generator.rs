//! The generator: takes fresh mbufs from the worker's pool and copies
//! pre-built packets into them, a burst at a time, as a NIC's receive
//! would hand them over.

use dpdk::{Burst, Mbuf, Mempool};

/// Packets per burst, as the gateway's default `burst`.
pub const BURST: usize = 32;

/// One pre-built packet.
#[derive(Debug, Clone)]
pub struct Template {
    pub bytes: Vec<u8>,
    /// Inner IP packet bytes it carries (the case's "size").
    pub inner_len: usize,
    /// ESP sequence number it was sealed with (pre-encrypted packets), else 0.
    pub seq: u64,
}

/// What the generator put in each slot of the last burst.
#[derive(Debug, Clone, Copy, Default)]
pub struct Slot {
    pub inner_len: usize,
    pub seq: u64,
}

/// Cycles through `templates`, [`BURST`] packets per call.
pub struct Generator {
    templates: Vec<Template>,
    next: usize,
    staging: Burst<BURST>,
    pub slots: [Slot; BURST],
    /// Streaming stores (see [`Generator::streaming`]).
    streaming: bool,
}

impl Generator {
    pub fn new(templates: Vec<Template>) -> Self {
        assert!(!templates.is_empty(), "generator needs packets");
        Generator {
            templates,
            next: 0,
            staging: Burst::new(),
            slots: [Slot::default(); BURST],
            streaming: false,
        }
    }

    /// With `on`, [`Generator::fill`] writes each packet with streaming
    /// (non-temporal) stores, as a NIC's DMA would: the packet starts in
    /// memory, not in this core's cache, and writing into a buffer another
    /// core dirtied last (a fan-out helper decrypted it) does not wait for
    /// that core to give its lines up (`--streaming-rx`).
    pub fn streaming(mut self, on: bool) -> Self {
        self.streaming = on;
        self
    }

    /// Appends [`BURST`] filled mbufs to `out` (in template order) and
    /// records them in `slots`. Returns true when this burst started a new
    /// pass over the templates (the decrypt cases then need a fresh replay
    /// window: the same sequence numbers come again).
    pub fn fill(&mut self, pool: &Mempool, out: &mut Vec<Mbuf>) -> Result<bool, String> {
        let wrapped = self.next == 0;
        pool.alloc_bulk(&mut self.staging, BURST)
            .map_err(|e| format!("generator: mempool exhausted ({e}); is the sink freeing?"))?;
        let first = out.len();
        while let Some(m) = self.staging.pop() {
            out.push(m);
        }
        out[first..].reverse();
        for (i, m) in out[first..].iter_mut().enumerate() {
            let t = &self.templates[self.next];
            // (An error ends the case before any packet is handed on, so
            // only the way out below needs the fence.)
            let copied = if self.streaming {
                m.extend_from_slice_streaming(&t.bytes)
            } else {
                m.extend_from_slice(&t.bytes)
            };
            copied.map_err(|_| {
                format!(
                    "generator: {}-byte packet does not fit an mbuf",
                    t.bytes.len()
                )
            })?;
            self.slots[i] = Slot {
                inner_len: t.inner_len,
                seq: t.seq,
            };
            self.next += 1;
            if self.next == self.templates.len() {
                self.next = 0;
            }
        }
        if self.streaming {
            // Before the stage may hand a packet to another worker.
            Mbuf::streaming_fence();
        }
        Ok(wrapped)
    }
}

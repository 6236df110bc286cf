//! `[dataplane] steer_esp` in `espgw run`: the main lcore keeps each
//! port's ESP flow rules (rte_flow, `dpdk::flow`) equal to the inbound SAs
//! of the newest snapshot ([`crate::esp_steering`] plans and keeps the
//! books). Checked from the control loop every 20 ms; a snapshot that did
//! not change costs one atomic load.

use dpdk::{EspSteer, Flow, Port};
use espgw_control::tables::Reader;
use serde_json::{json, Value};

use super::control::Snapshot;
use crate::esp_steering::{self, EspSteering, FlowRules, PortSteering, SteerError, SteerKey};
use crate::network::Network;

/// The ports' rte_flow API as [`FlowRules`].
struct Nic<'a> {
    ports: &'a [Port],
}

fn steer_error(e: dpdk::Error) -> SteerError {
    SteerError {
        errno: e.errno(),
        text: e.to_string(),
    }
}

impl FlowRules for Nic<'_> {
    type Rule = Flow;

    fn create(&mut self, key: &SteerKey, queue: u16) -> Result<Flow, SteerError> {
        let Some(port) = self.ports.get(key.port) else {
            return Err(SteerError {
                errno: 19, // ENODEV
                text: format!("no port {}", key.port),
            });
        };
        port.create_esp_steer(&EspSteer {
            v6: key.v6,
            udp_dst_port: key.udp_dst_port,
            spi: key.spi,
            queue,
        })
        .map_err(steer_error)
    }

    fn destroy(&mut self, port: usize, rule: Flow) -> Result<(), SteerError> {
        match self.ports.get(port) {
            Some(p) => p.destroy_flow(rule).map_err(steer_error),
            None => Ok(()),
        }
    }
}

pub(super) struct Steering {
    rules: EspSteering<Flow>,
    reader: Reader<Snapshot>,
    /// The first poll applies the snapshot held, changed or not.
    applied: bool,
}

impl Steering {
    /// Steering over `queues` RX queues per port, following `reader`.
    pub(super) fn new(queues: u16, reader: Reader<Snapshot>) -> Steering {
        Steering {
            rules: EspSteering::new(queues),
            reader,
            applied: false,
        }
    }

    /// Brings the rules up to the newest snapshot, if it changed.
    pub(super) fn poll(&mut self, ports: &[Port], net: &Network) {
        if !self.reader.quiescent() && self.applied {
            return;
        }
        self.applied = true;
        let want = esp_steering::wanted(self.reader.get());
        let done = self.rules.apply(&want, &mut Nic { ports });
        let name = |i: usize| net.ports.get(i).map_or("?", |p| p.name.as_str());
        for (port, why) in &done.refused {
            tracing::warn!(
                port = name(*port),
                "steer_esp: the NIC takes no ESP flow rules ({why}); this port's ESP goes by RSS \
                 (one tunnel's SAs to one worker)"
            );
        }
        for (key, why) in &done.failed {
            tracing::warn!(
                port = name(key.port),
                spi = format!("{:#010x}", key.spi),
                "steer_esp: rule not taken ({why}); the SA's ESP goes by RSS, retried at the next \
                 SA change"
            );
        }
        if done.created + done.destroyed > 0 {
            tracing::info!(
                created = done.created,
                removed = done.destroyed,
                "steer_esp: ESP flow rules updated"
            );
        }
    }

    /// Per port, what steering does: for the stats JSON.
    pub(super) fn json(&self, port: usize) -> Value {
        match self.rules.port_state(port) {
            PortSteering::Steering(n) => json!({"state": "steering", "rules": n}),
            PortSteering::Refused(why) => json!({"state": "refused", "why": why}),
        }
    }

    /// Removes every rule (before the ports stop).
    pub(super) fn remove_all(&mut self, ports: &[Port]) {
        let _ = self.rules.apply(&Default::default(), &mut Nic { ports });
        self.rules.forget();
    }
}

//! `[dataplane] steer_esp` in `espgw run`: the main lcore keeps each
//! port's ESP flow rules (rte_flow, `dpdk::flow`) equal to the inbound SAs
//! of the newest snapshot ([`crate::esp_steering`] plans and keeps the
//! books). Checked from the control loop every 20 ms through a snapshot
//! [`Watcher`] (not a registered reader: a publish never waits for the
//! main lcore); a snapshot that did not change costs one atomic load.

use std::sync::{Arc, Mutex};

use dpdk::{EspSteer, Flow, Port};
use espgw_control::live::EspSteeringState;
use espgw_control::tables::Watcher;
use serde_json::{json, Value};

use super::control::Snapshot;
use crate::esp_steering::{self, EspSteering, FlowRules, SteerError, SteerKey};
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

/// ENODEV: a rule for a port index the run does not have.
fn no_port(port: usize) -> SteerError {
    SteerError {
        errno: 19,
        text: format!("no port {port}"),
    }
}

impl FlowRules for Nic<'_> {
    type Rule = Flow;

    fn create(&mut self, key: &SteerKey, queue: u16) -> Result<Flow, SteerError> {
        let port = self.ports.get(key.port).ok_or_else(|| no_port(key.port))?;
        port.create_esp_steer(&EspSteer {
            v6: key.v6,
            udp_dst_port: key.udp_dst_port,
            spi: key.spi,
            queue,
        })
        .map_err(steer_error)
    }

    fn destroy(&mut self, port: usize, rule: Flow) -> Result<(), SteerError> {
        let p = self.ports.get(port).ok_or_else(|| no_port(port))?;
        p.destroy_flow(rule).map_err(steer_error)
    }

    fn flush(&mut self, port: usize) -> Result<(), SteerError> {
        let p = self.ports.get(port).ok_or_else(|| no_port(port))?;
        p.flush_flows().map_err(steer_error)
    }
}

pub(super) struct Steering {
    rules: EspSteering<Flow>,
    watcher: Watcher<Snapshot>,
    /// What `ctl stats` and the metrics show, per port, after each change.
    view: Arc<Mutex<Option<Vec<EspSteeringState>>>>,
}

impl Steering {
    /// Steering over `queues` RX queues per port, following `watcher`,
    /// publishing its state to `view`.
    pub(super) fn new(
        queues: u16,
        watcher: Watcher<Snapshot>,
        view: Arc<Mutex<Option<Vec<EspSteeringState>>>>,
    ) -> Steering {
        Steering {
            rules: EspSteering::new(queues),
            watcher,
            view,
        }
    }

    /// Port `port`'s state in the control plane's form.
    fn state(&self, port: usize) -> EspSteeringState {
        let s = self.rules.port_state(port);
        EspSteeringState {
            state: s.state().to_string(),
            rules: s.rules as u64,
            refused: s
                .refused
                .iter()
                .map(|(f, _)| f.name().to_string())
                .collect(),
        }
    }

    /// Brings the rules up to the newest snapshot, if it changed (the
    /// first call: the current one).
    pub(super) fn poll(&mut self, ports: &[Port], net: &Network) {
        let Some((_, tables)) = self.watcher.changed() else {
            return;
        };
        let want = esp_steering::wanted(&tables);
        drop(tables);
        let done = self.rules.apply(&want, &mut Nic { ports });
        let name = |i: usize| net.ports.get(i).map_or("?", |p| p.name.as_str());
        for (port, form, why) in &done.refused {
            tracing::warn!(
                port = name(*port),
                form = form.name(),
                "steer_esp: the NIC takes no ESP flow rules of this form ({why}); such SAs' \
                 ESP on this port goes by RSS (one tunnel's SAs to one worker)"
            );
        }
        for (key, why) in &done.failed {
            tracing::warn!(
                port = name(key.port),
                spi = format!("{:#010x}", key.spi),
                "steer_esp: rule not taken ({why}); the SA's ESP goes by RSS, retried at each \
                 SA change"
            );
        }
        for (port, why) in &done.not_removed {
            tracing::warn!(
                port = name(*port),
                "steer_esp: a rule of an SA that is gone was not removed ({why}); it matches \
                 nothing that exists, and the port's rules are flushed at stop"
            );
        }
        let states = (0..ports.len()).map(|i| self.state(i)).collect();
        if let Ok(mut view) = self.view.lock() {
            *view = Some(states);
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
        let s = self.rules.port_state(port);
        let refused: serde_json::Map<String, Value> = s
            .refused
            .iter()
            .map(|(form, why)| (form.name().to_string(), json!(why)))
            .collect();
        json!({
            "state": s.state(),
            "rules": s.rules,
            "refused": refused,
        })
    }

    /// Failed tries to install a rule, retries included.
    pub(super) fn failed_tries(&self) -> u64 {
        self.rules.failed_tries
    }

    /// Removes every rule (before the ports stop).
    pub(super) fn remove_all(&mut self, ports: &[Port], net: &Network) {
        for (port, why) in self.rules.remove_all(&mut Nic { ports }) {
            let name = net.ports.get(port).map_or("?", |p| p.name.as_str());
            tracing::warn!(port = name, "steer_esp: flushing the port's rules: {why}");
        }
    }
}

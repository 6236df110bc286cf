//! From a config tunnel to the ESP engine's per-direction SA config.

use espgw_esp::{Encap as EspEncap, Lifetimes, Limit, SaConfig};

use super::model::{EncapMode, SaKeys, Tunnel};

impl Tunnel {
    /// The outbound SA (`local -> remote`) for `espgw_esp::OutboundSa::new`.
    pub fn outbound_sa(&self) -> SaConfig {
        self.sa_config(&self.outbound)
    }

    /// The inbound SA (`remote -> local`) for `espgw_esp::InboundSa::new`.
    pub fn inbound_sa(&self) -> SaConfig {
        self.sa_config(&self.inbound)
    }

    fn sa_config(&self, keys: &SaKeys) -> SaConfig {
        let limit = |soft: Option<u64>, hard: Option<u64>| Limit { soft, hard };
        let (soft, hard) = (&self.lifetime.soft, &self.lifetime.hard);
        SaConfig {
            suite: self.suite,
            spi: keys.spi,
            // The config holds the engine's own secret type: a clone, no
            // conversion through plain bytes.
            key: keys.key.clone(),
            auth_key: keys.auth_key.clone().unwrap_or_default(),
            esn: self.esn,
            replay_window: self.replay_window,
            encap: match self.encap {
                EncapMode::None => EspEncap::None,
                EncapMode::Udp { peer_port } => EspEncap::Udp {
                    local_port: EspEncap::NAT_T_PORT,
                    remote_port: peer_port,
                },
            },
            local: self.local,
            remote: self.remote,
            lifetimes: Lifetimes {
                packets: limit(soft.packets, hard.packets),
                bytes: limit(soft.bytes, hard.bytes),
                seconds: limit(soft.seconds, hard.seconds),
            },
        }
    }
}

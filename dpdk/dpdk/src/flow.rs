//! Receive steering of ESP by SPI: one `rte_flow` rule per inbound SA that
//! sends the SA's packets to one RX queue of a port.
//!
//! Why: RSS hashes on addresses and ports, and one tunnel's ESP has the same
//! outer addresses (and, in UDP, the same ports) whatever its SA, so every SA
//! between two gateways lands on one queue, one worker. A NIC whose flow
//! director matches the ESP header (Intel E810, X710 with a DDP profile that
//! defines ESP packet types, NVIDIA ConnectX, ...)
//! can send each SA to a queue of our choosing instead: RFC 9611 per-CPU SAs
//! then arrive at their own workers, and several tunnels between one pair of
//! gateways stop sharing one. A port whose driver has no flow API, or whose
//! flow API does not know the ESP item (every virtual device here: ring,
//! null, af_packet, af_xdp, pcap, memif), refuses the rule; the caller falls
//! back to RSS.
//!
//! The pattern is `ETH / IPV4|IPV6 / [UDP dst=port] / ESP spi=SPI`, the
//! action `QUEUE index`, ingress, group 0, priority 0. Addresses are not
//! matched: the SPI alone names our inbound SA (we chose it), and drivers
//! accept the shorter pattern more often.

use std::ffi::CStr;
use std::ptr::{self, NonNull};
use std::sync::{Arc, Weak};

use dpdk_sys as sys;

use crate::error::{libc_errno, Error, Result};
use crate::port::{Port, PortShared};

/// What one steering rule matches and where it sends it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EspSteer {
    /// IPv6 outer header (else IPv4).
    pub v6: bool,
    /// ESP in UDP (RFC 3948) to this destination port; `None`: IP protocol 50.
    pub udp_dst_port: Option<u16>,
    /// The SPI as it appears on the wire (host order here).
    pub spi: u32,
    /// The RX queue the SA's packets go to.
    pub queue: u16,
}

/// A rule the NIC holds. It is not removed on drop (that needs the port):
/// [`Port::destroy_flow`], or [`Port::flush_flows`] for all of a port's.
/// It remembers which port (this very handle's device, not just its id,
/// which DPDK reuses after a detach) and which flush epoch made it, so a
/// handle whose rule is gone can never reach `rte_flow_destroy`.
#[derive(Debug)]
pub struct Flow {
    /// Keeps the port's shared state's allocation (not the port) alive, so
    /// the pointer comparison in `destroy_flow` cannot meet a new port at
    /// the same address.
    owner: Weak<PortShared>,
    /// The owner's flow epoch when the rule was made.
    epoch: u64,
    raw: NonNull<sys::rte_flow>,
}

// SAFETY: the handle is an opaque pointer the driver owns, only passed back
// to rte_flow_destroy on its own port, under the port's flow lock (which
// also serialises every flow call of espgw's on the port), so any thread
// may hold it.
unsafe impl Send for Flow {}

/// The item and action arrays of one rule, with the specs they point to,
/// kept together so the pointers stay valid for the call.
struct EspPattern {
    udp_spec: sys::rte_flow_item_udp,
    udp_mask: sys::rte_flow_item_udp,
    esp_spec: sys::rte_flow_item_esp,
    esp_mask: sys::rte_flow_item_esp,
    queue: sys::rte_flow_action_queue,
}

impl EspPattern {
    fn new(s: &EspSteer) -> EspPattern {
        let mut p = EspPattern {
            udp_spec: Default::default(),
            udp_mask: Default::default(),
            esp_spec: Default::default(),
            esp_mask: Default::default(),
            queue: sys::rte_flow_action_queue { index: s.queue },
        };
        // The headers' fields are big-endian (rte_be16_t / rte_be32_t).
        if let Some(port) = s.udp_dst_port {
            p.udp_spec.hdr.dst_port = port.to_be();
            p.udp_mask.hdr.dst_port = u16::MAX;
        }
        p.esp_spec.hdr.spi = s.spi.to_be();
        p.esp_mask.hdr.spi = u32::MAX;
        p
    }

    /// The items, END-terminated. Borrowing `self` keeps the specs alive.
    fn items(&self, s: &EspSteer) -> Vec<sys::rte_flow_item> {
        let item =
            |ty: sys::rte_flow_item_type, spec: *const _, mask: *const _| sys::rte_flow_item {
                type_: ty,
                spec,
                last: ptr::null(),
                mask,
            };
        let none = ptr::null::<std::ffi::c_void>();
        let mut items = vec![item(
            sys::rte_flow_item_type_RTE_FLOW_ITEM_TYPE_ETH,
            none,
            none,
        )];
        items.push(if s.v6 {
            item(sys::rte_flow_item_type_RTE_FLOW_ITEM_TYPE_IPV6, none, none)
        } else {
            item(sys::rte_flow_item_type_RTE_FLOW_ITEM_TYPE_IPV4, none, none)
        });
        if s.udp_dst_port.is_some() {
            items.push(item(
                sys::rte_flow_item_type_RTE_FLOW_ITEM_TYPE_UDP,
                (&raw const self.udp_spec).cast(),
                (&raw const self.udp_mask).cast(),
            ));
        }
        items.push(item(
            sys::rte_flow_item_type_RTE_FLOW_ITEM_TYPE_ESP,
            (&raw const self.esp_spec).cast(),
            (&raw const self.esp_mask).cast(),
        ));
        items.push(item(
            sys::rte_flow_item_type_RTE_FLOW_ITEM_TYPE_END,
            none,
            none,
        ));
        items
    }

    fn actions(&self) -> [sys::rte_flow_action; 2] {
        [
            sys::rte_flow_action {
                type_: sys::rte_flow_action_type_RTE_FLOW_ACTION_TYPE_QUEUE,
                conf: (&raw const self.queue).cast(),
            },
            sys::rte_flow_action {
                type_: sys::rte_flow_action_type_RTE_FLOW_ACTION_TYPE_END,
                conf: ptr::null(),
            },
        ]
    }
}

fn ingress() -> sys::rte_flow_attr {
    let mut attr = sys::rte_flow_attr::default();
    attr.set_ingress(1);
    attr
}

/// The error of a failed flow call: the driver's message when it gave one.
/// `errno` is positive.
fn flow_error(what: &str, port: &Port, errno: i32, err: &sys::rte_flow_error) -> Error {
    if errno == 0 {
        // A driver that failed without saying why: refused all the same.
        return Error::new(
            format!("{what}({}): failed without an errno", port.name()),
            libc_errno::EIO,
        );
    }
    let error = Error::new(format!("{what}({})", port.name()), errno);
    if err.message.is_null() {
        return error;
    }
    // SAFETY: a non-null message is a NUL-terminated string the driver set
    // (static or in the port's private data); copied out at once.
    let message = unsafe { CStr::from_ptr(err.message) }.to_string_lossy();
    // The generic "not supported" path repeats errno's text: said once.
    if error.to_string().contains(message.as_ref()) {
        return error;
    }
    Error::new(format!("{what}({}): {message}", port.name()), errno)
}

/// The positive errno of a flow call that returns a negative errno.
fn returned_errno(ret: i32) -> i32 {
    ret.saturating_neg()
}

impl Port {
    /// Runs `call` with the rule's attribute, items and actions (valid for
    /// the call) and an error record for the driver to fill.
    fn with_esp_rule<T>(
        steer: &EspSteer,
        call: impl FnOnce(
            &sys::rte_flow_attr,
            &[sys::rte_flow_item],
            &[sys::rte_flow_action],
            &mut sys::rte_flow_error,
        ) -> T,
    ) -> T {
        let pattern = EspPattern::new(steer);
        let items = pattern.items(steer);
        let actions = pattern.actions();
        let attr = ingress();
        let mut err = sys::rte_flow_error::default();
        call(&attr, &items, &actions, &mut err)
    }

    /// Asks the driver whether it would take `steer` (nothing is installed).
    pub fn validate_esp_steer(&self, steer: &EspSteer) -> Result<()> {
        let _serialised = self.shared().flow_lock();
        Port::with_esp_rule(steer, |attr, items, actions, err| {
            // SAFETY: attr, items and actions (both END-terminated) and the
            // specs they point to live until the call returns; err is ours.
            let ret = unsafe {
                sys::rte_flow_validate(self.id(), attr, items.as_ptr(), actions.as_ptr(), err)
            };
            match ret {
                0 => Ok(()),
                r => Err(flow_error(
                    "rte_flow_validate",
                    self,
                    returned_errno(r),
                    err,
                )),
            }
        })
    }

    /// Installs `steer`; the returned [`Flow`] removes it again
    /// ([`Port::destroy_flow`]).
    pub fn create_esp_steer(&self, steer: &EspSteer) -> Result<Flow> {
        // Held across the call and the epoch read: no flush can fall
        // between them and leave a removed rule with a current epoch.
        let epoch = self.shared().flow_lock();
        Port::with_esp_rule(steer, |attr, items, actions, err| {
            // SAFETY: as in validate_esp_steer; the driver copies what it keeps.
            let raw = unsafe {
                sys::rte_flow_create(self.id(), attr, items.as_ptr(), actions.as_ptr(), err)
            };
            match NonNull::new(raw) {
                Some(raw) => Ok(Flow {
                    owner: Arc::downgrade(self.shared()),
                    epoch: *epoch,
                    raw,
                }),
                None => {
                    // rte_flow_create returns NULL and sets rte_errno.
                    // SAFETY: reads the calling thread's rte_errno.
                    let errno = unsafe { sys::shim_rte_errno() };
                    Err(flow_error("rte_flow_create", self, errno, err))
                }
            }
        })
    }

    /// Removes a rule this port installed. A rule of another port, or one a
    /// [`Port::flush_flows`] already removed, is refused (EINVAL) without
    /// calling DPDK.
    pub fn destroy_flow(&self, flow: Flow) -> Result<()> {
        if flow.owner.as_ptr() != Arc::as_ptr(self.shared()) {
            return Err(Error::invalid(format!(
                "rte_flow_destroy({}): the rule belongs to another port",
                self.name()
            )));
        }
        // Held across the check and the call: no flush can fall between.
        let epoch = self.shared().flow_lock();
        if flow.epoch != *epoch {
            return Err(Error::invalid(format!(
                "rte_flow_destroy({}): the rule may be gone (flushed, or the port stopped \
                 or reconfigured since)",
                self.name()
            )));
        }
        let mut err = sys::rte_flow_error::default();
        // SAFETY: `flow` came from rte_flow_create on this very port (same
        // shared state) since its last flush, and is consumed here, so it
        // is destroyed at most once.
        let ret = unsafe { sys::rte_flow_destroy(self.id(), flow.raw.as_ptr(), &mut err) };
        match ret {
            0 => Ok(()),
            r => Err(flow_error(
                "rte_flow_destroy",
                self,
                returned_errno(r),
                &err,
            )),
        }
    }

    /// Removes every rule of the port (before it stops). The [`Flow`]s made
    /// before are spent: `destroy_flow` refuses them.
    pub fn flush_flows(&self) -> Result<()> {
        let mut err = sys::rte_flow_error::default();
        // Spent even if the flush fails half-way: a handle that might name
        // a freed rule must not reach rte_flow_destroy. Held across the call.
        let mut epoch = self.shared().flow_lock();
        *epoch += 1;
        // SAFETY: a port id we own; err is ours to fill.
        let ret = unsafe { sys::rte_flow_flush(self.id(), &mut err) };
        match ret {
            0 => Ok(()),
            r => Err(flow_error("rte_flow_flush", self, returned_errno(r), &err)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn types(items: &[sys::rte_flow_item]) -> Vec<sys::rte_flow_item_type> {
        items.iter().map(|i| i.type_).collect()
    }

    #[test]
    fn esp_over_ipv4_pattern_matches_the_spi_in_network_order() {
        let s = EspSteer {
            v6: false,
            udp_dst_port: None,
            spi: 0x0102_0304,
            queue: 3,
        };
        let p = EspPattern::new(&s);
        let items = p.items(&s);
        assert_eq!(
            types(&items),
            [
                sys::rte_flow_item_type_RTE_FLOW_ITEM_TYPE_ETH,
                sys::rte_flow_item_type_RTE_FLOW_ITEM_TYPE_IPV4,
                sys::rte_flow_item_type_RTE_FLOW_ITEM_TYPE_ESP,
                sys::rte_flow_item_type_RTE_FLOW_ITEM_TYPE_END,
            ]
        );
        // The spec's SPI bytes are the wire's.
        let esp = items[2].spec.cast::<sys::rte_flow_item_esp>();
        // SAFETY: items[2] points into `p`, alive here.
        let spi = unsafe { (*esp).hdr.spi };
        assert_eq!(spi.to_ne_bytes(), [1, 2, 3, 4]);
        let actions = p.actions();
        assert_eq!(
            actions[0].type_,
            sys::rte_flow_action_type_RTE_FLOW_ACTION_TYPE_QUEUE
        );
        // SAFETY: points at p.queue.
        let q = unsafe { (*actions[0].conf.cast::<sys::rte_flow_action_queue>()).index };
        assert_eq!(q, 3);
        assert_eq!(
            actions[1].type_,
            sys::rte_flow_action_type_RTE_FLOW_ACTION_TYPE_END
        );
    }

    #[test]
    fn esp_in_udp_over_ipv6_pattern_has_the_port() {
        let s = EspSteer {
            v6: true,
            udp_dst_port: Some(4500),
            spi: 7,
            queue: 0,
        };
        let p = EspPattern::new(&s);
        let items = p.items(&s);
        assert_eq!(
            types(&items),
            [
                sys::rte_flow_item_type_RTE_FLOW_ITEM_TYPE_ETH,
                sys::rte_flow_item_type_RTE_FLOW_ITEM_TYPE_IPV6,
                sys::rte_flow_item_type_RTE_FLOW_ITEM_TYPE_UDP,
                sys::rte_flow_item_type_RTE_FLOW_ITEM_TYPE_ESP,
                sys::rte_flow_item_type_RTE_FLOW_ITEM_TYPE_END,
            ]
        );
        // SAFETY: items[2] points into `p`, alive here.
        let (port, mask) = unsafe {
            let spec = &*items[2].spec.cast::<sys::rte_flow_item_udp>();
            let mask = &*items[2].mask.cast::<sys::rte_flow_item_udp>();
            (spec.hdr.dst_port, mask.hdr.dst_port)
        };
        assert_eq!(port.to_ne_bytes(), 4500u16.to_be_bytes());
        assert_eq!(mask, u16::MAX);
        // The source port is not matched (a NAT may rewrite it).
        // SAFETY: as above.
        let src_mask = unsafe {
            (*items[2].mask.cast::<sys::rte_flow_item_udp>())
                .hdr
                .src_port
        };
        assert_eq!(src_mask, 0);
    }
}

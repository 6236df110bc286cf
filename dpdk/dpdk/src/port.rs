//! Ethernet ports: attach by device string, configure queues/RSS/MTU,
//! start/stop, link, MAC, stats; per-queue RX/TX handles for the workers.
//!
//! Ownership model: a [`Port`] is the control-plane handle (configure, start,
//! stop, stats). Each RX and TX queue is polled through its own handle,
//! [`RxQueue`] / [`TxQueue`], that can exist at most once per queue, so two
//! threads can never poll the same queue (DPDK queues are not thread-safe).
//! Reconfiguring, starting or stopping needs every queue handle back
//! (`EBUSY` otherwise), because DPDK forbids those while a queue is polled.

use std::ffi::{CStr, CString};
use std::sync::{Arc, Mutex, MutexGuard};

use dpdk_sys as sys;

use crate::burst::Burst;
use crate::eal::{ensure_running, LiveGuard};
use crate::error::{libc_errno, Error, Result};
use crate::mempool::{Mempool, MBUF_HEADROOM};

pub mod af_packet;
use af_packet::AfPacketFrames;

/// Ethernet header + two VLAN tags + FCS on top of the MTU.
const L2_OVERHEAD: u32 = 14 + 8 + 4;

/// RSS over IPv4/IPv6 addresses and UDP/TCP ports: spreads ESP (by IP) and
/// UDP-encapsulated ESP (by port) flows over the RX queues; and, where the
/// driver offers it (`RTE_ETH_RSS_ESP` in its flow_type_rss_offloads: in
/// DPDK 22.11's sources mlx5 and dpaa2; not ixgbe, i40e, ice or iavf, which
/// hash the SPI only through rte_flow RSS actions), the ESP header's SPI
/// too, so the SAs between one pair of gateways (RFC 9611 per-CPU SAs,
/// several tunnels) spread like separate flows. Masked with what the
/// device supports.
pub(crate) const WANTED_RSS: u64 = sys::RTE_ETH_RSS_IP as u64
    | sys::RTE_ETH_RSS_UDP as u64
    | sys::RTE_ETH_RSS_TCP as u64
    | sys::RTE_ETH_RSS_ESP as u64;

/// The kinds of [`WANTED_RSS`] that `hf` hashes (any flow type of a kind
/// counts), in words.
pub(crate) fn rss_names(hf: u64) -> String {
    let kinds = [
        ("ip", sys::RTE_ETH_RSS_IP as u64),
        ("udp", sys::RTE_ETH_RSS_UDP as u64),
        ("tcp", sys::RTE_ETH_RSS_TCP as u64),
        ("esp", sys::RTE_ETH_RSS_ESP as u64),
    ];
    let names: Vec<&str> = kinds
        .iter()
        .filter(|(_, bits)| hf & bits != 0)
        .map(|(name, _)| *name)
        .collect();
    if names.is_empty() {
        "off".into()
    } else {
        names.join(", ")
    }
}

/// How to set up a port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortConfig {
    /// RX queues (one per worker that polls this port).
    pub rx_queues: u16,
    /// TX queues (one per worker that sends on this port).
    pub tx_queues: u16,
    /// RX descriptors per queue (DPDK rounds to what the device accepts).
    pub rx_descriptors: u16,
    /// TX descriptors per queue (likewise).
    pub tx_descriptors: u16,
    /// L3 MTU, up to 9000 where the device allows; the RX mempool's data room
    /// must hold a whole frame ([`Mempool::data_room_for_mtu`]).
    pub mtu: u16,
    /// Spread RX over the queues by IP/UDP/TCP hash when the device supports
    /// it (masked with what it supports; ignored for a single RX queue).
    pub rss: bool,
    /// Receive frames for every destination MAC.
    pub promiscuous: bool,
    /// Let the device compute UDP checksums on transmit
    /// (RTE_ETH_TX_OFFLOAD_UDP_CKSUM) when it offers to; see
    /// [`Port::tx_udp_checksum`] for whether it did.
    pub tx_udp_checksum: bool,
}

impl Default for PortConfig {
    fn default() -> Self {
        PortConfig {
            rx_queues: 1,
            tx_queues: 1,
            rx_descriptors: 1024,
            tx_descriptors: 1024,
            mtu: 1500,
            rss: true,
            promiscuous: true,
            tx_udp_checksum: false,
        }
    }
}

/// What the device reports about itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortInfo {
    pub driver: String,
    pub max_rx_queues: u16,
    pub max_tx_queues: u16,
    pub min_mtu: u16,
    pub max_mtu: u16,
    pub max_rx_pktlen: u32,
    /// RTE_ETH_RSS_* flow types the device can hash.
    pub rss_offloads: u64,
    /// RTE_ETH_RX_OFFLOAD_* capabilities.
    pub rx_offloads: u64,
    /// RTE_ETH_TX_OFFLOAD_* capabilities.
    pub tx_offloads: u64,
    /// NUMA socket of the device, or -1 when unknown (virtual devices).
    pub socket: i32,
}

/// Link state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Link {
    pub up: bool,
    /// Speed in Mbit/s (0 when unknown).
    pub speed_mbps: u32,
    pub full_duplex: bool,
}

/// Basic port counters (`rte_eth_stats`, totals only).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PortStats {
    pub rx_packets: u64,
    pub tx_packets: u64,
    pub rx_bytes: u64,
    pub tx_bytes: u64,
    /// Dropped by the device because the RX queues were full.
    pub rx_missed: u64,
    pub rx_errors: u64,
    pub tx_errors: u64,
    /// RX mbuf allocation failures (mempool too small or exhausted).
    pub rx_nombuf: u64,
}

/// The port id of an attached device by its name (`net_ring0`,
/// `0000:01:00.0`), or `None` if no such port exists.
pub fn port_id_by_name(name: &str) -> Option<u16> {
    if !crate::eal::running() {
        return None;
    }
    let c_name = CString::new(name).ok()?;
    let mut id = 0u16;
    // SAFETY: the EAL is running; c_name is a valid C string and id a valid out pointer.
    let ret = unsafe { sys::rte_eth_dev_get_port_by_name(c_name.as_ptr(), &mut id) };
    (ret == 0).then_some(id)
}

/// Number of attached Ethernet ports.
pub fn port_count() -> u16 {
    if !crate::eal::running() {
        return 0;
    }
    // SAFETY: the EAL is running; a plain query.
    unsafe { sys::rte_eth_dev_count_avail() }
}

/// An Ethernet port (control-plane handle).
#[derive(Debug)]
pub struct Port {
    shared: Arc<PortShared>,
}

#[derive(Debug)]
pub(crate) struct PortShared {
    id: u16,
    name: String,
    /// The device string given to [`Port::open`], for the driver arguments
    /// when DPDK's own copy cannot be read.
    device: String,
    /// We attached the device with rte_dev_probe (not an EAL argument).
    hotplugged: bool,
    state: Mutex<PortState>,
    /// The flow calls' lock and epoch: every rte_flow call on the port runs
    /// under it, and the epoch counts what may have removed every rule
    /// (`rte_flow_flush`, a stop, a configure): a [`crate::flow::Flow`] made
    /// in an older epoch names a rule that may be gone (crate::flow).
    pub(crate) flow_epoch: Mutex<u64>,
    _live: LiveGuard,
}

#[derive(Debug, Default)]
struct PortState {
    started: bool,
    rx_taken: Vec<bool>,
    tx_taken: Vec<bool>,
    /// The RX queues' pool: kept alive while the device may write into it.
    rx_pool: Option<Mempool>,
    /// RTE_ETH_RSS_* flow types hashed (0: RSS off).
    rss_hf: u64,
    /// The MTU the port carries since the last configure (may exceed what
    /// DPDK was told, see [`Port::mtu`]); 0 before.
    mtu: u16,
    /// Why DPDK was configured with a smaller MTU than asked, if it was.
    mtu_note: Option<String>,
    /// TX UDP checksum offload enabled at the last configure.
    tx_udp_checksum: bool,
}

impl PortState {
    fn queues_out(&self) -> bool {
        self.rx_taken.iter().chain(&self.tx_taken).any(|&t| t)
    }
}

impl Port {
    /// Opens the port for a DPDK device string: a PCI address
    /// (`0000:01:00.0`) or a vdev with its arguments (`net_ring0`,
    /// `net_pcap0,rx_pcap=a.pcap,tx_pcap=b.pcap`, `net_af_packet0,iface=veth0`).
    ///
    /// A device already attached (e.g. by an EAL `--vdev` or `-a` argument) is
    /// used as is; otherwise it is hot-plugged with `rte_dev_probe`. Either
    /// way, dropping the port (and its queue handles) stops it and detaches
    /// the device, so opening the same string again attaches it afresh.
    pub fn open(device: &str) -> Result<Port> {
        ensure_running("Port::open")?;
        let name = device.split(',').next().unwrap_or(device).trim();
        if name.is_empty() {
            return Err(Error::invalid(format!(
                "device string {device:?} has no name"
            )));
        }
        // Held across the lookup and attach so two opens cannot race, and so
        // one port never has two Port objects (two owners of one queue).
        let mut open_ports = lock_open_ports();
        let (id, hotplugged) = match find_port(name) {
            Some(id) => (id, false),
            None => {
                let c_dev = CString::new(device).map_err(|_| {
                    Error::invalid(format!("device string {device:?} contains NUL"))
                })?;
                // SAFETY: the EAL is running and c_dev is a valid C string;
                // DPDK copies what it keeps.
                let ret = unsafe { sys::rte_dev_probe(c_dev.as_ptr()) };
                Error::check(ret, || format!("rte_dev_probe({device})"))?;
                let id = find_port(name).ok_or_else(|| {
                    Error::new(
                        format!("device {device} attached but no Ethernet port is named {name}"),
                        libc_errno::ENOENT,
                    )
                })?;
                (id, true)
            }
        };
        if open_ports.contains(&id) {
            return Err(Error::new(
                format!("{name}: port {id} is already open"),
                libc_errno::EBUSY,
            ));
        }
        open_ports.push(id);
        Ok(Port {
            shared: Arc::new(PortShared {
                id,
                name: name.to_string(),
                device: device.to_string(),
                hotplugged,
                state: Mutex::new(PortState::default()),
                flow_epoch: Mutex::new(0),
                _live: LiveGuard::new(),
            }),
        })
    }

    /// The shared state behind this handle (for crate::flow's checks).
    pub(crate) fn shared(&self) -> &Arc<PortShared> {
        &self.shared
    }

    /// The DPDK port id.
    pub fn id(&self) -> u16 {
        self.shared.id
    }

    /// The device name (the device string up to the first comma).
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// True when [`Port::open`] attached the device itself (it was not
    /// already attached by an EAL argument).
    pub fn attached_by_open(&self) -> bool {
        self.shared.hotplugged
    }

    fn state(&self) -> MutexGuard<'_, PortState> {
        lock(&self.shared.state)
    }

    /// Device capabilities.
    pub fn info(&self) -> Result<PortInfo> {
        let raw = self.raw_info()?;
        let driver = driver_name(&raw);
        // SAFETY: the port id is valid (we hold the port); a plain query.
        let socket = unsafe { sys::rte_eth_dev_socket_id(self.id()) };
        Ok(PortInfo {
            driver,
            max_rx_queues: raw.max_rx_queues,
            max_tx_queues: raw.max_tx_queues,
            min_mtu: raw.min_mtu,
            max_mtu: raw.max_mtu,
            max_rx_pktlen: raw.max_rx_pktlen,
            rss_offloads: raw.flow_type_rss_offloads,
            rx_offloads: raw.rx_offload_capa,
            tx_offloads: raw.tx_offload_capa,
            socket,
        })
    }

    fn raw_info(&self) -> Result<sys::rte_eth_dev_info> {
        // SAFETY: rte_eth_dev_info is plain integers and pointers; all-zero is valid.
        let mut raw: sys::rte_eth_dev_info = unsafe { std::mem::zeroed() };
        // SAFETY: valid port id and out pointer.
        let ret = unsafe { sys::rte_eth_dev_info_get(self.id(), &mut raw) };
        Error::check(ret, || format!("rte_eth_dev_info_get({})", self.name()))?;
        Ok(raw)
    }

    /// Configures queues, RSS, MTU and promiscuous mode; RX queues take
    /// their mbufs from `rx_pool`. The port must be stopped with every queue
    /// handle returned.
    pub fn configure(&mut self, cfg: &PortConfig, rx_pool: &Mempool) -> Result<()> {
        let mut state = self.state();
        if state.started || state.queues_out() {
            return Err(self.busy("configure"));
        }
        // A reconfigured port may have dropped its flow rules.
        self.shared.new_flow_epoch();
        let info = self.raw_info()?;
        if cfg.rx_queues == 0 || cfg.tx_queues == 0 {
            return Err(Error::invalid(format!(
                "{}: need at least one RX and one TX queue",
                self.name()
            )));
        }
        if cfg.rx_queues > info.max_rx_queues || cfg.tx_queues > info.max_tx_queues {
            return Err(Error::invalid(format!(
                "{}: {} RX / {} TX queues requested, device allows {} / {}",
                self.name(),
                cfg.rx_queues,
                cfg.tx_queues,
                info.max_rx_queues,
                info.max_tx_queues
            )));
        }
        let device_max = configurable_max_mtu(info.max_mtu, info.max_rx_pktlen);
        let af_packet = driver_name(&info) == "net_af_packet";
        let mut dpdk_mtu = cfg.mtu;
        let mut mtu_note = None;
        if cfg.mtu < info.min_mtu || (cfg.mtu > device_max && !af_packet) {
            return Err(Error::invalid(format!(
                "{}: MTU {} outside the device's range {}..={}",
                self.name(),
                cfg.mtu,
                info.min_mtu,
                device_max
            )));
        }
        if af_packet {
            let frames = AfPacketFrames::from_devargs(&self.driver_args(&info));
            self.check_af_packet_ring(cfg.mtu, frames, rx_pool)?;
            if cfg.mtu > device_max {
                // DPDK would refuse the MTU although the ring carries it:
                // tell DPDK the most it accepts; the application enforces
                // the real MTU itself.
                dpdk_mtu = device_max;
                mtu_note = Some(format!(
                    "{}: net_af_packet advertises max frame {}; frames up to MTU {} are carried \
                     via framesz={}, MTU enforced by espgw",
                    self.name(),
                    info.max_rx_pktlen,
                    cfg.mtu,
                    frames.frame_size()
                ));
            }
        }
        let frame = u32::from(cfg.mtu) + L2_OVERHEAD;
        let room = u32::from(rx_pool.data_room()) - u32::from(MBUF_HEADROOM);
        if frame > room {
            return Err(Error::invalid(format!(
                "{}: MTU {} needs mbufs with data room >= {} (pool has {})",
                self.name(),
                cfg.mtu,
                Mempool::data_room_for_mtu(cfg.mtu),
                rx_pool.data_room()
            )));
        }

        // SAFETY: rte_eth_conf is plain integers and pointers; all-zero is
        // DPDK's documented "defaults" value.
        let mut conf: sys::rte_eth_conf = unsafe { std::mem::zeroed() };
        conf.rxmode.mtu = u32::from(dpdk_mtu);
        let mut rss_hf = WANTED_RSS & info.flow_type_rss_offloads;
        if !(cfg.rss && cfg.rx_queues > 1) {
            rss_hf = 0;
        }
        if rss_hf != 0 {
            conf.rxmode.mq_mode = sys::rte_eth_rx_mq_mode_RTE_ETH_MQ_RX_RSS;
            conf.rx_adv_conf.rss_conf.rss_hf = rss_hf; // NULL key: the driver's default
            let hash_offload = sys::RTE_ETH_RX_OFFLOAD_RSS_HASH as u64;
            if info.rx_offload_capa & hash_offload != 0 {
                conf.rxmode.offloads |= hash_offload;
            }
        }
        // Port-wide, so every TX queue has it (rte_eth_tx_queue_setup adds
        // the port's offloads to each queue's).
        let udp_csum = sys::RTE_ETH_TX_OFFLOAD_UDP_CKSUM as u64;
        let tx_udp_checksum = cfg.tx_udp_checksum && info.tx_offload_capa & udp_csum != 0;
        if tx_udp_checksum {
            conf.txmode.offloads |= udp_csum;
        }
        // SAFETY: valid port id, stopped (checked above), conf outlives the call.
        let ret =
            unsafe { sys::rte_eth_dev_configure(self.id(), cfg.rx_queues, cfg.tx_queues, &conf) };
        Error::check(ret, || format!("rte_eth_dev_configure({})", self.name()))?;

        let (mut nb_rx, mut nb_tx) = (cfg.rx_descriptors, cfg.tx_descriptors);
        // SAFETY: valid port id and out pointers.
        let ret =
            unsafe { sys::rte_eth_dev_adjust_nb_rx_tx_desc(self.id(), &mut nb_rx, &mut nb_tx) };
        Error::check(ret, || {
            format!("rte_eth_dev_adjust_nb_rx_tx_desc({})", self.name())
        })?;
        // SAFETY: valid port id; -1 (unknown) wraps to SOCKET_ID_ANY as DPDK expects.
        let socket = unsafe { sys::rte_eth_dev_socket_id(self.id()) } as u32;
        for q in 0..cfg.rx_queues {
            // SAFETY: configured port, q < nb_rx_queues, NULL rxconf = the
            // device default; the pool outlives the queue (kept in state).
            let ret = unsafe {
                sys::rte_eth_rx_queue_setup(
                    self.id(),
                    q,
                    nb_rx,
                    socket,
                    std::ptr::null(),
                    rx_pool.as_ptr(),
                )
            };
            Error::check(ret, || {
                format!("rte_eth_rx_queue_setup({}, queue {q})", self.name())
            })?;
        }
        for q in 0..cfg.tx_queues {
            // SAFETY: configured port, q < nb_tx_queues, NULL txconf = the device default.
            let ret = unsafe {
                sys::rte_eth_tx_queue_setup(self.id(), q, nb_tx, socket, std::ptr::null())
            };
            Error::check(ret, || {
                format!("rte_eth_tx_queue_setup({}, queue {q})", self.name())
            })?;
        }
        state.rx_taken = vec![false; usize::from(cfg.rx_queues)];
        state.tx_taken = vec![false; usize::from(cfg.tx_queues)];
        state.rx_pool = Some(rx_pool.clone());
        state.rss_hf = rss_hf;
        state.tx_udp_checksum = tx_udp_checksum;
        state.mtu = cfg.mtu;
        state.mtu_note = mtu_note;
        drop(state);
        self.set_promiscuous(cfg.promiscuous)
    }

    /// The MTU the port carries since the last [`Port::configure`] (0
    /// before): the configured one, also where DPDK was told less because
    /// the driver under-reports what it carries (see [`Port::mtu_note`]).
    pub fn mtu(&self) -> u16 {
        self.state().mtu
    }

    /// Set by [`Port::configure`] when the device was configured below the
    /// requested MTU because its driver advertises less than it carries
    /// (net_af_packet with a large `framesz`): one line for the log.
    pub fn mtu_note(&self) -> Option<String> {
        self.state().mtu_note.clone()
    }

    /// Whether the last [`Port::configure`] turned on TX UDP checksum
    /// offload (asked for, and offered by the device): only then may a
    /// packet sent on it ask for one ([`Mbuf`]'s
    /// `PacketBuf::offload_udp_checksum`).
    pub fn tx_udp_checksum(&self) -> bool {
        self.state().tx_udp_checksum
    }

    /// The driver arguments DPDK holds for the device (`iface=...,framesz=...`),
    /// or those of the device string given to [`Port::open`] when DPDK's
    /// cannot be read.
    fn driver_args(&self, info: &sys::rte_eth_dev_info) -> String {
        devargs::driver_args(info.device, self.name()).unwrap_or_else(|| {
            let dev = &self.shared.device;
            dev.split_once(',').map_or("", |(_, args)| args).to_string()
        })
    }

    /// An af_packet ring must hold a frame of `mtu` both ways, and the RX
    /// mbufs must be as large as the PMD's `rx_queue_setup` demands (it
    /// would fail with a bare ENOMEM otherwise).
    fn check_af_packet_ring(&self, mtu: u16, frames: AfPacketFrames, pool: &Mempool) -> Result<()> {
        if frames.max_mtu() < u32::from(mtu) {
            let (framesz, blocksz) = AfPacketFrames::suggested_for_mtu(mtu);
            return Err(Error::invalid(format!(
                "{}: MTU {mtu} does not fit af_packet ring frames of {} bytes (framesz; \
                 at least {} needed): add framesz={framesz},blocksz={blocksz} to the device \
                 string (blocksz: a multiple of the page size, >= framesz)",
                self.name(),
                frames.frame_size(),
                AfPacketFrames::min_frame_size_for_mtu(mtu),
            )));
        }
        let room = u32::from(pool.data_room()).saturating_sub(u32::from(MBUF_HEADROOM));
        if room < frames.rx_buffer_needed() {
            return Err(Error::invalid(format!(
                "{}: af_packet framesz={} needs mbufs with data room >= {} (pool has {})",
                self.name(),
                frames.frame_size(),
                frames.rx_buffer_needed() + u32::from(MBUF_HEADROOM),
                pool.data_room()
            )));
        }
        Ok(())
    }

    /// Starts the port (after [`Port::configure`]).
    pub fn start(&mut self) -> Result<()> {
        let mut state = self.state();
        if state.queues_out() {
            return Err(self.busy("start"));
        }
        if state.rx_pool.is_none() {
            return Err(Error::invalid(format!(
                "{}: start before configure",
                self.name()
            )));
        }
        // SAFETY: configured port, no queue is being polled (no handle out).
        let ret = unsafe { sys::rte_eth_dev_start(self.id()) };
        Error::check(ret, || format!("rte_eth_dev_start({})", self.name()))?;
        state.started = true;
        Ok(())
    }

    /// Stops the port; every queue handle must have been dropped.
    pub fn stop(&mut self) -> Result<()> {
        let mut state = self.state();
        if state.queues_out() {
            return Err(self.busy("stop"));
        }
        if state.started {
            // Whether rules outlive a stop is the driver's choice
            // (RTE_ETH_DEV_CAPA_FLOW_RULE_KEEP): take them as gone.
            self.shared.new_flow_epoch();
            // SAFETY: valid port, no queue is being polled.
            let ret = unsafe { sys::rte_eth_dev_stop(self.id()) };
            Error::check(ret, || format!("rte_eth_dev_stop({})", self.name()))?;
            state.started = false;
        }
        Ok(())
    }

    /// The RTE_ETH_RSS_* flow types RX is spread by since the last
    /// [`Port::configure`]; 0 when RSS is off (one RX queue, not asked for,
    /// or not supported by the device).
    pub fn rss_flow_types(&self) -> u64 {
        self.state().rss_hf
    }

    /// [`Port::rss_flow_types`] in words, for the start-up log: which of
    /// the kinds espgw asks for the device hashes (`"ip, udp, tcp, esp"`),
    /// or `"off"`.
    pub fn rss_summary(&self) -> String {
        rss_names(self.rss_flow_types())
    }

    /// True between [`Port::start`] and [`Port::stop`].
    pub fn is_started(&self) -> bool {
        self.state().started
    }

    fn busy(&self, what: &str) -> Error {
        Error::new(
            format!(
                "{}: cannot {what} while queue handles are out or the port runs",
                self.name()
            ),
            libc_errno::EBUSY,
        )
    }

    /// Takes the handle for RX queue `queue`; fails with EBUSY if it is
    /// already out, EINVAL if the port has no such queue.
    pub fn rx_queue(&self, queue: u16) -> Result<RxQueue> {
        take_queue(&self.shared, queue, true)?;
        Ok(RxQueue {
            port: self.id(),
            queue,
            shared: Arc::clone(&self.shared),
            _not_sync: std::marker::PhantomData,
        })
    }

    /// Takes the handle for TX queue `queue` (see [`Port::rx_queue`]).
    pub fn tx_queue(&self, queue: u16) -> Result<TxQueue> {
        take_queue(&self.shared, queue, false)?;
        Ok(TxQueue {
            port: self.id(),
            queue,
            shared: Arc::clone(&self.shared),
            _not_sync: std::marker::PhantomData,
        })
    }

    /// Turns promiscuous mode on or off (drivers that do not support it,
    /// e.g. ring ports, are left as they are).
    pub fn set_promiscuous(&self, on: bool) -> Result<()> {
        // SAFETY: valid port id; a control call.
        let ret = unsafe {
            if on {
                sys::rte_eth_promiscuous_enable(self.id())
            } else {
                sys::rte_eth_promiscuous_disable(self.id())
            }
        };
        if ret == -95 {
            // ENOTSUP: the device always receives everything or has no such mode.
            return Ok(());
        }
        Error::check(ret, || {
            format!(
                "rte_eth_promiscuous_{}({})",
                if on { "enable" } else { "disable" },
                self.name()
            )
        })
        .map(|_| ())
    }

    /// The port's MAC address.
    pub fn mac(&self) -> Result<[u8; 6]> {
        let mut addr = sys::rte_ether_addr::default();
        // SAFETY: valid port id and out pointer.
        let ret = unsafe { sys::rte_eth_macaddr_get(self.id(), &mut addr) };
        Error::check(ret, || format!("rte_eth_macaddr_get({})", self.name()))?;
        Ok(addr.addr_bytes)
    }

    /// The link state, without waiting for auto-negotiation.
    pub fn link(&self) -> Result<Link> {
        let mut link = sys::rte_eth_link::default();
        // SAFETY: valid port id and out pointer.
        let ret = unsafe { sys::rte_eth_link_get_nowait(self.id(), &mut link) };
        Error::check(ret, || format!("rte_eth_link_get_nowait({})", self.name()))?;
        Ok(Link {
            up: u32::from(link.link_status()) == sys::RTE_ETH_LINK_UP,
            speed_mbps: link.link_speed,
            full_duplex: u32::from(link.link_duplex()) == sys::RTE_ETH_LINK_FULL_DUPLEX,
        })
    }

    /// Polls the link every 100 ms until it is up or `timeout` passes;
    /// returns the last state seen (check `up`).
    pub fn wait_for_link(&self, timeout: std::time::Duration) -> Result<Link> {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            let link = self.link()?;
            if link.up || std::time::Instant::now() >= deadline {
                return Ok(link);
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }

    /// Basic counters.
    pub fn stats(&self) -> Result<PortStats> {
        let mut s = sys::rte_eth_stats::default();
        // SAFETY: valid port id and out pointer; safe alongside the data path.
        let ret = unsafe { sys::rte_eth_stats_get(self.id(), &mut s) };
        Error::check(ret, || format!("rte_eth_stats_get({})", self.name()))?;
        Ok(PortStats {
            rx_packets: s.ipackets,
            tx_packets: s.opackets,
            rx_bytes: s.ibytes,
            tx_bytes: s.obytes,
            rx_missed: s.imissed,
            rx_errors: s.ierrors,
            tx_errors: s.oerrors,
            rx_nombuf: s.rx_nombuf,
        })
    }

    /// Zeroes the basic counters (and the xstats of most drivers).
    pub fn reset_stats(&self) -> Result<()> {
        // SAFETY: valid port id.
        let ret = unsafe { sys::rte_eth_stats_reset(self.id()) };
        Error::check(ret, || format!("rte_eth_stats_reset({})", self.name())).map(|_| ())
    }

    /// Every extended statistic, as (name, value). Allocates: control path only.
    pub fn xstats(&self) -> Result<Vec<(String, u64)>> {
        let id = self.id();
        // SAFETY: valid port id; NULL/0 asks for the count.
        let n = unsafe { sys::rte_eth_xstats_get_names(id, std::ptr::null_mut(), 0) };
        let n = Error::check(n, || format!("rte_eth_xstats_get_names({})", self.name()))? as usize;
        let mut names = vec![sys::rte_eth_xstat_name { name: [0; 64] }; n];
        let mut values = vec![sys::rte_eth_xstat::default(); n];
        // SAFETY: names has room for n entries.
        let got = unsafe { sys::rte_eth_xstats_get_names(id, names.as_mut_ptr(), n as u32) };
        let got_names =
            Error::check(got, || format!("rte_eth_xstats_get_names({})", self.name()))? as usize;
        // SAFETY: values has room for n entries.
        let got = unsafe { sys::rte_eth_xstats_get(id, values.as_mut_ptr(), n as u32) };
        let got_values =
            Error::check(got, || format!("rte_eth_xstats_get({})", self.name()))? as usize;
        let count = n.min(got_names).min(got_values);
        Ok(values[..count]
            .iter()
            .filter_map(|v| {
                let name = names.get(v.id as usize)?;
                // SAFETY: DPDK NUL-terminates names within the 64-byte array
                // (snprintf); the array is ours.
                let text = unsafe { CStr::from_ptr(name.name.as_ptr()) };
                Some((text.to_string_lossy().into_owned(), v.value))
            })
            .collect())
    }

    /// One extended statistic by name (e.g. `rx_good_packets`).
    pub fn xstat(&self, name: &str) -> Result<u64> {
        let c_name = CString::new(name).map_err(|_| Error::invalid("xstat name contains NUL"))?;
        let mut xid = 0u64;
        // SAFETY: valid port id, C string and out pointer.
        let ret =
            unsafe { sys::rte_eth_xstats_get_id_by_name(self.id(), c_name.as_ptr(), &mut xid) };
        Error::check(ret, || {
            format!("rte_eth_xstats_get_id_by_name({}, {name})", self.name())
        })?;
        let mut value = 0u64;
        // SAFETY: one id in, room for one value out.
        let ret = unsafe { sys::rte_eth_xstats_get_by_id(self.id(), &xid, &mut value, 1) };
        Error::check(ret, || {
            format!("rte_eth_xstats_get_by_id({}, {name})", self.name())
        })?;
        Ok(value)
    }
}

/// The driver's name (`net_af_packet`, `net_ixgbe`, ...), empty if unknown.
fn driver_name(info: &sys::rte_eth_dev_info) -> String {
    if info.driver_name.is_null() {
        return String::new();
    }
    // SAFETY: driver_name is a static NUL-terminated string owned by the driver.
    unsafe { CStr::from_ptr(info.driver_name) }
        .to_string_lossy()
        .into_owned()
}

/// The largest MTU `rte_eth_dev_configure` accepts, worked out as DPDK
/// 22.11 does (eth_dev_validate_mtu): the frame overhead is
/// `max_rx_pktlen - max_mtu` when the driver reports a real max_mtu, else
/// Ethernet header + CRC; the MTU plus that must fit `max_rx_pktlen`.
pub fn configurable_max_mtu(max_mtu: u16, max_rx_pktlen: u32) -> u16 {
    const ETHER_HDR_AND_CRC: u32 = 14 + 4;
    let overhead = if max_mtu != u16::MAX && max_rx_pktlen > u32::from(max_mtu) {
        max_rx_pktlen - u32::from(max_mtu)
    } else {
        ETHER_HDR_AND_CRC
    };
    let by_frame = max_rx_pktlen.saturating_sub(overhead);
    u16::try_from(by_frame).unwrap_or(u16::MAX).min(max_mtu)
}

/// Reads DPDK's copy of a device's driver arguments (through the C shim,
/// which knows `struct rte_devargs`); the name read back must match the
/// port's.
mod devargs {
    use std::ffi::{c_char, CStr};

    use dpdk_sys as sys;

    /// The driver arguments of `device` (from rte_eth_dev_info), if DPDK
    /// has them and they belong to the device named `name`.
    pub(super) fn driver_args(device: *mut sys::rte_device, name: &str) -> Option<String> {
        if device.is_null() {
            return None;
        }
        let mut dev_name: *const c_char = std::ptr::null();
        // SAFETY: device comes from rte_eth_dev_info_get of a port we hold;
        // the shim only reads its devargs and stores a pointer in dev_name.
        let args = unsafe { sys::shim_rte_dev_args(device, &mut dev_name) };
        if args.is_null() || dev_name.is_null() {
            return None;
        }
        // SAFETY: both point to NUL-terminated strings owned by the
        // device's devargs, alive as long as the device.
        let (got, args) = unsafe { (CStr::from_ptr(dev_name), CStr::from_ptr(args)) };
        if got.to_bytes() != name.as_bytes() {
            return None;
        }
        Some(args.to_string_lossy().into_owned())
    }
}

fn find_port(name: &str) -> Option<u16> {
    port_id_by_name(name).or_else(|| {
        // DPDK names PCI ports with the domain: accept "01:00.0" for "0000:01:00.0".
        let looks_pci = name.len() == 7 && name.as_bytes()[2] == b':' && name.as_bytes()[5] == b'.';
        if looks_pci {
            port_id_by_name(&format!("0000:{name}"))
        } else {
            None
        }
    })
}

/// Ids of the ports that have a live [`Port`] (or queue handle).
static OPEN_PORTS: Mutex<Vec<u16>> = Mutex::new(Vec::new());

fn lock_open_ports() -> MutexGuard<'static, Vec<u16>> {
    OPEN_PORTS.lock().unwrap_or_else(|e| e.into_inner())
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock cannot leave PortState (or the flow
    // epoch) half-updated in a way that matters more than refusing every
    // later call would.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl PortShared {
    /// The flow calls' lock (see `flow_epoch`).
    pub(crate) fn flow_lock(&self) -> MutexGuard<'_, u64> {
        lock(&self.flow_epoch)
    }

    /// Marks every [`crate::flow::Flow`] made so far as possibly gone.
    fn new_flow_epoch(&self) {
        *self.flow_lock() += 1;
    }
}

fn take_queue(shared: &PortShared, queue: u16, rx: bool) -> Result<()> {
    let mut state = lock(&shared.state);
    let taken = if rx {
        &mut state.rx_taken
    } else {
        &mut state.tx_taken
    };
    match taken.get_mut(usize::from(queue)) {
        None => Err(Error::invalid(format!(
            "{}: no {} queue {queue} (configured: {})",
            shared.name,
            if rx { "RX" } else { "TX" },
            taken.len()
        ))),
        Some(true) => Err(Error::new(
            format!(
                "{}: {} queue {queue} is already taken",
                shared.name,
                if rx { "RX" } else { "TX" }
            ),
            libc_errno::EBUSY,
        )),
        Some(slot) => {
            *slot = true;
            Ok(())
        }
    }
}

fn give_back(shared: &PortShared, queue: u16, rx: bool) {
    let mut state = lock(&shared.state);
    let taken = if rx {
        &mut state.rx_taken
    } else {
        &mut state.tx_taken
    };
    if let Some(slot) = taken.get_mut(usize::from(queue)) {
        *slot = false;
    }
}

impl Drop for PortShared {
    fn drop(&mut self) {
        // No Port and no queue handle is left, so nothing polls the port.
        let mut open_ports = lock_open_ports();
        open_ports.retain(|&id| id != self.id);
        let state = lock(&self.state);
        // SAFETY: valid port id, nobody polls it; after this block the id is
        // never used again.
        unsafe {
            if state.started {
                sys::rte_eth_dev_stop(self.id);
            }
            // Detach the device (its driver closes and releases the port), so
            // that a later Port::open of the same device string attaches it
            // afresh; a closed-but-attached port could not be found again.
            let mut info: sys::rte_eth_dev_info = std::mem::zeroed();
            if sys::rte_eth_dev_info_get(self.id, &mut info) == 0
                && !info.device.is_null()
                && sys::rte_dev_remove(info.device) == 0
            {
                return;
            }
            sys::rte_eth_dev_close(self.id);
        }
    }
}

/// The handle for polling one RX queue. `Send` (move it to its worker), not
/// `Sync`: one thread polls a queue.
#[derive(Debug)]
pub struct RxQueue {
    port: u16,
    queue: u16,
    shared: Arc<PortShared>,
    _not_sync: std::marker::PhantomData<std::cell::Cell<()>>,
}

impl RxQueue {
    /// Receives up to `burst.free_slots()` packets, appended to `burst`;
    /// returns how many arrived. Never blocks.
    #[inline]
    pub fn rx_burst<const N: usize>(&mut self, burst: &mut Burst<N>) -> usize {
        let room = burst.free_slots().min(usize::from(u16::MAX)) as u16;
        if room == 0 {
            return 0;
        }
        // SAFETY: this handle is the only poller of (port, queue); the spare
        // slots have room for `room` pointers, and each mbuf DPDK writes there
        // is handed over to us (refcnt 1, from the queue's pool).
        let n = unsafe {
            sys::shim_rte_eth_rx_burst(self.port, self.queue, burst.spare_raw_slots(), room)
        };
        // SAFETY: DPDK filled exactly n <= room slots.
        unsafe { burst.assume_pushed(usize::from(n)) };
        usize::from(n)
    }

    /// The port id.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The queue index.
    pub fn queue(&self) -> u16 {
        self.queue
    }
}

impl Drop for RxQueue {
    fn drop(&mut self) {
        give_back(&self.shared, self.queue, true);
    }
}

/// The handle for sending on one TX queue (see [`RxQueue`]).
#[derive(Debug)]
pub struct TxQueue {
    port: u16,
    queue: u16,
    shared: Arc<PortShared>,
    _not_sync: std::marker::PhantomData<std::cell::Cell<()>>,
}

impl TxQueue {
    /// Hands packets from the front of `burst` to the device; returns how
    /// many it took. The rest stay in `burst`, in order and still owned: retry
    /// them, or drop them (and count the drop) with [`Burst::clear`].
    #[inline]
    pub fn tx_burst<const N: usize>(&mut self, burst: &mut Burst<N>) -> usize {
        let n = burst.len().min(usize::from(u16::MAX)) as u16;
        if n == 0 {
            return 0;
        }
        // SAFETY: this handle is the only sender on (port, queue); the first
        // n slots hold owned mbufs; DPDK takes ownership of the first `sent`.
        let sent =
            unsafe { sys::shim_rte_eth_tx_burst(self.port, self.queue, burst.raw_slots(), n) };
        // SAFETY: sent <= n = len, and DPDK owns those now.
        unsafe { burst.assume_taken_front(usize::from(sent)) };
        usize::from(sent)
    }

    /// The port id.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The queue index.
    pub fn queue(&self) -> u16 {
        self.queue
    }
}

impl Drop for TxQueue {
    fn drop(&mut self) {
        give_back(&self.shared, self.queue, false);
    }
}

#[cfg(test)]
mod tests {
    use super::{configurable_max_mtu, rss_names, WANTED_RSS};
    use dpdk_sys as sys;

    #[test]
    fn rss_names_name_each_kind_hashed() {
        assert_eq!(rss_names(0), "off");
        assert_eq!(rss_names(WANTED_RSS), "ip, udp, tcp, esp");
        // One flow type of a kind is enough (an 82599: IPv4/IPv6 and TCP,
        // UDP on IPv4 only, no ESP).
        let ixgbe_like = sys::RTE_ETH_RSS_IPV4 as u64
            | sys::RTE_ETH_RSS_IPV6 as u64
            | sys::RTE_ETH_RSS_NONFRAG_IPV4_TCP as u64
            | sys::RTE_ETH_RSS_NONFRAG_IPV4_UDP as u64;
        assert_eq!(rss_names(ixgbe_like), "ip, udp, tcp");
        assert_eq!(rss_names(sys::RTE_ETH_RSS_ESP as u64), "esp");
    }

    /// Known answers from what DPDK 22.11 drivers report and what
    /// rte_eth_dev_configure then accepts.
    #[test]
    fn configurable_max_mtu_as_dpdk_validates_it() {
        // net_af_packet: max_rx_pktlen RTE_ETHER_MAX_LEN, max_mtu left at
        // UINT16_MAX: overhead 18, so 1500.
        assert_eq!(configurable_max_mtu(u16::MAX, 1518), 1500);
        // net_ring / net_null: no limit worth the name.
        assert_eq!(configurable_max_mtu(u16::MAX, u32::MAX), u16::MAX);
        // A driver reporting both (ixgbe-like): its own overhead, capped by max_mtu.
        assert_eq!(configurable_max_mtu(9702, 9728), 9702);
        assert_eq!(configurable_max_mtu(1500, 1518), 1500);
        assert_eq!(configurable_max_mtu(u16::MAX, 10), 0);
    }
}

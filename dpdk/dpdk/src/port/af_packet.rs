//! What DPDK 22.11's `net_af_packet` can carry, worked out from its device
//! arguments rather than from what it advertises.
//!
//! The PMD reports a 1518-byte maximum frame whatever its ring looks like,
//! so `rte_eth_dev_configure` refuses any MTU above 1500. What really limits
//! it is the TPACKET_V2 ring its `framesz=` / `blocksz=` arguments size
//! (drivers/net/af_packet/rte_eth_af_packet.c, DPDK 22.11):
//!
//! * RX: the kernel writes each frame at offset 34 of a ring frame
//!   (TPACKET_ALIGN(32-byte tpacket2_hdr + 16) - 14-byte MAC header) and
//!   truncates what does not fit; the PMD copies the frame into an mbuf, and
//!   `rx_queue_setup` refuses a pool whose data room (less headroom) is
//!   smaller than `framesz - 32`.
//! * TX: the PMD drops (and counts as an error) every mbuf longer than
//!   `framesz - 32`.
//! * `blocksz` must be a multiple of the page size and at least `framesz`;
//!   `framesz` a multiple of 16 (TPACKET_ALIGNMENT).

/// The PMD's `framesz` when the device string has none (DFLT_FRAME_SIZE).
pub const DEFAULT_FRAME_SIZE: u32 = 2048;

/// Ring-frame bytes before the packet on TX (TPACKET2_HDRLEN - sizeof(sockaddr_ll)),
/// which is also what the PMD subtracts when it checks the mbuf size.
const TX_DATA_OFFSET: u32 = 32;

/// Where the kernel puts the MAC header of a received frame in a ring frame.
const RX_MAC_OFFSET: u32 = 34;

/// Ethernet header and two VLAN tags: the largest L2 header around an MTU's
/// worth of L3 (the kernel hands af_packet frames without the FCS).
const L2_HEADER_MAX: u32 = 14 + 8;

/// Suggested frame sizes are multiples of this, so four frames fill whole
/// 4 KiB pages (no ring memory wasted between frames).
const SUGGESTED_FRAME_ALIGN: u32 = 1024;

/// Ring frames per block in the suggested geometry.
const SUGGESTED_FRAMES_PER_BLOCK: u32 = 4;

/// True for a device name (or device string) handled by net_af_packet.
pub fn is_af_packet(device: &str) -> bool {
    let name = device.split(',').next().unwrap_or(device).trim();
    name.starts_with("net_af_packet") || name.starts_with("eth_af_packet")
}

/// An af_packet port's ring frame size, and what follows from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AfPacketFrames {
    frame_size: u32,
}

impl AfPacketFrames {
    /// A ring of `frame_size`-byte frames (the `framesz` argument).
    pub fn new(frame_size: u32) -> Self {
        AfPacketFrames { frame_size }
    }

    /// From the driver arguments (`iface=x,framesz=9216,...`) or a whole
    /// device string (`net_af_packet0,iface=x,framesz=9216`): `framesz`, or
    /// the PMD's default when it is absent. A value the PMD would not
    /// accept (not a positive number) also yields the default: the probe
    /// has failed then anyway.
    pub fn from_devargs(args: &str) -> Self {
        let frame_size = args
            .split(',')
            .filter_map(|kv| kv.split_once('='))
            // The PMD keeps the last one given.
            .rfind(|(k, _)| k.trim() == "framesz")
            .and_then(|(_, v)| v.trim().parse::<u32>().ok())
            .filter(|&v| v > 0)
            .unwrap_or(DEFAULT_FRAME_SIZE);
        AfPacketFrames { frame_size }
    }

    /// The ring frame size (`framesz`).
    pub fn frame_size(&self) -> u32 {
        self.frame_size
    }

    /// The largest frame (from the MAC header on) received whole.
    pub fn max_rx_frame(&self) -> u32 {
        self.frame_size.saturating_sub(RX_MAC_OFFSET)
    }

    /// The largest mbuf (packet length) sent rather than dropped.
    pub fn max_tx_frame(&self) -> u32 {
        self.frame_size.saturating_sub(TX_DATA_OFFSET)
    }

    /// The largest MTU carried both ways, with room for two VLAN tags.
    pub fn max_mtu(&self) -> u32 {
        self.max_rx_frame()
            .min(self.max_tx_frame())
            .saturating_sub(L2_HEADER_MAX)
    }

    /// Bytes of mbuf data room past the headroom that `rx_queue_setup`
    /// insists on.
    pub fn rx_buffer_needed(&self) -> u32 {
        self.frame_size.saturating_sub(TX_DATA_OFFSET)
    }

    /// The smallest frame size that carries `mtu`, as the kernel accepts it
    /// (a multiple of 16).
    pub fn min_frame_size_for_mtu(mtu: u16) -> u32 {
        round_up(u32::from(mtu) + L2_HEADER_MAX + RX_MAC_OFFSET, 16)
    }

    /// A `(framesz, blocksz)` pair that carries `mtu`: the frame rounded up
    /// to 1 KiB and four frames a block, so blocks are whole pages with no
    /// gap between frames (MTU 9000: 9216 and 36864).
    pub fn suggested_for_mtu(mtu: u16) -> (u32, u32) {
        let frame = round_up(Self::min_frame_size_for_mtu(mtu), SUGGESTED_FRAME_ALIGN);
        (frame, frame * SUGGESTED_FRAMES_PER_BLOCK)
    }
}

fn round_up(x: u32, to: u32) -> u32 {
    x.div_ceil(to) * to
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recognises_af_packet_devices() {
        assert!(is_af_packet("net_af_packet0,iface=veth0"));
        assert!(is_af_packet("eth_af_packet3"));
        assert!(!is_af_packet("net_af_xdp0,iface=veth0"));
        assert!(!is_af_packet("net_pcap0,rx_pcap=net_af_packet.pcap"));
    }

    #[test]
    fn frame_size_from_arguments_or_the_pmd_default() {
        let f = |s: &str| AfPacketFrames::from_devargs(s).frame_size();
        assert_eq!(f("iface=a"), 2048);
        assert_eq!(f("net_af_packet0,iface=a,framesz=9216,blocksz=36864"), 9216);
        assert_eq!(f("iface=a, framesz = 4096"), 4096);
        assert_eq!(f("iface=a,framesz=junk"), 2048);
        assert_eq!(f("iface=a,framesz=0"), 2048);
        assert_eq!(f("iface=framesz,framecnt=4096"), 2048);
    }

    /// The PMD's default ring (2048-byte frames) carries exactly what DPDK
    /// documents for it: RX 2014 bytes from offset 34, TX 2016 bytes, mbufs
    /// with 2016 bytes past the headroom (RTE_MBUF_DEFAULT_BUF_SIZE).
    #[test]
    fn default_ring_limits() {
        let d = AfPacketFrames::new(DEFAULT_FRAME_SIZE);
        assert_eq!(d.max_rx_frame(), 2014);
        assert_eq!(d.max_tx_frame(), 2016);
        assert_eq!(d.rx_buffer_needed(), 2016);
        assert_eq!(d.max_mtu(), 1992);
        assert!(d.max_mtu() >= 1500);
    }

    #[test]
    fn jumbo_needs_a_bigger_frame() {
        assert!(AfPacketFrames::new(DEFAULT_FRAME_SIZE).max_mtu() < 9000);
        // 9000 + 14 + 8 + 34 = 9056, already a multiple of 16.
        assert_eq!(AfPacketFrames::min_frame_size_for_mtu(9000), 9056);
        assert_eq!(AfPacketFrames::new(9056).max_mtu(), 9000);
        assert_eq!(AfPacketFrames::new(9040).max_mtu(), 8984);
        assert_eq!(AfPacketFrames::min_frame_size_for_mtu(1500), 1568);
    }

    #[test]
    fn suggestions_fit_and_fill_whole_pages() {
        assert_eq!(AfPacketFrames::suggested_for_mtu(9000), (9216, 36864));
        assert_eq!(AfPacketFrames::suggested_for_mtu(1500), (2048, 8192));
        for mtu in [68u16, 576, 1500, 1501, 4000, 8192, 9000, 9216, 65000] {
            let (frame, block) = AfPacketFrames::suggested_for_mtu(mtu);
            assert!(
                AfPacketFrames::new(frame).max_mtu() >= u32::from(mtu),
                "{mtu}"
            );
            assert_eq!(frame % 16, 0);
            assert_eq!(block % 4096, 0, "{mtu}: block {block}");
            assert!(block >= frame);
        }
    }
}

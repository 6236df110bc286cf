//! The simple IMIX: 7 packets of 64 bytes, 4 of 570 and 1 of 1500 (inner IP
//! packet bytes), interleaved so that a burst of 32 sees the mix rather
//! than runs of one size.

/// One period of the mix, in sending order.
pub const PATTERN: [usize; 12] = [64, 570, 64, 64, 570, 64, 64, 1500, 570, 64, 64, 570];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pattern_is_7_4_1_of_64_570_1500() {
        let count = |n| PATTERN.iter().filter(|&&s| s == n).count();
        assert_eq!((count(64), count(570), count(1500)), (7, 4, 1));
        assert_eq!(PATTERN.len(), 12);
    }

    #[test]
    fn any_window_of_a_burst_keeps_the_ratio() {
        // 32 packets taken cyclically from any starting point: 64-byte
        // packets stay between 7/12 of 32 rounded down and up.
        for start in 0..PATTERN.len() {
            let small = (0..32).filter(|i| PATTERN[(start + i) % 12] == 64).count();
            assert!((18..=19).contains(&small), "start {start}: {small}");
        }
    }
}

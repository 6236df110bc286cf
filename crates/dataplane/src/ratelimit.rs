//! A token bucket: how many ICMP errors a worker may send (RFC 1812
//! 4.3.2.8 asks routers to limit them), so that a flood of expiring or
//! oversize packets does not become a flood of answers.

/// `rate` tokens per second, at most `burst` saved up.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    rate: u64,
    burst: u64,
    tokens: u64,
    /// Time up to which tokens have been added.
    filled_ns: u64,
}

impl TokenBucket {
    /// A full bucket.
    pub fn new(rate: u64, burst: u64) -> Self {
        TokenBucket {
            rate: rate.max(1),
            burst,
            tokens: burst,
            filled_ns: 0,
        }
    }

    /// Takes a token at `now_ns` if there is one.
    pub fn take(&mut self, now_ns: u64) -> bool {
        let elapsed = now_ns.saturating_sub(self.filled_ns);
        let new = (u128::from(elapsed) * u128::from(self.rate) / 1_000_000_000) as u64;
        if new > 0 {
            self.tokens = (self.tokens + new).min(self.burst);
            // Keep the fraction of a token not yet earned; a full bucket
            // earns nothing more.
            self.filled_ns = if self.tokens == self.burst {
                now_ns
            } else {
                self.filled_ns + (u128::from(new) * 1_000_000_000 / u128::from(self.rate)) as u64
            };
        }
        if self.tokens == 0 {
            return false;
        }
        self.tokens -= 1;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bursts_then_refills_at_the_rate() {
        let mut b = TokenBucket::new(1000, 10);
        assert_eq!((0..20).filter(|_| b.take(0)).count(), 10);
        assert!(!b.take(500_000)); // half a token's time
        assert!(b.take(1_000_000)); // one token after 1 ms
        assert!(!b.take(1_000_000));
        // A long pause fills it up to the burst, no more.
        assert_eq!((0..50).filter(|_| b.take(10_000_000_000)).count(), 10);
    }
}

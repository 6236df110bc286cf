//! `set_ipsec_mb_allowed(false)` (`espgw bench --no-ipsec-mb`): the ciphers
//! built afterwards use no intel-ipsec-mb (AES-GCM from the split on and
//! ChaCha20-Poly1305 run ring) while espgw-aesgcm's short path keeps its
//! width; they seal to the same bytes as the ones built before, and
//! allowing it again brings the CPU's own choice back. Its own test binary
//! (so its own process): the setting is process-wide.

use espgw_esp::crypto::provider::{
    choose, describe, ipsec_mb_allowed, max_simd_width, set_ipsec_mb_allowed, Backend, Cpu,
    SimdWidth,
};
use espgw_esp::Suite;

mod common;
use common::{sealed_samples, AEAD};

#[test]
fn without_ipsec_mb_ring_takes_its_place_and_the_bytes_stay() {
    let raw = Cpu::detected();
    assert!(ipsec_mb_allowed());
    let before = sealed_samples();

    set_ipsec_mb_allowed(false);
    let cpu = Cpu::detected();
    assert!(!cpu.ipsec_mb);
    // The width is not touched: the short path keeps 512 bits.
    assert_eq!(max_simd_width(), SimdWidth::Bits512);
    assert_eq!(cpu.vaes_avx512, raw.vaes_avx512);
    for suite in [Suite::Aes128Gcm16, Suite::Aes256Gcm16] {
        let want = if cpu.aes_gcm_short {
            Backend::SplitGcm
        } else {
            Backend::Ring
        };
        assert_eq!(choose(suite, cpu), want, "{suite:?}");
        assert!(
            !describe(suite).contains("intel-ipsec-mb"),
            "{}",
            describe(suite)
        );
    }
    assert_eq!(choose(Suite::Chacha20Poly1305, cpu), Backend::Ring);
    assert!(
        before == sealed_samples(),
        "the same ESP from either backend"
    );

    set_ipsec_mb_allowed(true);
    assert_eq!(Cpu::detected(), raw);
    for suite in AEAD {
        assert_eq!(choose(suite, Cpu::detected()), choose(suite, raw));
    }
}

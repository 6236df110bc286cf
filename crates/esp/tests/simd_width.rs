//! `set_max_simd_width(Bits256)`: the ciphers built afterwards are what a
//! CPU without AVX-512 gets (no intel-ipsec-mb, espgw-aesgcm on its
//! 128-bit path), they seal to the same bytes as the ones built before it,
//! and `Bits512` brings the CPU's own choice back. Its own test binary (so
//! its own process): the setting is process-wide.

use espgw_esp::crypto::new_cipher;
use espgw_esp::crypto::provider::{
    choose, describe, max_simd_width, set_max_simd_width, simd_width_note, Backend, Cpu,
    Implementation, SimdWidth,
};
use espgw_esp::Suite;

mod common;
use common::{sealed_samples, AEAD, SEAL_LENS};

/// The backend a CPU without AVX-512 gets for `suite`, this machine's
/// other features (`raw`, detected before the cap) kept.
fn without_avx512(suite: Suite, raw: Cpu) -> Backend {
    choose(
        suite,
        Cpu {
            vaes_avx512: false,
            ..raw
        },
    )
}

#[test]
fn a_256_bit_cap_picks_what_a_cpu_without_avx512_gets() {
    let raw = Cpu::detected();
    assert_eq!(max_simd_width(), SimdWidth::Bits512);
    assert!(simd_width_note().is_none());
    let before = sealed_samples();

    set_max_simd_width(SimdWidth::Bits256);
    assert_eq!(max_simd_width(), SimdWidth::Bits256);
    assert!(!Cpu::detected().vaes_avx512);
    // The note names the cap whenever the CPU has the 512-bit features
    // (with or without intel-ipsec-mb).
    if raw.vaes_avx512 {
        assert!(simd_width_note().is_some());
    } else {
        eprintln!("this CPU runs no 512-bit code here: the cap changes nothing");
    }
    for suite in Suite::ALL {
        let backend = choose(suite, Cpu::detected());
        assert_eq!(backend, without_avx512(suite, raw), "{suite}");
        assert!(!matches!(backend, Backend::SplitIpsecMb | Backend::IpsecMb));
        let text = describe(suite);
        assert!(
            !text.contains("ipsec-mb") && !text.contains("AVX-512"),
            "{text}"
        );
    }
    for suite in AEAD {
        let key: Vec<u8> = (0..suite.key_len() as u8).collect();
        let cipher = new_cipher(suite, &key, &[]).unwrap();
        for len in SEAL_LENS {
            let runs = cipher.implementation(len);
            assert!(
                runs != Some(Implementation::IpsecMb),
                "{suite} {len}: {runs:?}"
            );
        }
    }
    // The same bytes as the ciphers built before (whatever those ran).
    assert!(before == sealed_samples());

    set_max_simd_width(SimdWidth::Bits512);
    assert_eq!(Cpu::detected(), raw);
    for suite in Suite::ALL {
        assert_eq!(
            choose(suite, Cpu::detected()),
            choose(suite, raw),
            "{suite}"
        );
    }
}

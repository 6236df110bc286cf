//! Key exchange known answers: RFC 7748 (X25519), RFC 5903 section 8
//! (ECP-256, ECP-384, with its x | y encoding), and for MODP-2048 the RFC
//! 3526 prime from its defining formula plus an exchange whose values were
//! computed with Python's big integers (crypto_vectors.py), as no RFC
//! publishes one for group 14.

use espgw_ike::crypto::ke::KeyExchange;
use espgw_ike::crypto::modp;
use espgw_ike::crypto::rng::RandomSource;
use espgw_ike::crypto::transform::KeGroup;
use espgw_ike::crypto::CryptoError;

fn unhex(s: &str) -> Vec<u8> {
    let s: String = s.chars().filter(|c| c.is_ascii_hexdigit()).collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("test vector hex"))
        .collect()
}

/// A deterministic source: a counter through SplitMix64 (test only).
struct TestRng(u64);

impl RandomSource for TestRng {
    fn fill(&mut self, dest: &mut [u8]) -> Result<(), CryptoError> {
        for b in dest.iter_mut() {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            *b = (z ^ (z >> 31)) as u8;
        }
        Ok(())
    }
}

// ------------------------------------------------------------------ X25519

#[test]
fn x25519_rfc7748_section_5_2() {
    for (scalar, u, out) in [
        (
            "a546e36bf0527c9d3b16154b82465edd62144c0ac1fc5a18506a2244ba449ac4",
            "e6db6867583030db3594c1a424b15f7c726624ec26b3353b10a903a6d0ab1c4c",
            "c3da55379de9c6908e94ea4df28d084f32eccf03491c71f754b4075577a28552",
        ),
        // u has its top bit set, which X25519 must ignore.
        (
            "4b66e9d4d1b4673c5ad22691957d6af5c11b6421e0ea01d42ca4169e7918ba0d",
            "e5210f12786811d3f4b7959d0538ae2c31dbe7106fc03c3efc4cd549c715a493",
            "95cbde9476e8907d7aade45cb4b873f88b595a68799fa152e6f8f7647aac7957",
        ),
    ] {
        let ke = KeyExchange::from_private(KeGroup::Curve25519, &unhex(scalar)).unwrap();
        let shared = ke.shared_secret(&unhex(u)).unwrap();
        assert_eq!(shared.expose(), unhex(out).as_slice());
    }
}

#[test]
fn x25519_rfc7748_section_6_1() {
    let alice = KeyExchange::from_private(
        KeGroup::Curve25519,
        &unhex("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a"),
    )
    .unwrap();
    let bob = KeyExchange::from_private(
        KeGroup::Curve25519,
        &unhex("5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb"),
    )
    .unwrap();
    assert_eq!(
        alice.public_value(),
        unhex("8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a")
    );
    assert_eq!(
        bob.public_value(),
        unhex("de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f")
    );
    let k = unhex("4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742");
    assert_eq!(alice.shared_secret(bob.public_value()).unwrap().expose(), k);
    assert_eq!(bob.shared_secret(alice.public_value()).unwrap().expose(), k);
}

#[test]
fn x25519_refuses_small_order_points() {
    let ke = KeyExchange::generate(KeGroup::Curve25519, &mut TestRng(1)).unwrap();
    // u = 0 and u = 1 give the all-zero output (RFC 7748 section 6.1).
    let zero = [0u8; 32];
    let mut one = [0u8; 32];
    one[0] = 1;
    for bad in [zero, one] {
        assert_eq!(
            ke.shared_secret(&bad).unwrap_err(),
            CryptoError::InvalidPublicValue
        );
    }
}

// ------------------------------------------------------------ RFC 5903 ECP

struct EcpCase {
    group: KeGroup,
    i: &'static str,
    gix: &'static str,
    giy: &'static str,
    r: &'static str,
    grx: &'static str,
    gry: &'static str,
    girx: &'static str,
}

const RFC5903_8_1: EcpCase = EcpCase {
    group: KeGroup::Ecp256,
    i: "C88F01F5 10D9AC3F 70A292DA A2316DE5 44E9AAB8 AFE84049 C62A9C57 862D1433",
    gix: "DAD0B653 94221CF9 B051E1FE CA5787D0 98DFE637 FC90B9EF 945D0C37 72581180",
    giy: "5271A046 1CDB8252 D61F1C45 6FA3E59A B1F45B33 ACCF5F58 389E0577 B8990BB3",
    r: "C6EF9C5D 78AE012A 011164AC B397CE20 88685D8F 06BF9BE0 B283AB46 476BEE53",
    grx: "D12DFB52 89C8D4F8 1208B702 70398C34 2296970A 0BCCB74C 736FC755 4494BF63",
    gry: "56FBF3CA 366CC23E 8157854C 13C58D6A AC23F046 ADA30F83 53E74F33 039872AB",
    girx: "D6840F6B 42F6EDAF D13116E0 E1256520 2FEF8E9E CE7DCE03 812464D0 4B9442DE",
};

const RFC5903_8_2: EcpCase = EcpCase {
    group: KeGroup::Ecp384,
    i: "099F3C70 34D4A2C6 99884D73 A375A67F 7624EF7C 6B3C0F16 0647B674 14DCE655 E35B5380 \
        41E649EE 3FAEF896 783AB194",
    gix: "667842D7 D180AC2C DE6F74F3 7551F557 55C7645C 20EF73E3 1634FE72 B4C55EE6 DE3AC808 \
          ACB4BDB4 C88732AE E95F41AA",
    giy: "9482ED1F C0EEB9CA FC498462 5CCFC23F 65032149 E0E144AD A0241815 35A0F38E EB9FCFF3 \
          C2C947DA E69B4C63 4573A81C",
    r: "41CB0779 B4BDB85D 47846725 FBEC3C94 30FAB46C C8DC5060 855CC9BD A0AA2942 E0308312 \
        916B8ED2 960E4BD5 5A7448FC",
    grx: "E558DBEF 53EECDE3 D3FCCFC1 AEA08A89 A987475D 12FD950D 83CFA417 32BC509D 0D1AC43A \
          0336DEF9 6FDA41D0 774A3571",
    gry: "DCFBEC7A ACF31964 72169E83 8430367F 66EEBE3C 6E70C416 DD5F0C68 759DD1FF F83FA401 \
          42209DFF 5EAAD96D B9E6386C",
    girx: "11187331 C279962D 93D60424 3FD592CB 9D0A926F 422E4718 7521287E 7156C5C4 D6031355 \
           69B9E9D0 9CF5D4A2 70F59746",
};

fn check_ecp(case: &EcpCase) {
    let init = KeyExchange::from_private(case.group, &unhex(case.i)).unwrap();
    let resp = KeyExchange::from_private(case.group, &unhex(case.r)).unwrap();
    // RFC 5903 section 7: the KE payload holds x | y, no 0x04 prefix.
    let gi = [unhex(case.gix), unhex(case.giy)].concat();
    let gr = [unhex(case.grx), unhex(case.gry)].concat();
    assert_eq!(init.public_value(), gi.as_slice());
    assert_eq!(resp.public_value(), gr.as_slice());
    assert_eq!(gi.len(), case.group.public_len());
    // g^ir is the x coordinate of the shared point.
    let girx = unhex(case.girx);
    assert_eq!(init.shared_secret(&gr).unwrap().expose(), girx.as_slice());
    assert_eq!(resp.shared_secret(&gi).unwrap().expose(), girx.as_slice());
    assert_eq!(girx.len(), case.group.shared_len());

    // A point off the curve (y changed) and a wrong length are refused.
    let mut off = gr.clone();
    *off.last_mut().unwrap() ^= 1;
    assert_eq!(
        init.shared_secret(&off).unwrap_err(),
        CryptoError::InvalidPublicValue
    );
    let mut with_prefix = vec![0x04];
    with_prefix.extend_from_slice(&gr);
    assert!(matches!(
        init.shared_secret(&with_prefix).unwrap_err(),
        CryptoError::PublicValueLength { .. }
    ));
}

#[test]
fn ecp256_rfc5903_section_8_1() {
    check_ecp(&RFC5903_8_1);
}

#[test]
fn ecp384_rfc5903_section_8_2() {
    check_ecp(&RFC5903_8_2);
}

#[test]
fn ecp_refuses_scalars_outside_the_group() {
    // 0 and the all-ones string (above the group order) are not scalars.
    for group in [KeGroup::Ecp256, KeGroup::Ecp384] {
        let len = group.shared_len();
        for bad in [vec![0u8; len], vec![0xff; len]] {
            assert_eq!(
                KeyExchange::from_private(group, &bad).unwrap_err(),
                CryptoError::InvalidPrivateValue
            );
        }
    }
}

// --------------------------------------------------------------- MODP-2048

#[test]
fn modp_prime_is_rfc3526_group_14() {
    // p = 2^2048 - 2^1984 - 1 + 2^64 * { [2^1918 pi] + 124476 }, evaluated
    // by crypto_vectors.py with 4000-bit pi.
    let from_formula = unhex(
        "ffffffffffffffffc90fdaa22168c234c4c6628b80dc1cd129024e088a67cc74020bbea63b139b22\
         514a08798e3404ddef9519b3cd3a431b302b0a6df25f14374fe1356d6d51c245e485b576625e7ec6\
         f44c42e9a637ed6b0bff5cb6f406b7edee386bfb5a899fa5ae9f24117c4b1fe649286651ece45b3d\
         c2007cb8a163bf0598da48361c55d39a69163fa8fd24cf5f83655d23dca3ad961c62f356208552bb\
         9ed529077096966d670c354e4abc9804f1746c08ca18217c32905e462e36ce3be39e772c180e8603\
         9b2783a2ec07a28fb5c55df06f4c52c9de2bcbf6955817183995497cea956ae515d2261898fa0510\
         15728e5a8aacaa68ffffffffffffffff",
    );
    assert_eq!(
        modp::PRIME.get_copy().to_be_bytes().as_ref(),
        from_formula.as_slice()
    );
}

#[test]
fn modp2048_known_exchange() {
    let a = unhex("1112131415161718191a1b1c1d1e1f202122232425262728292a2b2c2d2e2f30");
    let b = unhex("7778797a7b7c7d7e7f808182838485868788898a8b8c8d8e8f90919293949596");
    let ga = unhex(
        "66e539f7e0fdaa3ec0ddc5e78503e695f16dfc75675b7927dd37d9409b63513a3c4dfad039f4b47f\
         4e3f66de5339a10906e0aa82da59c28d7499bf55d0cb5f12e8ef0aa55ab331de9ff364d3917f66e1\
         376bace4a5a243c2b74606f9718c391d2c4f31f0bbe6b9262b17adcfae3e2358d58a74b334ea7828\
         55aae7f280cbf5832957efd47a3d29b8a5404f42e50be103e9dce931b0aa79b146b5f79a612350c1\
         316f5ea4ea0c7970e4c777bd0ffb498b156ed7ec6f599220eb7feda94f8116560d00334b7174b99a\
         f87adf5b0b0a7daf4bd9080c752e2b29e54ec2aadf012347e62b9310aa7f960d31a86dd39cc1dbe9\
         8ce8fa3c41133175ed3b7eab45908089",
    );
    let gb = unhex(
        "ad2c6fd208d18e3ee6d77f772062ca2361b5834fb5638c6634edebb666b1d8aac310cfd0eaee64fa\
         df2603342dbe36bd5778133fb3348625fb76c958defd08181e07940aa9e36d393f4fd2be66f6029f\
         fdfe208642dbfd5b73ed69df52fc7784c6ba2379ae14876a2ca9f6832f8bd8ab92a9704809317404\
         c448992df5a1eebe73bafb79b0f9176dec37a2da40216697fd1243a4ee408b205d7663bc53c3b077\
         06485f607e97b6a654b9ae8f1bdccf9ecaae595f8fbac111602f2d13e3df3b4b85fbfd8955805d0d\
         4ea6229def4f20adb68d6938a0f899d3ceb108a86e8e6f750ea19ac7972a5321ceafe3f6daee08d5\
         28d53c6e070bad70376803c11fb05a86",
    );
    let gab = unhex(
        "8e512ca72c6c58713d9652414400ae2feedb4780735297da3937118b287ed0fe6ea2705988a12c76\
         1f5029e93778be0f80063010641a2090ba6fa50b2e814a1666b53f539cc969dcdc58e91c81ef9a12\
         ff6640b7f4face79cbca81ab84ab4e579f0bc2f0693660e233ef1ff3955f5aa7703ab28f8d7e5e72\
         4dff6ca26052df40f93992d7918c35f81eca0b3a730321146c7b092271622ff21f0d2dd3d760dda4\
         618ccc4a595e894581aaf73898766b71f3a03eecdd0a55af247e91d0bfb9b4da4a1edd3e79fc71a7\
         40b5c6abb00a53b881ff4f24d256d068f6a52401e138470ed7dc2512fc1e91d3ea3030bded7b7dec\
         94cdc0d90951c1590ed0eeb4838eb9c8",
    );
    let alice = KeyExchange::from_private(KeGroup::Modp2048, &a).unwrap();
    let bob = KeyExchange::from_private(KeGroup::Modp2048, &b).unwrap();
    assert_eq!(alice.public_value(), ga.as_slice());
    assert_eq!(bob.public_value(), gb.as_slice());
    assert_eq!(alice.shared_secret(&gb).unwrap().expose(), gab.as_slice());
    assert_eq!(bob.shared_secret(&ga).unwrap().expose(), gab.as_slice());
}

#[test]
fn modp2048_refuses_degenerate_public_values() {
    let ke = KeyExchange::generate(KeGroup::Modp2048, &mut TestRng(7)).unwrap();
    let p = modp::PRIME.get_copy().to_be_bytes();
    let mut p_minus_1 = p.as_ref().to_vec();
    p_minus_1[255] -= 1;
    let mut one = vec![0u8; 256];
    one[255] = 1;
    for bad in [
        vec![0u8; 256],
        one,
        p_minus_1,
        p.as_ref().to_vec(),
        vec![0xff; 256],
    ] {
        assert_eq!(
            ke.shared_secret(&bad).unwrap_err(),
            CryptoError::InvalidPublicValue
        );
    }
    assert!(matches!(
        ke.shared_secret(&[2u8; 255]).unwrap_err(),
        CryptoError::PublicValueLength {
            expected: 256,
            got: 255
        }
    ));
    // 2 is a valid element (the generator).
    let mut two = vec![0u8; 256];
    two[255] = 2;
    assert!(ke.shared_secret(&two).is_ok());
}

// ------------------------------------------------------- all groups, generated

#[test]
fn generated_exchanges_agree_and_are_deterministic_with_a_seeded_rng() {
    for group in KeGroup::ALL {
        let a = KeyExchange::generate(group, &mut TestRng(100)).unwrap();
        let b = KeyExchange::generate(group, &mut TestRng(200)).unwrap();
        assert_eq!(a.public_value().len(), group.public_len());
        let ab = a.shared_secret(b.public_value()).unwrap();
        let ba = b.shared_secret(a.public_value()).unwrap();
        assert_eq!(ab.expose(), ba.expose(), "{group:?}");
        assert_eq!(ab.len(), group.shared_len());
        // Same seed, same value: the engine's tests can replay exchanges.
        let again = KeyExchange::generate(group, &mut TestRng(100)).unwrap();
        assert_eq!(again.public_value(), a.public_value());
        assert_ne!(a.public_value(), b.public_value());
    }
}

#[test]
fn private_values_do_not_print() {
    let scalar = unhex("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a");
    for group in [KeGroup::Curve25519, KeGroup::Modp2048] {
        let ke = KeyExchange::from_private(group, &scalar).unwrap();
        let printed = format!("{ke:?}");
        assert!(printed.contains("redacted"), "{printed}");
        assert!(
            !printed.contains("77076d0a") && !printed.contains("119, 7, 109"),
            "{printed}"
        );
    }
}

/// One MODP-2048 key exchange (public value + shared secret) timed; the
/// engine does both per IKE_SA_INIT. Run:
/// `cargo test --release -p espgw-ike --test crypto_ke -- --ignored --nocapture`
#[test]
#[ignore]
fn modp2048_timing() {
    use std::time::Instant;
    let peer = KeyExchange::generate(KeGroup::Modp2048, &mut TestRng(1)).unwrap();
    let mut rng = TestRng(2);
    let runs = 20;
    let start = Instant::now();
    for _ in 0..runs {
        let ke = KeyExchange::generate(KeGroup::Modp2048, &mut rng).unwrap();
        std::hint::black_box(ke.shared_secret(peer.public_value()).unwrap());
    }
    let per = start.elapsed() / runs;
    println!("modp2048: {per:?} per exchange (2 exponentiations, 256-bit exponent)");
    for group in [KeGroup::Curve25519, KeGroup::Ecp256, KeGroup::Ecp384] {
        let peer = KeyExchange::generate(group, &mut TestRng(1)).unwrap();
        let start = Instant::now();
        for _ in 0..runs {
            let ke = KeyExchange::generate(group, &mut rng).unwrap();
            std::hint::black_box(ke.shared_secret(peer.public_value()).unwrap());
        }
        println!("{group:?}: {:?} per exchange", start.elapsed() / runs);
    }
}

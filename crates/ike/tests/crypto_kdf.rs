//! PRF, prf+ and key derivation against published known answers:
//! RFC 4231 (HMAC-SHA-256/384/512) and NIST's ACVP "kdf-components ikev2"
//! vectors (SP 800-135 section 4.3) as OpenSSL's evpkdf_ikev2.txt carries
//! them: SKEYSEED, the IKE SA DKM, CHILD_SA DKM with and without a new
//! key exchange, and the rekeyed SKEYSEED.

use espgw_ike::crypto::kdf::{rekey_skeyseed, skeyseed, ChildSaKeys, IkeSaKeys};
use espgw_ike::crypto::proposal::IkeSuite;
use espgw_ike::crypto::transform::{Encryption, EspSuite, Integrity, KeGroup, Prf};
use espgw_ike::crypto::CryptoError;

fn unhex(s: &str) -> Vec<u8> {
    let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("test vector hex"))
        .collect()
}

// ---------------------------------------------------------------- RFC 4231

struct HmacCase {
    key: Vec<u8>,
    data: Vec<u8>,
    sha256: &'static str,
    sha384: &'static str,
    sha512: &'static str,
}

fn rfc4231_cases() -> Vec<HmacCase> {
    vec![
        // Test Case 1
        HmacCase {
            key: vec![0x0b; 20],
            data: b"Hi There".to_vec(),
            sha256: "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7",
            sha384: "afd03944d84895626b0825f4ab46907f15f9dadbe4101ec682aa034c7cebc59c\
                     faea9ea9076ede7f4af152e8b2fa9cb6",
            sha512: "87aa7cdea5ef619d4ff0b4241a1d6cb02379f4e2ce4ec2787ad0b30545e17cde\
                     daa833b7d6b8a702038b274eaea3f4e4be9d914eeb61f1702e696c203a126854",
        },
        // Test Case 2: a key shorter than the output
        HmacCase {
            key: b"Jefe".to_vec(),
            data: b"what do ya want for nothing?".to_vec(),
            sha256: "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843",
            sha384: "af45d2e376484031617f78d2b58a6b1b9c7ef464f5a01b47e42ec3736322445e\
                     8e2240ca5e69e2c78b3239ecfab21649",
            sha512: "164b7a7bfcf819e2e395fbe73b56e0a387bd64222e831fd610270cd7ea250554\
                     9758bf75c05a994a6d034f65f8f0e6fdcaeab1a34d4a6b4b636e070a38bce737",
        },
        // Test Case 3
        HmacCase {
            key: vec![0xaa; 20],
            data: vec![0xdd; 50],
            sha256: "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe",
            sha384: "88062608d3e6ad8a0aa2ace014c8a86f0aa635d947ac9febe83ef4e55966144b\
                     2a5ab39dc13814b94e3ab6e101a34f27",
            sha512: "fa73b0089d56a284efb0f0756c890be9b1b5dbdd8ee81a3655f83e33b2279d39\
                     bf3e848279a722c806b485a47e67c807b946a337bee8942674278859e13292fb",
        },
        // Test Case 6: a key longer than the hash's block (hashed first)
        HmacCase {
            key: vec![0xaa; 131],
            data: b"Test Using Larger Than Block-Size Key - Hash Key First".to_vec(),
            sha256: "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54",
            sha384: "4ece084485813e9088d2c63a041bc5b44f9ef1012a2b588f3cd11f05033ac4c6\
                     0c2ef6ab4030fe8296248df163f44952",
            sha512: "80b24263c7c1a3ebb71493c1dd7be8b49b46d1f41b4aeec1121b013783f8f352\
                     6b56d037e05f2598bd0fd2215d6a1e5295e64f73f63f0aec8b915a985d786598",
        },
    ]
}

#[test]
fn prf_matches_rfc4231() {
    for (i, case) in rfc4231_cases().iter().enumerate() {
        for (prf, expected) in [
            (Prf::HmacSha256, case.sha256),
            (Prf::HmacSha384, case.sha384),
            (Prf::HmacSha512, case.sha512),
        ] {
            let out = prf.compute(&case.key, &[&case.data]);
            assert_eq!(out.expose(), unhex(expected).as_slice(), "case {i} {prf:?}");
            assert_eq!(out.len(), prf.output_len());
            // Data given in pieces is the same as concatenated.
            let (a, b) = case.data.split_at(case.data.len() / 2);
            assert_eq!(prf.compute(&case.key, &[a, b]).expose(), out.expose());
        }
    }
}

// ------------------------------------------------------- prf+ (RFC 7296 2.13)

#[test]
fn prf_plus_is_the_rfc_7296_chain() {
    // T1 = prf(K, S | 0x01), T2 = prf(K, T1 | S | 0x02), ... built here
    // from single PRF calls (themselves checked against RFC 4231 above).
    let prf = Prf::HmacSha256;
    let key = b"prf+ key";
    let seed = b"seed bytes";
    let t1 = prf.compute(key, &[seed, &[1]]);
    let t2 = prf.compute(key, &[t1.expose(), seed, &[2]]);
    let t3 = prf.compute(key, &[t2.expose(), seed, &[3]]);
    let chain = [t1.expose(), t2.expose(), t3.expose()].concat();
    let out = prf.prf_plus(key, &[seed], 80).unwrap();
    assert_eq!(out.expose(), &chain[..80]);
    // The seed may be given in pieces.
    let split = prf.prf_plus(key, &[&seed[..3], &seed[3..]], 80).unwrap();
    assert_eq!(split.expose(), out.expose());
}

#[test]
fn prf_plus_stops_at_255_blocks() {
    let prf = Prf::HmacSha256;
    assert_eq!(
        prf.prf_plus(b"k", &[b"s"], 255 * 32).unwrap().len(),
        255 * 32
    );
    assert_eq!(
        prf.prf_plus(b"k", &[b"s"], 255 * 32 + 1).unwrap_err(),
        CryptoError::PrfPlusTooLong {
            requested: 255 * 32 + 1
        }
    );
}

// -------------------------------------------- ACVP kdf-components ikev2 vectors

struct AcvpCase {
    prf: Prf,
    ni: &'static str,
    nr: &'static str,
    gir: &'static str,
    gir_new: &'static str,
    spi_i: &'static str,
    spi_r: &'static str,
    skeyseed: &'static str,
    dkm: &'static str,
    dkm_child: &'static str,
    dkm_child_dh: &'static str,
    skeyseed_rekey: &'static str,
}

/// OpenSSL's "self_test_data.c" SHA-256 case (from the ACVP sample set).
const SHA256_SELFTEST: AcvpCase = AcvpCase {
    prf: Prf::HmacSha256,
    ni: "3651FEF5C9C35E93",
    nr: "C09A8B90A3F04D59",
    gir: "D084A30166A50FB7325C3960874A839449EF9741C2F4F947D0201DD8C1269273D79509F37E3CA3EB\
          4FA2FE2A28254E289CD3F34DAD4EB4DF1A07685A4B8A94FA61E2491F7598B3CE65547FF133B3F63D\
          1AC4175EAA695033F3CEDB026A6873A36455172A8540B8A5D23A0143BED0390EE49B168269D75FFF\
          EE9FB62BE965993C",
    gir_new: "52F00AB174C25D5B7139AE5FF4E8E9EDDEE5992D2E36ADF8A559FFD90DAB1442E4FBE429D320C0\
              F33552A17D1557FA41EA70E8FB916C4FA27ED52B5F8EBD8461AFA78F1159159A64055AC5F6319E\
              29C28EAE58CBC6847770F32C3FED1D04750484F854790F95E9EC01BC5BC461F24966462E359511\
              329305038E94DEB6DD42C2",
    spi_i: "8E5C3AE507221684",
    spi_r: "B1F201BB155C3ACD",
    skeyseed: "EFAA7AB0EAA85A3D0BE2100CD4B6FE00FF5025A9EAFDDB3EF518E9F0D3FE60E6",
    dkm: "462B9DD525D4FD71169174272779E704BAF62C6231779AE9EFE8C58B21916B42010164AF2111EBD7\
          62F6916CA9A6F0EE05C8B320E4EE27705521DE2589ADEA1878F1A551738AF7C88DC4F0BB0C096A3F\
          7D1F1A670FC79F49F678D60D665BB3710C8657F03BA9F62B9A818D7A228968C506E237AE9502AA6D\
          B395C61EA6A3E79504F86B7368BFB5423DF79E48809BBCCD49FD826D024F63D7C2A5566400A12E73\
          6AA034510428F5EA008FE2FC16886FA388274EA6C2B4FCFC6141BF04F8207EF8AFC224EA1059CB22\
          0DC0B23AC0E4CCDA495A4E131B1D56E223ABA5A48E8ED1F5",
    dkm_child: "23647677E7D403FA1E3006F19840AEE18AD9FECC4215814C4131BDEBA98433D8B0E31BFBBDDF82\
                2ABCCE5E06486AA388022B75E27E1E68AA5983028B65282C730C5D49EF7606770376CFDEC41F7C\
                C435D816029989BC353D3B67B9FD1168DDCB8978850DA9B752AEE6A30D0086D2C4D74EC0E03648\
                A0DAD334FAF5FE88084E67B0F3E8FEE8B5E1BD3850DB540F1FB8CFFE23C9E92CDA209373F35488\
                0C246C753E2A0ECA9CB73B9910A8531C4010E6768FA29F909E60AF777FED6E739C3CFDA03467E9\
                15D6F03FCE9C41F5F9D578F8912D66A75457E79EE1D5BCC2BE5C2F9BAE",
    dkm_child_dh: "6A919387A5FA2835FE8A8237E4A14845BD2B9930DB87EFF7ADF268F62186004902DBA9AA942D02\
                   59A0EDC4120B932A503865B57BA8FB88117EF5DF7B26799CD8BA37AA5438108CB1A4FE117907C9\
                   D0597B708C3F11151FEFD624D2317202B7C81430600E6FCBB6E1A8DF2B4861EF2363D53DE1BE69\
                   057B0CF6634A7E7BFA97B3C2810623E2BD6757738777177036E9C3A39794456954BD41FC444A12\
                   507AB9CAC69A0540D13C29DB8510F566A691691BAA2D9569DACC990D56A454BB444BCBBE8751B0\
                   550A5278812FC5AB4F28990DD6D608538D7DDDE24DC81BDAACA7751FDE",
    skeyseed_rekey: "90722C42BD849E9B72D240FC254174270FA8295DE6F0338DAFC303A9EC104F12",
};

/// ACVP kdf-components ikev2, tgId 13 / tcId 241 (SHA2-512).
const SHA512_TC241: AcvpCase = AcvpCase {
    prf: Prf::HmacSha512,
    ni: "834EA4753E9A06832072FA15E89E799035A1285CE241CAF3B5C724ECE8ECD0D2D1AC46FAB3D9D86B\
         F2EBF4CC8F93E06C5342415E14DFCBC949574E1606F96F143E8AA8C80BCCD376FF3D3BAE0B134A04\
         DD2AE557010E5D7A7552C6864FD8A82D99FFDFDA97BE97389A426D7259411B10DD9EEFAE2709141E\
         654087A2056EB86DAF95EF262328A2CDD90C61152DC2BBFCF4CCF4084557C3892603023A8B7045FC\
         589A35143E10DCD1A73406EA923B21687A12134B6A1007E4AA2E37FFFA4901DFF6F3514E2B350F08\
         175E194D3C6DB75E03FD838D503CEFA9E9604A4E18F330C08142574A992465FEA063875ABAF144F4\
         7C50F32A0A83224E3EEA739033AF6B9F",
    nr: "F833709DE457FB58ABE1D26E8DECC8FE889D503954C4812AC0F41271394AF7C148B15A241C2D6D65\
         02C3C57DAE854A97BFB3CCDCEC650153578CCB51BDFE1C715E81F3D78488B1547A3C9E5617D9B78B\
         46D06F56BB56423C88DEACCD82E7A2A11ADD56651091682F0987332EA28A32045A4D39609F364EB5\
         E70468ECB7BBDCAD6B41E04ADD11D97F300E8D0A0C2941F1CB64885F940EE2FA273477E910983E96\
         913F58E37BFD68E3ADCD6E813176E95FEE7985F5526EEDC3245C4746F5864D9E90BF80F6882F6A50\
         5ADACD81D106576F7A6C705E37CE551235E012E64EC3BE7B4F3F8889E664CC5ED7BCC4A88022A437\
         439609B3019CDE1948665A548E420D1E",
    gir: "9566A04BF95F433C6497B3AE8CB0F600043F8438EB2B9E97E912AF1C5ACE9A73A8884BF1FF80A895\
          EB97A6F5494B6CEA5B1C3123C3A9CBE057A0CBA2F52FD40A8DFDF9F99B521D356347E2B70CF637B5\
          B4A44C2ED92770A281E6431CB50BDDCE4FB2EC8100218FA84B0A4A344C4DC79BBC81ADD2FD23BC79\
          7EFA1B2AFA6840AD7B2E04D391F33662774A5296A0EF9C9C113E84F5B958FD54857E75378406F29D\
          A1EB23E9E9D9D94177672BFA7742F7F4319F31ED06E1999E17EEAC6B35ADC9A245CAD998E3CE3C42\
          2B8AD752F7144332E9AAE44EA837677A8406B7261C04CB4EB9230FBA75E09E16EEDA246D5B1DA5CF\
          14C96F00FC83C555854E7982E52A1D4F",
    gir_new: "F34450EC9F4B07881FF17DB4AE1681B26F2FC8CBECDB7EF0463B09C4FE79F8414FBEA9FD3E7C18\
              C845D04E283E1EEB7824484C72354A7A9C418E69B8134D596E1ABCD2998EA5FABCA1FD156678BF\
              7FB0F31C1158E812FD215837A23938BAC55B37C6E8BECEDF9435A03484326CD2D4E3C7A273D8A9\
              9135027AA17823DA9BF0263082394CA3475266F5BAE91D1577C3D15A7DD429E1F5DE70138B0521\
              4589EF8A519AA930A42F609CCC54CE8701488E80C2BEACCA2542C0D9B2DD7C04E41EBBC341EB65\
              A3F786900747FA6CA2CF914E908FEA40014D3175B73DA1B63437A89638F69E184FD91E6A02C0F9\
              FC9AFAFE7B6811B3AC7A57B2615A3B3FC26289500143",
    spi_i: "6E5F49D279F4FBBB",
    spi_r: "FF7AE472AA4DD7AF",
    skeyseed: "3DAA296C25DD8CBDE8E9F5FE85498CB06339FC7AAA93F60987831A0FA79829E244AFE92BD66590D8\
               C7F1BC281BADC619ED2C9762FDB913B052842E50E3989863",
    dkm: "2BD66826C397A19618E3133ACE96F6168A04EF9AFA53F2F07CECDA9E0F6139C37CC6512551F52300\
          6B74D501C5DD1AE502689ECE8A43CE7B3D866C7372176B1D5BC4A0B863F642351FD4822C79F0A8D9\
          7B03B09FA1393679149432798BEA545F70C663675E751A68AEEB7B238CA790229C7775E6A074BECD\
          FAAD324AC546EEB5D0A9480B1AA06B6F225CBFAC7447DE3D8D292B0BEB7D9A5B709C02946A10F879\
          9DD4E4B18C6D10CEDA39A82B9DAE01EFEBE6C31735590EF7D44E1C8DBBAD98DAFE620843065E5141\
          D7C57770234128599E3223139656DBB3D0C494FABA482AE9740FAA3D3957EFD9D90FD24144BC9B31\
          7C7955722426A6719D0095D068FD0B63469140D1EF9DDEFC43B2BCFFF971A08A7E67E75B8F0DED8C\
          4737175ABF04C32B906FE7D53E8C3B11B3829DB0082B73F44C042C285F079A3BD6C33F91559F3104\
          3E23BB0A79B83C93AAF1CFEAF6C5996E717869C2D7F6528C8ACAE6656A8430164886385441484107\
          261DE0D9A9B6B39A24812CCFA24C1F964AEAC69CE6D00541",
    dkm_child: "0B0D01A13515AC0727F7D90456D3D2FD9C1172096CDED4A20BDA43FC796184BAEB3A7F34FFC09C58\
                4DD9BEEBC7629A36A5D143DFB1C2931F369E6702769B6A01AA20B7B955C30481D7894DF2AEBAB0DD\
                669C3E1E168BE5F122F8A9D8A589F3C6C48EFC031129481E2DEA1F6FC10E07F3E39A1FCC3D660E28\
                9778458E752802501DBDE1EB0EDE3D2227DE7FAE3F265D66986B1AE4CF407EDC3A5168A6179ED8CA\
                2006ACC2D9104749C3E2231482374E5F0CE3DA3C8B8520D37F37092669FBB78EAA4CC818BE8CA319\
                35529E085BCE3830040F679883E3375C274CEF5BF5F36F34D8705B9EC48B4DC2FE9E3A269B41BED2\
                D659767726DC775404610ED1B285067D900D20A38D02192475D2934AE8E4C47B4CF5729A42FEC7AF\
                15C01AEB019069F2C87F2E6429D6CB2755384980DFAB9173C70AEDB30611A05FCD03078F2CAA8CB3\
                23452D6E899197992CF3B93343EEBAA1251E1D8F0B3664D0D0310217889510885D319C2BD8CD3A8F\
                D49848D8331F8C248E6C3C7B6E3D4E376F7BC71FF10D66D1",
    dkm_child_dh:
        "48E185DC18E52193E01ECA3C0D739C3070A73B89A4D0FAC7B40E4D51250EEAE7232C2031DAA700E3\
                   A2D570BA67ECA56F1DBE5DE5B96CD718FAF2FCC7EBCA08D1FEFA2DB5B024CC9A03F50EF310D43A3E\
                   66D53912AF846CFF6BB039CBFF37BDD1C2D329993A98D3FAF9026A32EBF6747E347115AA3C604D18\
                   7A25204407DB7E3FD4E1D28300E898028542C4B8D3C4EB26BD0ADF87439CCB7C0230351D38C92772\
                   CA234B887CA8F7667B4FBB9619151D75FECB2C30F570BC0EEDD5C6D89F39DE1A547AC99CFB7CF608\
                   AD4C56C83077E97CE850BE40344177CBEF2F22E37353E6A164A2683DE957A48754E8E74331A07503\
                   069E8ED44C68F27C0A414D582AA2DD7A66098E3C4D0BE5F0CC5FE9EBC042C3E794E53639A452F044\
                   9685DC3FC34C0EAE58AF6C7E862FAF0FC2E2C8F57C889E1DC19E8DAE2E92F828A3F01A1D3DBDCF3C\
                   7A0F61828E0E5C26E559E8D1320110D8477FF8A28D90BC9693BB99E10B7A3EA62E3559D7CC2E5427\
                   9012D2C3CC7FBA3349E098D6756BCC7EE62507B350DBF3A3",
    skeyseed_rekey:
        "1CC9237EBB1704D703952B6EDBE275CA51AC17E2E224F13E38F4C49F5FA9AF00F8ECB96FA0ECD6FF\
                     282C08A29D3E313AB4A4EE1022580118B8DEFF0CD8432A00",
};

fn check_acvp(case: &AcvpCase) {
    let prf = case.prf;
    let (ni, nr) = (unhex(case.ni), unhex(case.nr));
    let seed = skeyseed(prf, &ni, &nr, &unhex(case.gir));
    assert_eq!(seed.expose(), unhex(case.skeyseed).as_slice(), "SKEYSEED");

    let (spi_i, spi_r) = (unhex(case.spi_i), unhex(case.spi_r));
    let dkm = unhex(case.dkm);
    let out = prf
        .prf_plus(seed.expose(), &[&ni, &nr, &spi_i, &spi_r], dkm.len())
        .unwrap();
    assert_eq!(out.expose(), dkm.as_slice(), "DKM");

    // SK_d is the first PRF-length block of the DKM.
    let sk_d = &dkm[..prf.output_len()];
    let child = unhex(case.dkm_child);
    let out = prf.prf_plus(sk_d, &[&ni, &nr], child.len()).unwrap();
    assert_eq!(out.expose(), child.as_slice(), "DKM(Child_SA)");

    let gir_new = unhex(case.gir_new);
    let child_dh = unhex(case.dkm_child_dh);
    let out = prf
        .prf_plus(sk_d, &[&gir_new, &ni, &nr], child_dh.len())
        .unwrap();
    assert_eq!(out.expose(), child_dh.as_slice(), "DKM(Child_DH)");

    let rekey = rekey_skeyseed(prf, sk_d, &gir_new, &ni, &nr);
    assert_eq!(
        rekey.expose(),
        unhex(case.skeyseed_rekey).as_slice(),
        "SKEYSEED rekey"
    );
}

#[test]
fn acvp_ikev2_kdf_sha256() {
    check_acvp(&SHA256_SELFTEST);
}

#[test]
fn acvp_ikev2_kdf_sha512() {
    check_acvp(&SHA512_TC241);
}

fn spi(hex: &str) -> [u8; 8] {
    unhex(hex).try_into().unwrap()
}

#[test]
fn ike_sa_keys_are_cut_from_the_dkm_in_rfc_order() {
    // CBC + HMAC-SHA-256-128: SK_d 32 | SK_ai 32 | SK_ar 32 | SK_ei 16 |
    // SK_er 16 | SK_pi 32 | SK_pr 32 = 192 of the ACVP DKM's bytes.
    let case = &SHA256_SELFTEST;
    let suite = IkeSuite {
        encryption: Encryption::AesCbc128,
        integrity: Some(Integrity::HmacSha256_128),
        prf: Prf::HmacSha256,
        ke: KeGroup::Modp2048,
        addke: [None; 7],
    };
    let dkm = unhex(case.dkm);
    let keys = IkeSaKeys::derive(
        &suite,
        &unhex(case.skeyseed),
        &unhex(case.ni),
        &unhex(case.nr),
        &spi(case.spi_i),
        &spi(case.spi_r),
    )
    .unwrap();
    let cuts = [
        (keys.sk_d.expose(), 0, 32),
        (keys.sk_ai.expose(), 32, 64),
        (keys.sk_ar.expose(), 64, 96),
        (keys.sk_ei.expose(), 96, 112),
        (keys.sk_er.expose(), 112, 128),
        (keys.sk_pi.expose(), 128, 160),
        (keys.sk_pr.expose(), 160, 192),
    ];
    for (i, (key, from, to)) in cuts.into_iter().enumerate() {
        assert_eq!(key, &dkm[from..to], "key {i}");
    }

    // AES-256-GCM: no SK_a, SK_e is 32 key + 4 salt bytes.
    let suite = IkeSuite {
        encryption: Encryption::AesGcm16_256,
        integrity: None,
        ..suite
    };
    let keys = IkeSaKeys::derive(
        &suite,
        &unhex(case.skeyseed),
        &unhex(case.ni),
        &unhex(case.nr),
        &spi(case.spi_i),
        &spi(case.spi_r),
    )
    .unwrap();
    assert!(keys.sk_ai.is_empty() && keys.sk_ar.is_empty());
    assert_eq!(keys.sk_ei.expose(), &dkm[32..68]);
    assert_eq!(keys.sk_er.expose(), &dkm[68..104]);
    assert_eq!(keys.sk_pi.expose(), &dkm[104..136]);
    assert_eq!(keys.sk_pr.expose(), &dkm[136..168]);
}

#[test]
fn child_sa_keymat_is_initiator_first_key_then_salt() {
    let case = &SHA256_SELFTEST;
    let dkm = unhex(case.dkm);
    let sk_d = &dkm[..32];
    let (ni, nr) = (unhex(case.ni), unhex(case.nr));

    // Without PFS: KEYMAT = prf+(SK_d, Ni | Nr), the ACVP Child_SA DKM.
    let keymat = unhex(case.dkm_child);
    let keys =
        ChildSaKeys::derive(Prf::HmacSha256, sk_d, None, &ni, &nr, EspSuite::Aes128Gcm16).unwrap();
    // aes128gcm16: 16-byte key then 4-byte salt, initiator->responder first.
    assert_eq!(keys.initiator_to_responder.key.expose(), &keymat[0..20]);
    assert_eq!(keys.responder_to_initiator.key.expose(), &keymat[20..40]);
    assert!(keys.initiator_to_responder.auth_key.is_empty());

    // With PFS: prf+(SK_d, g^ir (new) | Ni | Nr), the ACVP Child_DH DKM.
    let keymat = unhex(case.dkm_child_dh);
    let gir_new = unhex(case.gir_new);
    let keys = ChildSaKeys::derive(
        Prf::HmacSha256,
        sk_d,
        Some(&gir_new),
        &ni,
        &nr,
        EspSuite::Aes256Sha256,
    )
    .unwrap();
    // aes256-sha256: encryption key 32 then HMAC key 32, per direction.
    assert_eq!(keys.initiator_to_responder.key.expose(), &keymat[0..32]);
    assert_eq!(
        keys.initiator_to_responder.auth_key.expose(),
        &keymat[32..64]
    );
    assert_eq!(keys.responder_to_initiator.key.expose(), &keymat[64..96]);
    assert_eq!(
        keys.responder_to_initiator.auth_key.expose(),
        &keymat[96..128]
    );

    // Sizes espgw's config expects for every suite.
    for suite in EspSuite::ALL {
        let k = ChildSaKeys::derive(Prf::HmacSha256, sk_d, None, &ni, &nr, suite).unwrap();
        assert_eq!(k.initiator_to_responder.key.len(), suite.key_len());
        assert_eq!(
            k.responder_to_initiator.auth_key.len(),
            suite.auth_key_len()
        );
    }
    assert_eq!(EspSuite::ChaCha20Poly1305.key_len(), 36);
    assert_eq!(EspSuite::Aes256Gcm16.key_len(), 36);
    assert_eq!(EspSuite::Aes128Sha1.auth_key_len(), 20);
}

#[test]
fn secrets_do_not_print() {
    let keys = ChildSaKeys::derive(
        Prf::HmacSha256,
        &[0x42; 32],
        None,
        b"ni",
        b"nr",
        EspSuite::Aes128Gcm16,
    )
    .unwrap();
    let printed = format!("{keys:?}");
    assert!(printed.contains("redacted"), "{printed}");
    let key_hex: String = keys
        .initiator_to_responder
        .key
        .expose()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert!(!printed.contains(&key_hex[..8]), "{printed}");
    // Nor as Rust's default byte-list Debug would.
    let as_list = format!("{:?}", &keys.initiator_to_responder.key.expose()[..4]);
    assert!(
        !printed.contains(&as_list[1..as_list.len() - 1]),
        "{printed}"
    );
}

/// RFC 9370 2.2.4: the SKEYSEED of an IKE SA rekeyed with additional key
/// exchanges is prf(SK_d (old), SK(0) | Ni | Nr | SK(1) | ... | SK(n)),
/// checked against HMAC computed here with ring (not through the crate's
/// PRF): every additional secret enters, after the nonces, in order; with
/// none it is RFC 7296's rekeyed SKEYSEED.
#[test]
fn rekey_skeyseed_with_additional_secrets_is_rfc_9370_2_2_4() {
    use espgw_ike::crypto::kdf::rekey_skeyseed_with_additional;
    let sk_d = unhex("0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f20");
    let sk0 = unhex("a0a1a2a3a4a5a6a7a8a9aaabacadaeafb0b1b2b3b4b5b6b7b8b9babbbcbdbebf");
    let sk1 = unhex("c0c1c2c3c4c5c6c7c8c9cacbcccdcecfd0d1d2d3d4d5d6d7d8d9dadbdcdddedf");
    let sk2 = unhex("e0e1e2e3e4e5e6e7e8e9eaebecedeeeff0f1f2f3f4f5f6f7f8f9fafbfcfdfeff");
    let ni = unhex("1111111111111111111111111111111111111111111111111111111111111111");
    let nr = unhex("2222222222222222222222222222222222222222222222222222222222222222");
    for (prf, alg) in [
        (Prf::HmacSha256, ring::hmac::HMAC_SHA256),
        (Prf::HmacSha384, ring::hmac::HMAC_SHA384),
        (Prf::HmacSha512, ring::hmac::HMAC_SHA512),
    ] {
        let independent = |parts: &[&[u8]]| {
            let key = ring::hmac::Key::new(alg, &sk_d);
            ring::hmac::sign(&key, &parts.concat()).as_ref().to_vec()
        };
        let with = |extra: &[&[u8]]| {
            rekey_skeyseed_with_additional(prf, &sk_d, &sk0, &ni, &nr, extra)
                .expose()
                .to_vec()
        };
        assert_eq!(with(&[]), independent(&[&sk0, &ni, &nr]));
        assert_eq!(
            with(&[]),
            rekey_skeyseed(prf, &sk_d, &sk0, &ni, &nr).expose().to_vec()
        );
        assert_eq!(with(&[&sk1]), independent(&[&sk0, &ni, &nr, &sk1]));
        assert_eq!(
            with(&[&sk1, &sk2]),
            independent(&[&sk0, &ni, &nr, &sk1, &sk2])
        );
        // Each secret matters, and so does their order.
        assert_ne!(with(&[&sk1]), with(&[]));
        assert_ne!(with(&[&sk1, &sk2]), with(&[&sk2, &sk1]));
    }
}

/// RFC 9370 2.2.4's CHILD_SA KEYMAT, prf+(SK_d, SK(0) | Ni | Nr | SK(1) |
/// ... | SK(n)), recomputed here with HMAC and RFC 7296's prf+ chain
/// (T1 = prf(K, S | 0x01), Tn = prf(K, Tn-1 | S | n)): every additional
/// secret enters after the nonces, in order; with none it is RFC 7296
/// 2.17's KEYMAT with PFS.
#[test]
fn child_keymat_with_additional_secrets_is_rfc_9370_2_2_4() {
    let sk_d = unhex("0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f20");
    let sk0 = unhex("a0a1a2a3a4a5a6a7a8a9aaabacadaeafb0b1b2b3b4b5b6b7b8b9babbbcbdbebf");
    let sk1 = unhex("c0c1c2c3c4c5c6c7c8c9cacbcccdcecfd0d1d2d3d4d5d6d7d8d9dadbdcdddedf");
    let sk2 = unhex("e0e1e2e3e4e5e6e7e8e9eaebecedeeeff0f1f2f3f4f5f6f7f8f9fafbfcfdfeff");
    let ni = unhex("1111111111111111111111111111111111111111111111111111111111111111");
    let nr = unhex("2222222222222222222222222222222222222222222222222222222222222222");
    for (prf, alg) in [
        (Prf::HmacSha256, ring::hmac::HMAC_SHA256),
        (Prf::HmacSha384, ring::hmac::HMAC_SHA384),
    ] {
        for suite in [EspSuite::Aes128Gcm16, EspSuite::Aes256Sha256] {
            let independent = |seed: &[&[u8]]| {
                let key = ring::hmac::Key::new(alg, &sk_d);
                let seed = seed.concat();
                let (mut out, mut t) = (Vec::new(), Vec::new());
                for n in 1u8.. {
                    t = ring::hmac::sign(&key, &[&t[..], &seed, &[n]].concat())
                        .as_ref()
                        .to_vec();
                    out.extend_from_slice(&t);
                    if out.len() >= 2 * (suite.key_len() + suite.auth_key_len()) {
                        break;
                    }
                }
                out
            };
            let with = |extra: &[&[u8]]| {
                let k = ChildSaKeys::derive_with_additional(
                    prf,
                    &sk_d,
                    Some(&sk0),
                    &ni,
                    &nr,
                    extra,
                    suite,
                )
                .unwrap();
                [
                    k.initiator_to_responder.key.expose(),
                    k.initiator_to_responder.auth_key.expose(),
                    k.responder_to_initiator.key.expose(),
                    k.responder_to_initiator.auth_key.expose(),
                ]
                .concat()
            };
            let len = 2 * (suite.key_len() + suite.auth_key_len());
            assert_eq!(with(&[]), independent(&[&sk0, &ni, &nr])[..len]);
            let plain = ChildSaKeys::derive(prf, &sk_d, Some(&sk0), &ni, &nr, suite).unwrap();
            assert_eq!(
                &with(&[])[..suite.key_len()],
                plain.initiator_to_responder.key.expose()
            );
            assert_eq!(with(&[&sk1]), independent(&[&sk0, &ni, &nr, &sk1])[..len]);
            assert_eq!(
                with(&[&sk1, &sk2]),
                independent(&[&sk0, &ni, &nr, &sk1, &sk2])[..len]
            );
            assert_ne!(with(&[&sk1]), with(&[]));
            assert_ne!(with(&[&sk1, &sk2]), with(&[&sk2, &sk1]));
        }
    }
}

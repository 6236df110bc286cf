//! The GCM specification's known answers (see the including file), for
//! any AES-GCM implementation the including test names `AesGcm` (with
//! `new`, `seal`, `open`) and `OpenError`: shared by crates/aesgcm and
//! dpdk/ipsec-mb so both run exactly the same cases.

use super::{AesGcm, OpenError};

pub(super) struct Case {
    pub(super) name: &'static str,
    pub(super) key: &'static str,
    pub(super) iv: &'static str,
    pub(super) aad: &'static str,
    pub(super) pt: &'static str,
    pub(super) ct: &'static str,
    pub(super) tag: &'static str,
}

const P64: &str = "d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a72\
                   1c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b391aafd255";
const P60: &str = "d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a72\
                   1c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b39";
const K128: &str = "feffe9928665731c6d6a8f9467308308";
const K256: &str = "feffe9928665731c6d6a8f9467308308feffe9928665731c6d6a8f9467308308";
const IV: &str = "cafebabefacedbaddecaf888";
const AAD20: &str = "feedfacedeadbeeffeedfacedeadbeefabaddad2";

pub(super) const CASES: &[Case] = &[
    Case {
        name: "TC1",
        key: "00000000000000000000000000000000",
        iv: "000000000000000000000000",
        aad: "",
        pt: "",
        ct: "",
        tag: "58e2fccefa7e3061367f1d57a4e7455a",
    },
    Case {
        name: "TC2",
        key: "00000000000000000000000000000000",
        iv: "000000000000000000000000",
        aad: "",
        pt: "00000000000000000000000000000000",
        ct: "0388dace60b6a392f328c2b971b2fe78",
        tag: "ab6e47d42cec13bdf53a67b21257bddf",
    },
    Case {
        name: "TC3",
        key: K128,
        iv: IV,
        aad: "",
        pt: P64,
        ct: "42831ec2217774244b7221b784d0d49ce3aa212f2c02a4e035c17e2329aca12e\
             21d514b25466931c7d8f6a5aac84aa051ba30b396a0aac973d58e091473f5985",
        tag: "4d5c2af327cd64a62cf35abd2ba6fab4",
    },
    Case {
        name: "TC4",
        key: K128,
        iv: IV,
        aad: AAD20,
        pt: P60,
        ct: "42831ec2217774244b7221b784d0d49ce3aa212f2c02a4e035c17e2329aca12e\
             21d514b25466931c7d8f6a5aac84aa051ba30b396a0aac973d58e091",
        tag: "5bc94fbc3221a5db94fae95ae7121a47",
    },
    Case {
        name: "TC13",
        key: "0000000000000000000000000000000000000000000000000000000000000000",
        iv: "000000000000000000000000",
        aad: "",
        pt: "",
        ct: "",
        tag: "530f8afbc74536b9a963b4f1c4cb738b",
    },
    Case {
        name: "TC14",
        key: "0000000000000000000000000000000000000000000000000000000000000000",
        iv: "000000000000000000000000",
        aad: "",
        pt: "00000000000000000000000000000000",
        ct: "cea7403d4d606b6e074ec5d3baf39d18",
        tag: "d0d1c8a799996bf0265b98b5d48ab919",
    },
    Case {
        name: "TC15",
        key: K256,
        iv: IV,
        aad: "",
        pt: P64,
        ct: "522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1aa\
             8cb08e48590dbb3da7b08b1056828838c5f61e6393ba7a0abcc9f662898015ad",
        tag: "b094dac5d93471bdec1a502270e3cc6c",
    },
    Case {
        name: "TC16",
        key: K256,
        iv: IV,
        aad: AAD20,
        pt: P60,
        ct: "522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1aa\
             8cb08e48590dbb3da7b08b1056828838c5f61e6393ba7a0abcc9f662",
        tag: "76fc6ece0f4e1768cddf8853bb2d551b",
    },
];

pub(super) fn hex(s: &str) -> Vec<u8> {
    let digits: Vec<u8> = s.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    digits
        .chunks(2)
        .map(|pair| u8::from_str_radix(std::str::from_utf8(pair).unwrap(), 16).unwrap())
        .collect()
}

#[test]
fn gcm_spec_test_cases_seal_and_open() {
    for case in CASES {
        let key = AesGcm::new(&hex(case.key)).expect("this CPU has AES-NI and PCLMULQDQ");
        let nonce: [u8; 12] = hex(case.iv).try_into().unwrap();
        let (aad, pt, ct) = (hex(case.aad), hex(case.pt), hex(case.ct));
        let tag: [u8; 16] = hex(case.tag).try_into().unwrap();

        let mut buf = pt.clone();
        let sealed_tag = key.seal(&nonce, &aad, &mut buf);
        assert_eq!(buf, ct, "{} ciphertext", case.name);
        assert_eq!(sealed_tag, tag, "{} tag", case.name);

        key.open(&nonce, &aad, &mut buf, &tag)
            .unwrap_or_else(|_| panic!("{} must open", case.name));
        assert_eq!(buf, pt, "{} plaintext", case.name);

        let mut bad_tag = tag;
        bad_tag[15] ^= 0x80;
        let mut buf = ct.clone();
        assert_eq!(
            key.open(&nonce, &aad, &mut buf, &bad_tag),
            Err(OpenError),
            "{}",
            case.name
        );
        assert_eq!(
            buf, ct,
            "{}: a failed open leaves the ciphertext",
            case.name
        );
    }
}

#[test]
fn only_16_and_32_byte_keys() {
    for len in [0, 1, 15, 17, 24, 31, 33, 64] {
        assert!(AesGcm::new(&vec![7u8; len]).is_none(), "{len}-byte key");
    }
    assert_eq!(AesGcm::new(&[7u8; 16]).unwrap().key_len(), 16);
    assert_eq!(AesGcm::new(&[7u8; 32]).unwrap().key_len(), 32);
}

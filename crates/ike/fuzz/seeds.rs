//! Seed messages for the fuzzer and the stable smoke test: published real
//! messages (see crates/ike/tests/message_known.rs for their sources) and
//! emitted messages that hold every payload type.

use espgw_ike::message::*;

fn hex(s: &str) -> Vec<u8> {
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).expect("hex"))
        .collect()
}

/// An IKE_SA_INIT request from Wireshark's sample captures (aes256gcm16, ecp256;
/// fragmentation, redirect and RFC 7427 hash algorithms announced).
const WIRESHARK_SA_INIT: &str = concat!(
    "89922c915f35570e000000000000000021202208000000000000012c22000028",
    "00000024010100030300000c01000014800e0100030000080200000500000008",
    "040000132800004800130000db253178440ce776a794133cb8b69e5eb0747335",
    "36570c64d7b630549c899c0712d828b37168500885e051024578afc75c101f73",
    "b8943cad62d74a30f2be1fca2b00002c09cb538b2c3dbd4d0bb0eec8d318cb80",
    "1a9b4715b207828d9b5ff1f4ec64ed58863707bcf14ccf052b000014eb4c1b78",
    "8afd4a9cb7730a68d56c53212b000014c61baca1f1a60cc10800000000000000",
    "2b0000184048b7d56ebce88525e7de7f00d6c2d3c0000000290000144048b7d5",
    "6ebce88525e7de7f00d6c2d3290000080000402e290000080000401600000010",
    "0000402f0001000200030004",
);

/// An encrypted IKE_AUTH request (AES-CBC, HMAC-SHA1-96; Android IKE tests).
const ENCRYPTED_IKE_AUTH: &str = concat!(
    "5f54bf6d8b48e6e1909232b3d1edcb5c2e20230800000001000000ec230000d0",
    "b9132b7bb9f658dfdc648e5017a6322a",
    "030c316ce55f365760d46426ce5cfc78bd1ed9abff63eb9594c1bd58",
    "46de333ecd3ea2b705d18293b130395300ba92a351041345",
    "0a10525cea51b2753b4e92b081fd78d995659a98f742278f",
    "f9b8fd3e21554865c15c79a5134d66b2744966089e416c60",
    "a274e44a9a3f084eb02f3bdce1e7de9de8d9a62773ab563b",
    "9a69ba1db03c752acb6136452b8a86c41addb4210d68c423",
    "efed80e26edca5fa3fe5d0a5ca9375ce332c474b93fb1fa3",
    "59eb4e81ae6e0f22abdad69ba8007d50",
);

/// The decrypted inner chain of [`ENCRYPTED_IKE_AUTH`] (IDi first), padded.
const IKE_AUTH_PLAINTEXT: &str = concat!(
    "2400000c010000000a50500d2700000c010000000a505050",
    "2100001c02000000df7c038aefaaa32d3f44b228b52a3327",
    "44dfb2c12c00002c00000028010304032ad4c0a20300000c",
    "0100000c800e008003000008030000020000000805000000",
    "2d00001801000000070000100000ffff00000000ffffffff",
    "2900001801000000070000100000ffff00000000ffffffff",
    "29000008000040000000000c0000400100000001",
    "000000000000000000000000000b",
);

fn header(exchange: ExchangeType, message_id: u32) -> HeaderRepr {
    HeaderRepr {
        spi_i: 0x0123456789abcdef,
        spi_r: 0xfedcba9876543210,
        exchange,
        initiator: true,
        response: false,
        version_flag: false,
        message_id,
    }
}

/// Every payload type but SK/SKF, in one chain.
pub fn every_payload() -> Vec<Payload> {
    vec![
        Payload::Sa(SecurityAssociation(vec![
            Proposal {
                number: 1,
                protocol: ProtocolId::ESP,
                spi: vec![1, 2, 3, 4],
                transforms: vec![
                    Transform::with_key_length(TransformType::ENCR, 20, 256),
                    Transform::new(TransformType::KE, 31),
                    Transform::new(TransformType::ESN, 1),
                ],
            },
            Proposal {
                number: 2,
                protocol: ProtocolId::ESP,
                spi: vec![1, 2, 3, 4],
                transforms: vec![
                    Transform::with_key_length(TransformType::ENCR, 12, 128),
                    Transform::new(TransformType::INTEG, 12),
                ],
            },
        ])),
        Payload::Ke(KeyExchange {
            group: 31,
            data: vec![0x55; 32],
        }),
        Payload::IdI(Identification::fqdn("left.example")),
        Payload::IdR(Identification::ip("2001:db8::1".parse().unwrap())),
        Payload::Cert(Certificate {
            encoding: CertEncoding::X509_SIGNATURE,
            data: vec![0x30, 0x03, 1, 2, 3],
        }),
        Payload::CertReq(CertificateRequest {
            encoding: CertEncoding::X509_SIGNATURE,
            authorities: vec![7; 20],
        }),
        Payload::Auth(Authentication {
            method: AuthMethod::DIGITAL_SIGNATURE,
            data: vec![9; 24],
        }),
        Payload::Nonce(Nonce(vec![3; 32])),
        Payload::Notify(Notify {
            protocol: ProtocolId::ESP,
            spi: vec![1, 2, 3, 4],
            notify_type: NotifyType::REKEY_SA,
            data: vec![],
        }),
        Payload::Notify(Notify::ike(NotifyType::COOKIE, vec![0xc0; 16])),
        Payload::Delete(Delete::Child {
            protocol: ProtocolId::ESP,
            spis: vec![0xdeadbeef],
        }),
        Payload::Delete(Delete::Ike),
        Payload::VendorId(Opaque(b"espgw".to_vec())),
        Payload::TsI(TrafficSelectors(vec![TrafficSelector::Ipv4 {
            ip_protocol: 6,
            start_port: 80,
            end_port: 443,
            start: "10.0.0.1".parse().unwrap(),
            end: "10.0.0.9".parse().unwrap(),
        }])),
        Payload::TsR(TrafficSelectors(vec![TrafficSelector::Ipv6 {
            ip_protocol: 0,
            start_port: 0,
            end_port: 65535,
            start: "2001:db8::".parse().unwrap(),
            end: "2001:db8::ff".parse().unwrap(),
        }])),
        Payload::Config(Config {
            cfg_type: ConfigType::REQUEST,
            attributes: vec![ConfigAttribute {
                attribute_type: 1,
                value: vec![],
            }],
        }),
        Payload::Eap(Opaque(vec![1, 1, 0, 5, 1])),
        Payload::Unrecognized {
            payload_type: PayloadType(200),
            body: vec![1, 2],
        },
    ]
}

/// Whole datagrams (mode 0 of the fuzz body, without the mode byte).
pub fn messages() -> Vec<Vec<u8>> {
    let emitted = [
        Message {
            header: header(ExchangeType::CREATE_CHILD_SA, 7),
            payloads: every_payload(),
        },
        Message {
            header: header(ExchangeType::IKE_AUTH, 1),
            payloads: vec![
                Payload::Notify(Notify::ike(NotifyType::COOKIE, vec![1; 8])),
                Payload::Encrypted(Encrypted {
                    next_payload: PayloadType::IDI,
                    body: vec![0xab; 16 + 32 + 16],
                }),
            ],
        },
        Message {
            header: header(ExchangeType::IKE_AUTH, 1),
            payloads: vec![Payload::Fragment(EncryptedFragment {
                next_payload: PayloadType::IDI,
                number: 1,
                total: 3,
                body: vec![0xcd; 8 + 17 + 16],
            })],
        },
    ];
    let mut out = vec![hex(WIRESHARK_SA_INIT), hex(ENCRYPTED_IKE_AUTH)];
    out.extend(emitted.iter().map(|m| m.emit().expect("seed emits")));
    out
}

/// Decrypted SK plaintexts with their first inner type (mode 1).
pub fn plaintexts() -> Vec<(PayloadType, Vec<u8>)> {
    let (first, chain) = emit_chain(&every_payload()).expect("seed chain emits");
    vec![
        (PayloadType::IDI, hex(IKE_AUTH_PLAINTEXT)),
        (first, encrypted::pad(&chain, 16)),
    ]
}

/// Fuzz inputs: the mode byte, then the seed.
pub fn fuzz_inputs() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for m in messages() {
        let mut mode0 = vec![0];
        mode0.extend(&m);
        out.push(mode0);
        let mut mode2 = vec![2, 0, 0, 0, 0];
        mode2.extend(&m);
        out.push(mode2);
    }
    for (first, p) in plaintexts() {
        let mut mode1 = vec![1, first.0];
        mode1.extend(p);
        out.push(mode1);
    }
    out
}

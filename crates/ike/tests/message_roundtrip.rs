//! parse(emit(x)) == x for arbitrary messages and SK inner chains, and
//! emit(parse(b)) == b for the bytes emit produced (the codec is canonical).

use espgw_ike::message::*;
use proptest::collection::vec;
use proptest::prelude::*;
use std::net::{Ipv4Addr, Ipv6Addr};

fn bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    vec(any::<u8>(), 0..=max)
}

fn transform() -> impl Strategy<Value = Transform> {
    let attribute = (
        0u16..0x8000,
        prop_oneof![
            any::<u16>().prop_map(AttributeValue::Short),
            bytes(8).prop_map(AttributeValue::Long)
        ],
    )
        .prop_map(|(t, value)| Attribute {
            attribute_type: AttributeType(t),
            value,
        });
    (any::<u8>(), any::<u16>(), vec(attribute, 0..3)).prop_map(|(t, id, attributes)| Transform {
        transform_type: TransformType(t),
        id,
        attributes,
    })
}

fn sa() -> impl Strategy<Value = SecurityAssociation> {
    let proposal = (any::<u8>(), any::<u8>(), bytes(8), vec(transform(), 0..6)).prop_map(
        |(number, protocol, spi, transforms)| Proposal {
            number,
            protocol: ProtocolId(protocol),
            spi,
            transforms,
        },
    );
    vec(proposal, 1..4).prop_map(SecurityAssociation)
}

fn identification() -> impl Strategy<Value = Identification> {
    prop_oneof![
        any::<[u8; 4]>().prop_map(|a| Identification::ip(Ipv4Addr::from(a).into())),
        any::<[u8; 16]>().prop_map(|a| Identification::ip(Ipv6Addr::from(a).into())),
        (
            any::<u8>().prop_filter("not an address type", |t| *t != 1 && *t != 5),
            bytes(40)
        )
            .prop_map(|(t, data)| Identification {
                id_type: IdType(t),
                data
            }),
    ]
}

fn selector() -> impl Strategy<Value = TrafficSelector> {
    prop_oneof![
        (
            any::<u8>(),
            any::<u16>(),
            any::<u16>(),
            any::<[u8; 4]>(),
            any::<[u8; 4]>()
        )
            .prop_map(|(p, sp, ep, a, z)| TrafficSelector::Ipv4 {
                ip_protocol: p,
                start_port: sp,
                end_port: ep,
                start: a.into(),
                end: z.into(),
            }),
        (
            any::<u8>(),
            any::<u16>(),
            any::<u16>(),
            any::<[u8; 16]>(),
            any::<[u8; 16]>()
        )
            .prop_map(|(p, sp, ep, a, z)| TrafficSelector::Ipv6 {
                ip_protocol: p,
                start_port: sp,
                end_port: ep,
                start: a.into(),
                end: z.into(),
            }),
        (
            any::<u8>().prop_filter("not an address range", |t| *t != 7 && *t != 8),
            any::<u8>(),
            bytes(12)
        )
            .prop_map(|(t, b, data)| TrafficSelector::Other {
                ts_type: TsType(t),
                second_byte: b,
                data
            }),
    ]
}

/// Any payload but SK/SKF (which may only be last, outside an SK).
fn plain_payload() -> impl Strategy<Value = Payload> {
    prop_oneof![
        sa().prop_map(Payload::Sa),
        (any::<u16>(), bytes(64))
            .prop_map(|(group, data)| Payload::Ke(KeyExchange { group, data })),
        identification().prop_map(Payload::IdI),
        identification().prop_map(Payload::IdR),
        (any::<u8>(), bytes(64)).prop_map(|(e, data)| Payload::Cert(Certificate {
            encoding: CertEncoding(e),
            data
        })),
        (any::<u8>(), bytes(60)).prop_map(|(e, authorities)| Payload::CertReq(
            CertificateRequest {
                encoding: CertEncoding(e),
                authorities
            }
        )),
        (any::<u8>(), bytes(64)).prop_map(|(m, data)| Payload::Auth(Authentication {
            method: AuthMethod(m),
            data
        })),
        vec(any::<u8>(), NONCE_MIN..=NONCE_MAX).prop_map(|n| Payload::Nonce(Nonce(n))),
        (any::<u8>(), bytes(16), any::<u16>(), bytes(32)).prop_map(|(p, spi, t, data)| {
            Payload::Notify(Notify {
                protocol: ProtocolId(p),
                spi,
                notify_type: NotifyType(t),
                data,
            })
        }),
        prop_oneof![
            Just(Delete::Ike),
            (
                prop_oneof![Just(ProtocolId::AH), Just(ProtocolId::ESP)],
                vec(any::<u32>(), 0..8)
            )
                .prop_map(|(protocol, spis)| Delete::Child { protocol, spis })
        ]
        .prop_map(Payload::Delete),
        bytes(32).prop_map(|b| Payload::VendorId(Opaque(b))),
        vec(selector(), 0..5).prop_map(|s| Payload::TsI(TrafficSelectors(s))),
        vec(selector(), 0..5).prop_map(|s| Payload::TsR(TrafficSelectors(s))),
        (any::<u8>(), vec((0u16..0x8000, bytes(8)), 0..5)).prop_map(|(t, attrs)| {
            Payload::Config(Config {
                cfg_type: ConfigType(t),
                attributes: attrs
                    .into_iter()
                    .map(|(attribute_type, value)| ConfigAttribute {
                        attribute_type,
                        value,
                    })
                    .collect(),
            })
        }),
        bytes(32).prop_map(|b| Payload::Eap(Opaque(b))),
        (
            any::<u8>().prop_filter("unknown type", |t| {
                *t != 0 && !(33..=48).contains(t) && *t != 53
            }),
            bytes(16)
        )
            .prop_map(|(t, body)| Payload::Unrecognized {
                payload_type: PayloadType(t),
                body
            }),
    ]
}

fn terminal_payload() -> impl Strategy<Value = Payload> {
    prop_oneof![
        (any::<u8>(), bytes(64)).prop_map(|(n, body)| Payload::Encrypted(Encrypted {
            next_payload: PayloadType(n),
            body
        })),
        (any::<u8>(), 1u16..=u16::MAX, any::<u16>(), bytes(64)).prop_map(
            |(n, total, number, body)| Payload::Fragment(EncryptedFragment {
                next_payload: PayloadType(n),
                number: 1 + number % total,
                total,
                body,
            })
        ),
    ]
}

fn header() -> impl Strategy<Value = HeaderRepr> {
    (
        any::<u64>(),
        any::<u64>(),
        any::<u8>(),
        any::<[bool; 3]>(),
        any::<u32>(),
    )
        .prop_map(|(spi_i, spi_r, x, [i, r, v], message_id)| HeaderRepr {
            spi_i,
            spi_r,
            exchange: ExchangeType(x),
            initiator: i,
            response: r,
            version_flag: v,
            message_id,
        })
}

fn message() -> impl Strategy<Value = Message> {
    (
        header(),
        vec(plain_payload(), 0..8),
        proptest::option::of(terminal_payload()),
    )
        .prop_map(|(header, mut payloads, last)| {
            payloads.extend(last);
            Message { header, payloads }
        })
}

proptest! {
    #[test]
    fn parse_of_emit_is_identity(m in message()) {
        let bytes = m.emit().unwrap();
        let parsed = Message::parse(&bytes).unwrap();
        prop_assert_eq!(&parsed, &m);
        // Canonical: emitting again gives the same bytes.
        prop_assert_eq!(parsed.emit().unwrap(), bytes);
    }

    #[test]
    fn sk_inner_chain_round_trips_through_padding(
        inner in vec(plain_payload(), 0..6),
        block in prop_oneof![Just(1usize), Just(8), Just(16)],
    ) {
        let (first, plain) = emit_chain(&inner).unwrap();
        let padded = encrypted::pad(&plain, block);
        prop_assert_eq!(padded.len() % block, 0);
        let unpadded = encrypted::strip_padding(PayloadType::SK, &padded).unwrap();
        let got = parse_chain(PayloadIter::inner(first, unpadded)).unwrap();
        prop_assert_eq!(got, inner);
    }
}

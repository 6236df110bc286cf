//! strongSwan proposal syntax and proposal selection.

use espgw_ike::crypto::proposal::{
    parse_esp_proposals, parse_ike_proposals, select_esp, select_ike, ChildSuite, IkeSuite,
    ProposalErrorReason,
};
use espgw_ike::crypto::transform::{
    Encryption, Esn, EspSuite, Integrity, KeGroup, Prf, Transform, TransformType,
};

fn ike_err(s: &str) -> ProposalErrorReason {
    parse_ike_proposals(s).unwrap_err().reason
}

fn esp_err(s: &str) -> ProposalErrorReason {
    parse_esp_proposals(s).unwrap_err().reason
}

#[test]
fn parses_the_brief_example() {
    let p = parse_ike_proposals("aes256gcm16-prfsha384-ecp384,aes128-sha256-modp2048").unwrap();
    assert_eq!(p.len(), 2);
    assert_eq!(p[0].encryption, vec![Encryption::AesGcm16_256]);
    assert!(p[0].integrity.is_empty());
    assert_eq!(p[0].prf, vec![Prf::HmacSha384]);
    assert_eq!(p[0].ke, vec![KeGroup::Ecp384]);
    assert_eq!(p[1].encryption, vec![Encryption::AesCbc128]);
    assert_eq!(p[1].integrity, vec![Integrity::HmacSha256_128]);
    // No PRF given: derived from the integrity algorithm, as strongSwan does.
    assert_eq!(p[1].prf, vec![Prf::HmacSha256]);
    assert_eq!(p[1].ke, vec![KeGroup::Modp2048]);
}

#[test]
fn every_keyword_and_alias() {
    let p = parse_ike_proposals(
        "aes128-aes256-sha256-sha384-sha512-prfsha256-prfsha384-prfsha512-x25519-ecp256-ecp384-modp2048",
    )
    .unwrap();
    assert_eq!(p[0].encryption.len(), 2);
    assert_eq!(p[0].integrity.len(), 3);
    assert_eq!(p[0].prf.len(), 3);
    // Alternatives keep the operator's order (our preference).
    assert_eq!(
        p[0].ke,
        vec![
            KeGroup::Curve25519,
            KeGroup::Ecp256,
            KeGroup::Ecp384,
            KeGroup::Modp2048
        ]
    );
    let p = parse_ike_proposals("AES128GCM128-aes256gcm16-chacha20poly1305-PRFSHA2_256-curve25519")
        .unwrap();
    assert_eq!(
        p[0].encryption,
        vec![
            Encryption::AesGcm16_128,
            Encryption::AesGcm16_256,
            Encryption::ChaCha20Poly1305
        ]
    );
    assert_eq!(p[0].ke, vec![KeGroup::Curve25519]);
    let e = parse_esp_proposals("aes128gcm16-x25519-esn, aes128gcm16, aes128-sha1-noesn").unwrap();
    assert_eq!(e[0].ke, vec![KeGroup::Curve25519]);
    assert_eq!(e[0].esn, vec![Esn::Yes]);
    assert!(e[1].ke.is_empty());
    assert_eq!(e[1].esn, vec![Esn::No], "noesn is the default");
    assert_eq!(e[2].integrity, vec![Integrity::HmacSha1_96]);
}

#[test]
fn clear_errors() {
    assert_eq!(
        ike_err("aes128-sha256-modp1024"),
        ProposalErrorReason::UnknownKeyword("modp1024".into())
    );
    assert_eq!(ike_err(""), ProposalErrorReason::Empty);
    assert_eq!(ike_err("aes128-sha256-x25519,"), ProposalErrorReason::Empty);
    assert_eq!(
        ike_err("sha256-x25519"),
        ProposalErrorReason::MissingEncryption
    );
    assert_eq!(
        ike_err("aes128-x25519"),
        ProposalErrorReason::MissingIntegrity
    );
    assert_eq!(
        ike_err("aes128gcm16-x25519"),
        ProposalErrorReason::MissingPrf
    );
    assert_eq!(
        ike_err("aes128gcm16-prfsha256"),
        ProposalErrorReason::MissingKeyExchange
    );
    assert_eq!(
        ike_err("aes128gcm16-aes128-sha256-x25519"),
        ProposalErrorReason::MixedAeadAndCbc
    );
    assert_eq!(
        ike_err("aes128gcm16-sha256-prfsha256-x25519"),
        ProposalErrorReason::IntegrityWithAead
    );
    // Kind-specific keywords.
    assert_eq!(
        ike_err("aes128-sha1-x25519"),
        ProposalErrorReason::UnknownKeyword("sha1".into())
    );
    assert_eq!(
        ike_err("aes128gcm16-prfsha256-x25519-esn"),
        ProposalErrorReason::UnknownKeyword("esn".into())
    );
    assert_eq!(
        esp_err("aes128gcm16-prfsha256"),
        ProposalErrorReason::UnknownKeyword("prfsha256".into())
    );
    // The data plane has no aes256-sha1.
    assert_eq!(esp_err("aes256-sha1"), ProposalErrorReason::NoEspSuite);

    // The message names the proposal and the keyword.
    let err =
        parse_ike_proposals("aes256gcm16-prfsha384-ecp384,aes128-sha256-modp1024").unwrap_err();
    let text = err.to_string();
    assert!(
        text.starts_with("proposal 2 \"aes128-sha256-modp1024\": unknown algorithm \"modp1024\""),
        "{text}"
    );
}

fn offered(transforms: &[(TransformType, u16, Option<u16>)]) -> Vec<Transform> {
    transforms
        .iter()
        .map(|&(kind, id, key_length)| Transform {
            kind,
            id,
            key_length,
        })
        .collect()
}

use TransformType::{Encryption as E, Esn as N, Integrity as I, KeyExchange as K, Prf as P};

#[test]
fn responder_takes_the_first_initiator_proposal_it_accepts() {
    let ours = parse_ike_proposals("aes256gcm16-prfsha384-ecp384,aes128-sha256-modp2048").unwrap();
    // Initiator proposal 1: 3DES (3) only -> unacceptable. Proposal 2:
    // AES-CBC-128 with SHA-256 and group 14 -> our second proposal.
    // Proposal 3 would match our first, but comes later.
    let p1 = offered(&[(E, 3, None), (P, 5, None), (I, 12, None), (K, 14, None)]);
    let p2 = offered(&[
        (E, 12, Some(128)),
        (P, 5, None),
        (I, 12, None),
        (K, 14, None),
    ]);
    let p3 = offered(&[(E, 20, Some(256)), (P, 6, None), (K, 20, None)]);
    let (num, suite) = select_ike(&ours, [(1, &p1[..]), (2, &p2[..]), (3, &p3[..])]).unwrap();
    assert_eq!(num, 2);
    assert_eq!(
        suite,
        IkeSuite {
            encryption: Encryption::AesCbc128,
            integrity: Some(Integrity::HmacSha256_128),
            prf: Prf::HmacSha256,
            ke: KeGroup::Modp2048,
            addke: [None; 7],
        }
    );
    // The answer is a single-choice proposal the initiator accepts back.
    assert_eq!(ours[1].select(&suite.transforms()), Some(suite));
}

#[test]
fn within_a_proposal_the_initiators_order_wins() {
    let ours =
        parse_ike_proposals("aes128gcm16-aes256gcm16-prfsha256-prfsha384-x25519-ecp256").unwrap();
    let p = offered(&[
        (E, 20, Some(256)),
        (E, 20, Some(128)),
        (P, 6, None),
        (P, 5, None),
        (K, 19, None),
        (K, 31, None),
    ]);
    let suite = ours[0].select(&p).unwrap();
    assert_eq!(suite.encryption, Encryption::AesGcm16_256);
    assert_eq!(suite.prf, Prf::HmacSha384);
    assert_eq!(suite.ke, KeGroup::Ecp256);
}

#[test]
fn key_length_attribute_must_match() {
    let ours = parse_ike_proposals("aes256-sha256-x25519").unwrap();
    // AES-CBC without a Key Length attribute, or with 192 bits: refused.
    for bad in [None, Some(192), Some(128)] {
        let p = offered(&[(E, 12, bad), (P, 5, None), (I, 12, None), (K, 31, None)]);
        assert_eq!(ours[0].select(&p), None, "{bad:?}");
    }
    let p = offered(&[
        (E, 12, Some(256)),
        (P, 5, None),
        (I, 12, None),
        (K, 31, None),
    ]);
    assert!(ours[0].select(&p).is_some());
    // ChaCha20-Poly1305 must come without one.
    let ours = parse_ike_proposals("chacha20poly1305-prfsha256-x25519").unwrap();
    let with = offered(&[(E, 28, Some(256)), (P, 5, None), (K, 31, None)]);
    let without = offered(&[(E, 28, None), (P, 5, None), (K, 31, None)]);
    assert_eq!(ours[0].select(&with), None);
    assert!(ours[0].select(&without).is_some());
}

#[test]
fn incomplete_or_unknown_type_proposals_are_refused() {
    let ours = parse_ike_proposals("aes128-sha256-x25519").unwrap();
    // Missing integrity with a CBC cipher.
    let p = offered(&[(E, 12, Some(128)), (P, 5, None), (K, 31, None)]);
    assert_eq!(ours[0].select(&p), None);
    // A transform type nobody defined (13) makes the proposal unacceptable.
    let p = offered(&[
        (E, 12, Some(128)),
        (P, 5, None),
        (I, 12, None),
        (K, 31, None),
        (TransformType::Other(13), 1, None),
    ]);
    assert_eq!(ours[0].select(&p), None);
    // A required RFC 9370 additional key exchange (ADDKE1 = type 6) that
    // this proposal does not have: refused, never taken without it.
    let p = offered(&[
        (E, 12, Some(128)),
        (P, 5, None),
        (I, 12, None),
        (K, 31, None),
        (TransformType::from_u8(6), 36, None),
    ]);
    assert_eq!(ours[0].select(&p), None);
    // AEAD offered together with a real integrity transform.
    let ours = parse_ike_proposals("aes128gcm16-prfsha256-x25519").unwrap();
    let p = offered(&[
        (E, 20, Some(128)),
        (P, 5, None),
        (I, 12, None),
        (K, 31, None),
    ]);
    assert_eq!(ours[0].select(&p), None);
}

#[test]
fn esp_selection_maps_to_data_plane_suites() {
    let ours = parse_esp_proposals("aes128gcm16-esn-noesn,aes128-aes256-sha1-sha256").unwrap();
    // aes256 + sha1 is not a suite: skip to aes256 + sha256.
    let p = offered(&[
        (E, 12, Some(256)),
        (I, 2, None),
        (I, 12, None),
        (N, 0, None),
    ]);
    let (_, s) = select_esp(&ours, [(1, &p[..])]).unwrap();
    assert_eq!(s.esp, EspSuite::Aes256Sha256);
    assert_eq!(s.esp.config_name(), "aes256-sha256");
    let p = offered(&[(E, 20, Some(128)), (N, 1, None), (N, 0, None)]);
    let (_, s) = select_esp(&ours, [(1, &p[..])]).unwrap();
    assert_eq!(
        s,
        ChildSuite {
            esp: EspSuite::Aes128Gcm16,
            ke: None,
            esn: Esn::Yes,
            addke: [None; 7],
        }
    );
    assert_eq!(ours[0].select(&s.transforms()), Some(s));
    // The ESN transform is mandatory.
    let p = offered(&[(E, 20, Some(128))]);
    assert_eq!(ours[0].select(&p), None);
    // We want noesn only; the peer insists on ESN.
    let noesn = parse_esp_proposals("aes128gcm16").unwrap();
    let p = offered(&[(E, 20, Some(128)), (N, 1, None)]);
    assert_eq!(noesn[0].select(&p), None);
}

#[test]
fn esp_pfs_groups() {
    let pfs = parse_esp_proposals("aes128gcm16-x25519").unwrap();
    let nopfs = parse_esp_proposals("aes128gcm16").unwrap();
    let with_ke = offered(&[(E, 20, Some(128)), (K, 31, None), (N, 0, None)]);
    let with_none = offered(&[
        (E, 20, Some(128)),
        (K, 31, None),
        (K, 0, None),
        (N, 0, None),
    ]);
    let without = offered(&[(E, 20, Some(128)), (N, 0, None)]);
    assert_eq!(
        pfs[0].select(&with_ke).unwrap().ke,
        Some(KeGroup::Curve25519)
    );
    assert_eq!(pfs[0].select(&without), None, "we require PFS");
    assert_eq!(nopfs[0].select(&with_ke), None, "peer requires PFS");
    assert_eq!(nopfs[0].select(&with_none).unwrap().ke, None);
    assert_eq!(nopfs[0].select(&without).unwrap().ke, None);
    // Without groups no KE transform is offered.
    assert!(nopfs[0]
        .transforms()
        .iter()
        .all(|t| t.kind != TransformType::KeyExchange));
}

#[test]
fn transforms_carry_the_iana_ids() {
    let p = parse_ike_proposals("aes256-sha512-prfsha512-ecp384").unwrap();
    let t = p[0].transforms();
    assert!(t.contains(&Transform {
        kind: E,
        id: 12,
        key_length: Some(256)
    }));
    assert!(t.contains(&Transform::new(I, 14)));
    assert!(t.contains(&Transform::new(P, 7)));
    assert!(t.contains(&Transform::new(K, 20)));
    for (g, id) in [
        (KeGroup::Modp2048, 14),
        (KeGroup::Ecp256, 19),
        (KeGroup::Ecp384, 20),
        (KeGroup::Curve25519, 31),
    ] {
        assert_eq!(g.id(), id);
        assert_eq!(KeGroup::from_id(id), Some(g));
    }
    assert_eq!(Encryption::ChaCha20Poly1305.transform().id, 28);
    assert_eq!(Encryption::AesGcm16_128.transform().id, 20);
    assert_eq!(Integrity::HmacSha384_192.id(), 13);
    assert_eq!(TransformType::from_u8(5), N);
    assert_eq!(TransformType::from_u8(9).to_u8(), 9);
}

const A: fn(u8) -> TransformType = TransformType::AdditionalKeyExchange;

#[test]
fn additional_key_exchanges_parse_as_strongswan_6_writes_them() {
    let p = parse_ike_proposals("aes256gcm16-prfsha384-x25519-ke1_mlkem768").unwrap();
    assert_eq!(p[0].ke, vec![KeGroup::Curve25519]);
    assert_eq!(p[0].addke[0], vec![Some(KeGroup::MlKem768)]);
    assert!(p[0].addke[1..].iter().all(Vec::is_empty));
    // Transform types 6..12 on the wire, ML-KEM ids 35/36/37.
    assert_eq!(TransformType::AdditionalKeyExchange(1).to_u8(), 6);
    assert_eq!(TransformType::AdditionalKeyExchange(7).to_u8(), 12);
    assert_eq!(
        TransformType::from_u8(9),
        TransformType::AdditionalKeyExchange(4)
    );
    assert_eq!(TransformType::from_u8(13), TransformType::Other(13));
    assert_eq!(
        [
            KeGroup::MlKem512.id(),
            KeGroup::MlKem768.id(),
            KeGroup::MlKem1024.id()
        ],
        [35, 36, 37]
    );
    assert!(p[0]
        .transforms()
        .contains(&Transform::new(TransformType::from_u8(6), 36)));
    let p = parse_ike_proposals(
        "aes128-sha256-ecp256-ke1_mlkem768-ke1_mlkem1024-ke1_none-ke2_mlkem512-ke7_x25519",
    )
    .unwrap();
    assert_eq!(
        p[0].addke[0],
        vec![Some(KeGroup::MlKem768), Some(KeGroup::MlKem1024), None]
    );
    assert_eq!(p[0].addke[1], vec![Some(KeGroup::MlKem512)]);
    assert_eq!(p[0].addke[6], vec![Some(KeGroup::Curve25519)]);
    let t = p[0].transforms();
    assert!(t.contains(&Transform::new(A(1), 0)));
    assert!(t.contains(&Transform::new(A(7), 31)));
    // Errors: ML-KEM as the IKE_SA_INIT method, ke8_, unknown methods,
    // ADDKE in an ESP proposal without a PFS group.
    assert_eq!(
        ike_err("aes128gcm16-prfsha256-mlkem768"),
        ProposalErrorReason::KemAsPrimary("mlkem768".into())
    );
    assert!(matches!(
        ike_err("aes128gcm16-prfsha256-x25519-ke8_mlkem768"),
        ProposalErrorReason::UnknownKeyword(_)
    ));
    assert!(matches!(
        ike_err("aes128gcm16-prfsha256-x25519-ke1_mlkem999"),
        ProposalErrorReason::UnknownKeyword(_)
    ));
    assert_eq!(
        esp_err("aes128gcm16-ke1_mlkem768"),
        ProposalErrorReason::AddKeWithoutPfs("ke1_mlkem768".into())
    );
    let msg = parse_esp_proposals("aes128gcm16-ke1_mlkem768")
        .unwrap_err()
        .to_string();
    assert!(msg.contains("aes128gcm16-x25519-ke1_mlkem768"), "{msg}");
    // NONE alone needs no PFS group; with one, ESP takes ADDKEs.
    assert!(parse_esp_proposals("aes128gcm16-ke1_none").is_ok());
    let esp = parse_esp_proposals("aes128gcm16-x25519-ke1_mlkem768-ke1_none").unwrap();
    assert_eq!(esp[0].addke[0], vec![Some(KeGroup::MlKem768), None]);
    let t = esp[0].transforms();
    assert!(t.contains(&Transform::new(A(1), 36)));
    assert!(t.contains(&Transform::new(A(1), 0)));
    let msg = parse_ike_proposals("aes128gcm16-prfsha256-mlkem768")
        .unwrap_err()
        .to_string();
    assert!(msg.contains("ke1_mlkem768"), "{msg}");
}

#[test]
fn additional_key_exchange_selection() {
    const E: TransformType = TransformType::Encryption;
    const P: TransformType = TransformType::Prf;
    const K: TransformType = TransformType::KeyExchange;
    let base = [(E, 20, Some(256)), (P, 6, None), (K, 31, None)];
    let with = |extra: &[(TransformType, u16, Option<u16>)]| {
        let mut v = base.to_vec();
        v.extend_from_slice(extra);
        offered(&v)
    };
    let required = parse_ike_proposals("aes256gcm16-prfsha384-x25519-ke1_mlkem768").unwrap();
    let optional =
        parse_ike_proposals("aes256gcm16-prfsha384-x25519-ke1_mlkem768-ke1_none").unwrap();
    let classic = parse_ike_proposals("aes256gcm16-prfsha384-x25519").unwrap();
    // Both require it: chosen.
    let s = required[0].select(&with(&[(A(1), 36, None)])).unwrap();
    assert_eq!(s.addke[0], Some(KeGroup::MlKem768));
    assert_eq!(
        s.additional_exchanges().collect::<Vec<_>>(),
        vec![KeGroup::MlKem768]
    );
    assert!(s.transforms().contains(&Transform::new(A(1), 36)));
    // The peer prefers NONE: we require ML-KEM, so its next choice counts.
    let s = required[0]
        .select(&with(&[(A(1), 0, None), (A(1), 36, None)]))
        .unwrap();
    assert_eq!(s.addke[0], Some(KeGroup::MlKem768));
    // Peer without ADDKE: refused when we require it, accepted when optional.
    assert_eq!(required[0].select(&with(&[])), None);
    assert_eq!(optional[0].select(&with(&[])).unwrap().addke, [None; 7]);
    // Peer requires ADDKE, we have none configured: refused; the peer
    // makes it optional: NONE chosen, and the answer carries no ADDKE.
    assert_eq!(classic[0].select(&with(&[(A(1), 36, None)])), None);
    let s = classic[0]
        .select(&with(&[(A(1), 36, None), (A(1), 0, None)]))
        .unwrap();
    assert_eq!(s.addke, [None; 7]);
    assert!(!s.transforms().iter().any(|t| t.kind == A(1)));
    // A method mismatch: refused; ADDKE2 must match too.
    assert_eq!(required[0].select(&with(&[(A(1), 37, None)])), None);
    assert_eq!(
        required[0].select(&with(&[(A(1), 36, None), (A(2), 35, None)])),
        None
    );
    // Attributes on an ADDKE transform are not ours to accept.
    assert_eq!(required[0].select(&with(&[(A(1), 36, Some(128))])), None);
    // ESP offers without ADDKEs of ours: ADDKE only with NONE.
    let esp = parse_esp_proposals("aes128gcm16").unwrap();
    let esp_offer = |extra: &[(TransformType, u16, Option<u16>)]| {
        let mut v = vec![(E, 20, Some(128)), (TransformType::Esn, 0, None)];
        v.extend_from_slice(extra);
        offered(&v)
    };
    assert!(esp[0].select(&esp_offer(&[])).is_some());
    assert!(esp[0].select(&esp_offer(&[(A(1), 36, None)])).is_none());
    assert!(esp[0]
        .select(&esp_offer(&[(A(1), 36, None), (A(1), 0, None)]))
        .is_some());
    // ESP with ADDKEs (RFC 9370 2.2.4), as for IKE: required, optional.
    let esp_required = parse_esp_proposals("aes128gcm16-x25519-ke1_mlkem768").unwrap();
    let esp_optional = parse_esp_proposals("aes128gcm16-x25519-ke1_mlkem768-ke1_none").unwrap();
    let pfs = [(K, 31, None), (A(1), 36, None)];
    let s = esp_required[0].select(&esp_offer(&pfs)).unwrap();
    assert_eq!(s.ke, Some(KeGroup::Curve25519));
    assert_eq!(
        s.additional_exchanges().collect::<Vec<_>>(),
        vec![KeGroup::MlKem768]
    );
    let answer = s.transforms();
    assert!(answer.contains(&Transform::new(A(1), 36)));
    assert_eq!(esp_required[0].select(&answer), Some(s));
    // The peer without ML-KEM: refused when required, NONE when optional.
    assert_eq!(esp_required[0].select(&esp_offer(&[(K, 31, None)])), None);
    let s = esp_optional[0]
        .select(&esp_offer(&[(K, 31, None)]))
        .unwrap();
    assert_eq!(s.addke, [None; 7]);
    assert!(!s.transforms().iter().any(|t| t.kind == A(1)));
    // A method mismatch is refused.
    assert_eq!(
        esp_required[0].select(&esp_offer(&[(K, 31, None), (A(1), 37, None)])),
        None
    );
}

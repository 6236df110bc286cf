//! Recorded exchanges through the engine's own code, for known-answer
//! tests against strongSwan (crates/ike/tests/engine_known.rs).

use super::*;

/// What [`replay_psk_ike_auth`] found.
pub struct Replay {
    /// The IKE SA keys derived from the recorded messages and g^ir.
    pub keys: IkeSaKeys,
    /// The first CHILD_SA as the initiator's engine would install it.
    pub child: ChildSa,
    /// Our AUTH for the initiator's ID equals the recorded one.
    pub auth_i_equal: bool,
    /// Our AUTH for the responder's ID equals the recorded one.
    pub auth_r_equal: bool,
}

/// Runs a recorded PSK exchange (IKE_SA_INIT and IKE_AUTH pairs, as
/// captured from strongSwan) through the engine's own parsing, proposal
/// selection, key derivation, SK opening, AUTH verification and CHILD_SA
/// code, with g^ir given (no peer logs its private value, so a live
/// replay is impossible). `conn` is the initiator's connection.
pub fn replay_psk_ike_auth(
    conn: &Connection,
    init_request: &[u8],
    init_response: &[u8],
    auth_request: &[u8],
    auth_response: &[u8],
    shared_secret: &[u8],
) -> Result<Replay, EngineError> {
    let initiator = recorded_sa(
        conn,
        Role::Initiator,
        init_request,
        init_response,
        shared_secret,
    )?;
    let responder = recorded_sa(
        conn,
        Role::Responder,
        init_request,
        init_response,
        shared_secret,
    )?;
    // The responder's view opens and checks the request, the initiator's
    // the response: both with the one PSK, as each charon did.
    let request = wire::open(
        auth_request,
        responder
            .sk_in
            .as_ref()
            .ok_or(EngineError::Protocol("no keys"))?,
    )?;
    let response = wire::open(
        auth_response,
        initiator
            .sk_in
            .as_ref()
            .ok_or(EngineError::Protocol("no keys"))?,
    )?;
    let mut responder_conn = conn.clone();
    responder_conn.remote_id = None;
    if let Some(Payload::IdR(r)) = request.find(PayloadType::IDR) {
        // The responder is whom the initiator names.
        responder_conn.local_id = r.clone();
    }
    responder
        .verify_peer(&responder_conn, &request, None)
        .map_err(|_| EngineError::Protocol("initiator AUTH does not verify"))?;
    let mut initiator_conn = conn.clone();
    initiator_conn.remote_id = None;
    initiator
        .verify_peer(&initiator_conn, &response, None)
        .map_err(|_| EngineError::Protocol("responder AUTH does not verify"))?;
    let auth_of = |inner: &Inner| match inner.find(PayloadType::AUTH) {
        Some(Payload::Auth(a)) => a.data.clone(),
        _ => Vec::new(),
    };
    let id_body = |inner: &Inner, t| inner.id_body(t).map(<[u8]>::to_vec).unwrap_or_default();
    let auth_i_equal = initiator
        .our_auth(conn, &id_body(&request, PayloadType::IDI))?
        .data
        == auth_of(&request);
    let auth_r_equal = responder
        .our_auth(conn, &id_body(&response, PayloadType::IDR))?
        .data
        == auth_of(&response);
    let mut initiator = initiator;
    initiator.child_spi = match request.find(PayloadType::SA) {
        Some(Payload::Sa(sa)) => wire::offered(sa, ProtocolId::ESP)
            .first()
            .and_then(|(_, _, spi)| <[u8; 4]>::try_from(&spi[..]).ok())
            .map(u32::from_be_bytes)
            .ok_or(EngineError::Protocol("no ESP SPI"))?,
        _ => return Err(EngineError::Protocol("no SA in IKE_AUTH request")),
    };
    let child = initiator
        .initiator_child(conn, &response)
        .map_err(|_| EngineError::Protocol("CHILD_SA refused"))?;
    let keys = initiator
        .keys
        .take()
        .ok_or(EngineError::Protocol("no keys"))?;
    Ok(Replay {
        keys,
        child,
        auth_i_equal,
        auth_r_equal,
    })
}

/// Reassembles recorded SKF fragments (in the order given) with the
/// engine's own fragment opening and reassembly, the IKE SA keys derived
/// from the recorded IKE_SA_INIT pair and g^ir. `from_initiator`: whose
/// fragments they are. Returns the first inner payload type and the
/// reassembled inner chain, for comparison with what charon logged.
pub fn replay_fragments(
    conn: &Connection,
    init_request: &[u8],
    init_response: &[u8],
    shared_secret: &[u8],
    fragments: &[&[u8]],
    from_initiator: bool,
) -> Result<(u8, Vec<u8>), EngineError> {
    // The receiving side's view.
    let role = if from_initiator {
        Role::Responder
    } else {
        Role::Initiator
    };
    let sa = recorded_sa(conn, role, init_request, init_response, shared_secret)?;
    let sk = sa.sk_in.as_ref().ok_or(EngineError::Protocol("no keys"))?;
    let mut slot = None;
    for f in fragments {
        let (header, _) = Message::parse_raw(f)?;
        let opened = wire::open_fragment(f, sk)?;
        if let fragment::Added::Complete((first, plain)) =
            fragment::Reassembly::add(&mut slot, header.message_id, opened)
        {
            return Ok((first.0, plain));
        }
    }
    Err(EngineError::Protocol("fragments incomplete"))
}

/// `role`'s view of the IKE SA that a recorded IKE_SA_INIT pair and g^ir
/// set up: the suite chosen from `conn`'s proposals, the nonces and the
/// derived keys.
pub(super) fn recorded_sa(
    conn: &Connection,
    role: Role,
    init_request: &[u8],
    init_response: &[u8],
    shared_secret: &[u8],
) -> Result<IkeSa, EngineError> {
    let req = Message::parse(init_request)?;
    let resp = Message::parse(init_response)?;
    let chosen = match resp.find(PayloadType::SA) {
        Some(Payload::Sa(sa)) => wire::offered(sa, ProtocolId::IKE),
        _ => return Err(EngineError::Protocol("no SA")),
    };
    let suite = chosen
        .first()
        .and_then(|(_, t, _)| conn.proposals.iter().find_map(|p| p.select(t)))
        .ok_or(EngineError::Protocol("no acceptable proposal"))?;
    let mut sa = IkeSa::new(0, 0, role, conn.local, conn.remote);
    sa.spi_i = resp.header.spi_i;
    sa.spi_r = resp.header.spi_r;
    sa.ni = nonce_of(&req.payloads).ok_or(EngineError::Protocol("no Ni"))?;
    sa.nr = nonce_of(&resp.payloads).ok_or(EngineError::Protocol("no Nr"))?;
    sa.init_request = init_request.to_vec();
    sa.init_response = init_response.to_vec();
    sa.suite = Some(suite);
    sa.derive_ike_keys(&crypto::SecretBytes::from_slice(shared_secret))?;
    Ok(sa)
}

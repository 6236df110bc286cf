//! Authentication in IKE_AUTH, PSK or certificates (RFC 7296 2.15, RFC
//! 7427), and the responder's choice of connection by the peer's identity.
//!
//! Certificates: we announce N(SIGNATURE_HASH_ALGORITHMS) in IKE_SA_INIT
//! (the responder only in answer to the initiator's), the responder sends
//! CERTREQ in its IKE_SA_INIT response and the initiator in its IKE_AUTH
//! request (SHA-1 hashes of our CAs' public keys). We always send our
//! certificate (and the intermediates configured after it) when we
//! authenticate with one, whether or not the peer asked with a CERTREQ:
//! the peer cannot verify us without it, and a CERTREQ naming other CAs
//! would not make another certificate of ours appear.

use super::*;
use crate::crypto::cert::{self, CertError};
use crate::crypto::signature::{self, SUPPORTED_HASHES};
use crate::message::{CertEncoding, Certificate, CertificateRequest};

use super::super::config::AuthKind;

/// The SIGNATURE_HASH_ALGORITHMS notify we send.
pub(super) fn hash_notify() -> Payload {
    Payload::Notify(Notify::signature_hash_algorithms(&SUPPORTED_HASHES))
}

/// A CERTREQ naming `cas` (our trusted CAs); None without any.
pub(super) fn certreq<'a>(cas: impl IntoIterator<Item = &'a Vec<u8>>) -> Option<Payload> {
    let mut authorities = Vec::new();
    for ca in cas {
        if let Ok(h) = cert::ca_hash(ca) {
            if !authorities.chunks(20).any(|c| c == h) {
                authorities.extend_from_slice(&h);
            }
        }
    }
    (!authorities.is_empty()).then_some(Payload::CertReq(CertificateRequest {
        encoding: CertEncoding::X509_SIGNATURE,
        authorities,
    }))
}

/// Our CERT payloads: the certificate, then the intermediates.
fn cert_payloads(conn: &Connection) -> impl Iterator<Item = Payload> + '_ {
    conn.cert.iter().map(|c| {
        Payload::Cert(Certificate {
            encoding: CertEncoding::X509_SIGNATURE,
            data: c.clone(),
        })
    })
}

/// The peer's N(SIGNATURE_HASH_ALGORITHMS) from its IKE_SA_INIT message.
fn peer_hashes(peer_init: &[u8]) -> Option<Vec<u16>> {
    let msg = Message::parse(peer_init).ok()?;
    let n = msg.notifies(NotifyType::SIGNATURE_HASH_ALGORITHMS).next()?;
    n.hash_algorithms()
}

impl IkeSa {
    /// The peer's IKE_SA_INIT message and ours, as sent.
    fn init_messages(&self) -> (&[u8], &[u8]) {
        match self.role {
            Role::Initiator => (&self.init_response, &self.init_request),
            Role::Responder => (&self.init_request, &self.init_response),
        }
    }

    /// The octets we sign or MAC (RFC 7296 2.15): our first message, the
    /// peer's nonce, prf(SK_p, our ID body).
    fn our_octets(&self, id_body: &[u8]) -> Result<Vec<u8>, EngineError> {
        let (suite, keys) = self
            .suite
            .zip(self.keys.as_ref())
            .ok_or(EngineError::Protocol("no keys"))?;
        let (peer_nonce, sk_p) = match self.role {
            Role::Initiator => (&self.nr, &keys.sk_pi),
            Role::Responder => (&self.ni, &keys.sk_pr),
        };
        let mac = maced_id(suite.prf, sk_p.expose(), id_body);
        let mut octets = signed_octets(self.init_messages().1, peer_nonce, mac.expose());
        // RFC 9242 3.3.2: IntAuth_iN | IntAuth_rN | IKE_AUTH_MID.
        octets.extend(self.int_auth_suffix());
        Ok(octets)
    }

    /// The octets the peer signed or MACed.
    fn peer_octets(&self, id_body: &[u8]) -> Option<Vec<u8>> {
        let (suite, keys) = self.suite.zip(self.keys.as_ref())?;
        let (peer_nonce_ours, sk_p) = match self.role {
            Role::Initiator => (&self.ni, &keys.sk_pr),
            Role::Responder => (&self.nr, &keys.sk_pi),
        };
        let mac = maced_id(suite.prf, sk_p.expose(), id_body);
        let mut octets = signed_octets(self.init_messages().0, peer_nonce_ours, mac.expose());
        octets.extend(self.int_auth_suffix());
        Some(octets)
    }

    /// Our AUTH payload for our ID payload body `id_body`: the PSK MIC,
    /// or an RFC 7427 signature with our key (the hash the peer announced).
    pub(super) fn our_auth(
        &self,
        conn: &Connection,
        id_body: &[u8],
    ) -> Result<Authentication, EngineError> {
        let octets = self.our_octets(id_body)?;
        match conn.auth {
            AuthKind::Psk => {
                let suite = self.suite.ok_or(EngineError::Protocol("no suite"))?;
                Ok(Authentication {
                    method: AuthMethod::SHARED_KEY_MIC,
                    data: psk_auth(suite.prf, conn.psk.expose(), &octets)
                        .expose()
                        .to_vec(),
                })
            }
            AuthKind::PubKey => {
                let key = conn
                    .key
                    .as_ref()
                    .ok_or(EngineError::Protocol("no private key"))?;
                let hashes = peer_hashes(self.init_messages().0);
                let data = key
                    .sign_auth(hashes.as_deref(), &octets)
                    .map_err(|_| EngineError::Protocol("signing failed"))?;
                Ok(Authentication {
                    method: AuthMethod::DIGITAL_SIGNATURE,
                    data,
                })
            }
        }
    }

    /// Our IKE_AUTH identity payloads: ID, our CERTs, then (initiator) our
    /// CERTREQ; AUTH is added by the caller after IDr.
    pub(super) fn our_auth_payloads(
        &self,
        conn: &Connection,
        id: Payload,
    ) -> Result<(Vec<Payload>, Authentication), EngineError> {
        let auth = self.our_auth(conn, &wire::id_body(&id)?)?;
        let mut out = vec![id];
        if conn.auth == AuthKind::PubKey {
            out.extend(cert_payloads(conn));
            if self.role == Role::Initiator {
                out.extend(certreq(&conn.cacerts));
            }
        }
        Ok((out, auth))
    }

    /// Checks the peer's IDx, CERT and AUTH payloads against `conn`;
    /// `unix_time` (seconds) is when certificates must be valid.
    pub(super) fn verify_peer(
        &self,
        conn: &Connection,
        inner: &Inner,
        unix_time: Option<u64>,
    ) -> Result<(), AuthFailure> {
        let id_type = match self.role {
            Role::Initiator => PayloadType::IDR,
            Role::Responder => PayloadType::IDI,
        };
        let (Some(Payload::IdI(id) | Payload::IdR(id)), Some(id_body)) =
            (inner.find(id_type), inner.id_body(id_type))
        else {
            return Err(AuthFailure::UnsupportedMethod);
        };
        if conn.remote_id.as_ref().is_some_and(|want| want != id) {
            return Err(AuthFailure::WrongIdentity);
        }
        // The initiator may name who it wants to reach (IDr): not us.
        if self.role == Role::Responder {
            if let Some(Payload::IdR(idr)) = inner.find(PayloadType::IDR) {
                if *idr != conn.local_id {
                    return Err(AuthFailure::WrongIdentity);
                }
            }
        }
        let Some(Payload::Auth(auth)) = inner.find(PayloadType::AUTH) else {
            return Err(AuthFailure::UnsupportedMethod);
        };
        let octets = self.peer_octets(id_body).ok_or(AuthFailure::BadAuth)?;
        match (conn.auth, auth.method) {
            (AuthKind::Psk, AuthMethod::SHARED_KEY_MIC) => {
                let suite = self.suite.ok_or(AuthFailure::BadAuth)?;
                if verify_psk_auth(suite.prf, conn.psk.expose(), &octets, &auth.data) {
                    Ok(())
                } else {
                    Err(AuthFailure::BadAuth)
                }
            }
            (AuthKind::PubKey, AuthMethod::DIGITAL_SIGNATURE) => {
                verify_certificate(conn, inner, id, &octets, &auth.data, unix_time)
                    .map_err(AuthFailure::Certificate)
            }
            _ => Err(AuthFailure::UnsupportedMethod),
        }
    }

    /// Responder: the connection the IKE_AUTH request's identities select
    /// (strongSwan's behaviour, RFC 7296 leaves it open). Candidates: the
    /// peer's address matches the connection's remote (or it is
    /// unspecified), one of its IKE proposals accepts the suite this IKE SA
    /// already uses, its remote_id is unset or equals IDi, its local_id
    /// equals IDr when the initiator sent one, and its authentication kind
    /// is the AUTH method's. A connection naming IDi exactly beats one
    /// accepting any; then the connection IKE_SA_INIT chose; then the
    /// order of configuration. None: no connection fits (the caller checks
    /// against the current one, which gives the precise failure).
    pub(super) fn select_connection(
        &self,
        conns: &[Connection],
        inner: &Inner,
    ) -> Option<ConnectionId> {
        let suite = self.suite?;
        let Some(Payload::IdI(idi)) = inner.find(PayloadType::IDI) else {
            return None;
        };
        let idr = match inner.find(PayloadType::IDR) {
            Some(Payload::IdR(r)) => Some(r),
            _ => None,
        };
        let kind = match inner.find(PayloadType::AUTH) {
            Some(Payload::Auth(a)) if a.method == AuthMethod::SHARED_KEY_MIC => AuthKind::Psk,
            Some(Payload::Auth(a)) if a.method == AuthMethod::DIGITAL_SIGNATURE => AuthKind::PubKey,
            _ => return None,
        };
        let transforms = suite.transforms();
        conns
            .iter()
            .enumerate()
            .filter(|(_, c)| {
                (c.remote.ip().is_unspecified() || c.remote.ip() == self.remote.ip())
                    && c.proposals.iter().any(|p| p.select(&transforms).is_some())
                    && c.remote_id.as_ref().is_none_or(|r| r == idi)
                    && idr.is_none_or(|r| *r == c.local_id)
                    && c.auth == kind
            })
            .min_by_key(|(i, c)| (c.remote_id.is_none(), *i != self.connection, *i))
            .map(|(i, _)| i)
    }
}

/// The certificate checks: an X.509 CERT first, a chain to one of our
/// CAs valid at `unix_time`, the identity in the certificate, and the
/// signature over `octets` made with its key.
fn verify_certificate(
    conn: &Connection,
    inner: &Inner,
    id: &crate::message::Identification,
    octets: &[u8],
    auth_data: &[u8],
    unix_time: Option<u64>,
) -> Result<(), CertError> {
    let mut certs = inner.payloads.iter().filter_map(|p| match p {
        Payload::Cert(c) if c.encoding == CertEncoding::X509_SIGNATURE => Some(&c.data),
        _ => None,
    });
    let ee = certs.next().ok_or(CertError::Missing)?;
    let intermediates: Vec<Vec<u8>> = certs.cloned().collect();
    let time = unix_time.ok_or(CertError::NoTime)?;
    cert::validate_chain(ee, &intermediates, &conn.cacerts, time)?;
    if !cert::id_matches(ee, id)? {
        return Err(CertError::IdentityMismatch);
    }
    signature::verify_auth(ee, octets, auth_data)
}

/// What [`replay_cert_ike_auth`] found.
pub struct CertReplay {
    /// The initiator's AUTH (charon a's) verified with its certificate.
    pub initiator_verified: Result<(), AuthFailure>,
    /// The responder's AUTH (charon b's) verified with its certificate.
    pub responder_verified: Result<(), AuthFailure>,
    /// Our AUTH over the initiator's octets, made with `initiator`'s key.
    pub auth_i: Authentication,
    /// Our AUTH over the responder's octets, made with `responder`'s key.
    pub auth_r: Authentication,
    /// The AUTH payloads charon sent (request, response).
    pub recorded: (Authentication, Authentication),
    /// The peers' CERT payloads (request, response).
    pub certs: (Vec<Vec<u8>>, Vec<Vec<u8>>),
}

/// Runs a recorded certificate IKE_AUTH (strongSwan's) through the
/// engine's own verification: `initiator` and `responder` are the two
/// sides' connections (keys, CAs, remote IDs); the IKE_AUTH messages are
/// given as their SK or SKF datagrams (fragments in order); `mutate` may
/// change the opened inner payloads first (to prove that a tampered
/// certificate or signature fails).
#[allow(clippy::too_many_arguments)]
pub fn replay_cert_ike_auth(
    initiator: &Connection,
    responder: &Connection,
    init_request: &[u8],
    init_response: &[u8],
    auth_request: &[&[u8]],
    auth_response: &[&[u8]],
    shared_secret: &[u8],
    unix_time: u64,
    mutate: &dyn Fn(&mut Vec<Payload>, bool),
) -> Result<CertReplay, EngineError> {
    let i_sa = super::replay::recorded_sa(
        initiator,
        Role::Initiator,
        init_request,
        init_response,
        shared_secret,
    )?;
    let r_sa = super::replay::recorded_sa(
        responder,
        Role::Responder,
        init_request,
        init_response,
        shared_secret,
    )?;
    let open = |sa: &IkeSa, datagrams: &[&[u8]]| -> Result<Inner, EngineError> {
        let sk = sa.sk_in.as_ref().ok_or(EngineError::Protocol("no keys"))?;
        if let [one] = datagrams {
            if !wire::is_fragment(one) {
                return wire::open(one, sk);
            }
        }
        let mut slot = None;
        for f in datagrams {
            let (header, _) = Message::parse_raw(f)?;
            let opened = wire::open_fragment(f, sk)?;
            if let fragment::Added::Complete(r) =
                fragment::Reassembly::add(&mut slot, header.message_id, opened)
            {
                return fragment::open_or_reassembled(Some(r), &[], sk)?
                    .map_err(EngineError::Codec);
            }
        }
        Err(EngineError::Protocol("fragments incomplete"))
    };
    let mut request = open(&r_sa, auth_request)?;
    let mut response = open(&i_sa, auth_response)?;
    let auth_of = |inner: &Inner| match inner.find(PayloadType::AUTH) {
        Some(Payload::Auth(a)) => a.clone(),
        _ => Authentication {
            method: AuthMethod(0),
            data: Vec::new(),
        },
    };
    let certs_of = |inner: &Inner| {
        inner
            .payloads
            .iter()
            .filter_map(|p| match p {
                Payload::Cert(c) => Some(c.data.clone()),
                _ => None,
            })
            .collect::<Vec<_>>()
    };
    let recorded = (auth_of(&request), auth_of(&response));
    let certs = (certs_of(&request), certs_of(&response));
    mutate(&mut request.payloads, true);
    mutate(&mut response.payloads, false);
    let initiator_verified = r_sa.verify_peer(responder, &request, Some(unix_time));
    let responder_verified = i_sa.verify_peer(initiator, &response, Some(unix_time));
    let id_body = |inner: &Inner, t| inner.id_body(t).map(<[u8]>::to_vec).unwrap_or_default();
    let auth_i = i_sa.our_auth(initiator, &id_body(&request, PayloadType::IDI))?;
    let auth_r = r_sa.our_auth(responder, &id_body(&response, PayloadType::IDR))?;
    Ok(CertReplay {
        initiator_verified,
        responder_verified,
        auth_i,
        auth_r,
        recorded,
        certs,
    })
}

//! Proposals in strongSwan's syntax (swanctl.conf `proposals` and
//! `esp_proposals`), so operators paste what their strongSwan peers use,
//! and proposal selection (RFC 7296 sections 2.7 and 3.3).
//!
//! Syntax: proposals separated by `,`; within one, algorithm keywords
//! separated by `-`. Several keywords of one kind form alternatives
//! (`aes128-aes256-sha256-modp2048-ecp256` accepts any combination), as in
//! strongSwan. Keywords espgw knows:
//!
//! | kind | IKE (`proposals`) | ESP (`esp_proposals`) |
//! | --- | --- | --- |
//! | encryption | `aes128`, `aes256` (CBC), `aes128gcm16`, `aes256gcm16`, `chacha20poly1305` | same |
//! | integrity | `sha256`, `sha384`, `sha512` | `sha256`, `sha1` |
//! | PRF | `prfsha256`, `prfsha384`, `prfsha512` | none |
//! | key exchange | `x25519`, `ecp256`, `ecp384`, `modp2048` | same (PFS group) |
//! | ESN | none | `esn`, `noesn` |
//!
//! RFC 9370 additional key exchanges, as strongSwan 6 writes them:
//! `ke1_mlkem768` .. `ke7_...` name a method for ADDKE1..7 (`mlkem512`,
//! `mlkem768`, `mlkem1024`, or a Diffie-Hellman group), `ke1_none` makes
//! that exchange optional (`aes256gcm16-prfsha384-x25519-ke1_mlkem768`).
//! In ESP proposals they apply to CHILD_SAs made or rekeyed by
//! CREATE_CHILD_SA (not the one IKE_AUTH makes, which has no key exchange)
//! and need a PFS group beside them (`aes128gcm16-x25519-ke1_mlkem768`).
//!
//! Aliases strongSwan also accepts: `aes128gcm128`/`aes256gcm128` (the ICV
//! in bits), `curve25519`, `sha2_256`/`sha2_384`/`sha2_512`,
//! `prfsha2_256`... Anything else is an error that names the keyword.

use std::fmt;

use super::transform::{
    Encryption, Esn, EspSuite, Integrity, KeGroup, Prf, Transform, TransformType, KE_NONE,
};

/// Which list a proposal string is parsed for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProposalKind {
    /// IKE SA proposals (`proposals`).
    Ike,
    /// CHILD_SA proposals (`esp_proposals`).
    Esp,
}

/// An IKE SA proposal: each list holds the alternatives we accept, in our
/// order of preference.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IkeProposal {
    /// Encryption algorithms (all AEAD or all CBC).
    pub encryption: Vec<Encryption>,
    /// Integrity algorithms (empty with AEAD).
    pub integrity: Vec<Integrity>,
    /// PRFs.
    pub prf: Vec<Prf>,
    /// Key exchange methods.
    pub ke: Vec<KeGroup>,
    /// RFC 9370 additional key exchanges: `addke[n - 1]` lists the methods
    /// accepted for ADDKEn, `None` meaning NONE (the exchange is
    /// optional). An empty list: no ADDKEn (only NONE is acceptable).
    pub addke: [Vec<Option<KeGroup>>; 7],
}

/// A CHILD_SA (ESP) proposal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EspProposal {
    /// Encryption algorithms.
    pub encryption: Vec<Encryption>,
    /// Integrity algorithms (empty with AEAD).
    pub integrity: Vec<Integrity>,
    /// PFS groups; empty: no PFS.
    pub ke: Vec<KeGroup>,
    /// ESN choices (defaults to `noesn` as in strongSwan).
    pub esn: Vec<Esn>,
    /// RFC 9370 additional key exchanges, as in [`IkeProposal::addke`];
    /// only with a PFS group.
    pub addke: [Vec<Option<KeGroup>>; 7],
}

/// What an IKE SA negotiation settled on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IkeSuite {
    /// Encryption algorithm of the SK payload.
    pub encryption: Encryption,
    /// Integrity algorithm; `None` with AEAD.
    pub integrity: Option<Integrity>,
    /// PRF for SKEYSEED, prf+ and AUTH.
    pub prf: Prf,
    /// Key exchange method.
    pub ke: KeGroup,
    /// RFC 9370 additional key exchanges chosen: `addke[n - 1]` for
    /// ADDKEn, `None` when there is none (or NONE was chosen).
    pub addke: [Option<KeGroup>; 7],
}

impl IkeSuite {
    /// The additional key exchanges to run, in order (ADDKE1 first),
    /// skipping NONE.
    pub fn additional_exchanges(&self) -> impl Iterator<Item = KeGroup> + '_ {
        self.addke.iter().filter_map(|g| *g)
    }
}

/// What a CHILD_SA negotiation settled on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChildSuite {
    /// The data plane's suite.
    pub esp: EspSuite,
    /// PFS group, if any.
    pub ke: Option<KeGroup>,
    /// Extended sequence numbers.
    pub esn: Esn,
    /// RFC 9370 additional key exchanges chosen, as in
    /// [`IkeSuite::addke`]: they follow the CREATE_CHILD_SA exchange in
    /// IKE_FOLLOWUP_KE exchanges.
    pub addke: [Option<KeGroup>; 7],
}

impl ChildSuite {
    /// The additional key exchanges to run, in order (ADDKE1 first),
    /// skipping NONE.
    pub fn additional_exchanges(&self) -> impl Iterator<Item = KeGroup> + '_ {
        self.addke.iter().filter_map(|g| *g)
    }
}

/// A proposal string that cannot be used, with the proposal it is in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProposalError {
    /// 1-based position of the proposal in the comma-separated list.
    pub index: usize,
    /// The proposal's text.
    pub proposal: String,
    /// What is wrong.
    pub reason: ProposalErrorReason,
}

/// Why a proposal is rejected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProposalErrorReason {
    /// The whole string, or one proposal in it, is empty.
    Empty,
    /// A keyword espgw does not know (or not in this kind of proposal).
    UnknownKeyword(String),
    /// No encryption algorithm.
    MissingEncryption,
    /// A CBC cipher without an integrity algorithm.
    MissingIntegrity,
    /// An IKE proposal without a PRF, and none derivable from integrity.
    MissingPrf,
    /// An IKE proposal without a key exchange method.
    MissingKeyExchange,
    /// AEAD and CBC ciphers in one proposal (strongSwan rejects it too).
    MixedAeadAndCbc,
    /// Integrity algorithms listed with only AEAD ciphers.
    IntegrityWithAead,
    /// No combination of the listed ESP algorithms is a suite the data
    /// plane implements.
    NoEspSuite,
    /// ML-KEM named as the IKE_SA_INIT key exchange (only as an RFC 9370
    /// additional key exchange here: `ke1_mlkem768`).
    KemAsPrimary(String),
    /// `keN_<method>` in an ESP proposal without a PFS group beside it.
    AddKeWithoutPfs(String),
}

impl fmt::Display for ProposalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "proposal {} \"{}\": ", self.index, self.proposal)?;
        match &self.reason {
            ProposalErrorReason::Empty => write!(f, "empty proposal"),
            ProposalErrorReason::UnknownKeyword(k) => write!(
                f,
                "unknown algorithm \"{k}\" (espgw knows: aes128, aes256, aes128gcm16, aes256gcm16, \
                 chacha20poly1305, sha256, sha384, sha512, sha1 (ESP only), prfsha256, prfsha384, \
                 prfsha512 (IKE only), x25519, ecp256, ecp384, modp2048, esn, noesn (ESP only))"
            ),
            ProposalErrorReason::MissingEncryption => write!(f, "no encryption algorithm"),
            ProposalErrorReason::MissingIntegrity => write!(
                f,
                "aes128/aes256 (CBC) need an integrity algorithm, e.g. \"aes128-sha256\""
            ),
            ProposalErrorReason::MissingPrf => write!(
                f,
                "no PRF: AEAD proposals must name one, e.g. \"aes128gcm16-prfsha256-x25519\""
            ),
            ProposalErrorReason::MissingKeyExchange => write!(
                f,
                "no key exchange method (x25519, ecp256, ecp384 or modp2048)"
            ),
            ProposalErrorReason::MixedAeadAndCbc => write!(
                f,
                "AEAD (gcm16, chacha20poly1305) and CBC ciphers cannot share a proposal: split it in two"
            ),
            ProposalErrorReason::IntegrityWithAead => write!(
                f,
                "AEAD ciphers carry their own integrity: remove the integrity algorithm"
            ),
            ProposalErrorReason::KemAsPrimary(k) => write!(
                f,
                "\"{k}\" only as an additional key exchange here, e.g. \"x25519-ke1_{k}\""
            ),
            ProposalErrorReason::AddKeWithoutPfs(k) => write!(
                f,
                "\"{k}\": an additional key exchange (RFC 9370) in an ESP proposal needs a PFS \
                 group too, e.g. \"aes128gcm16-x25519-{k}\""
            ),
            ProposalErrorReason::NoEspSuite => write!(
                f,
                "no combination is an ESP suite espgw implements (aes128gcm16, aes256gcm16, \
                 chacha20poly1305, aes128-sha256, aes256-sha256, aes128-sha1)"
            ),
        }
    }
}

impl std::error::Error for ProposalError {}

/// One parsed keyword.
enum Keyword {
    Enc(Encryption),
    Integ(Integrity),
    Prf(Prf),
    Ke(KeGroup),
    /// ADDKEn (1..=7) with a method, or NONE.
    AddKe(usize, Option<KeGroup>),
    Esn(Esn),
}

/// A key exchange method's name, including ML-KEM.
fn method(word: &str) -> Option<KeGroup> {
    Some(match word {
        "x25519" | "curve25519" => KeGroup::Curve25519,
        "ecp256" => KeGroup::Ecp256,
        "ecp384" => KeGroup::Ecp384,
        "modp2048" => KeGroup::Modp2048,
        "mlkem512" => KeGroup::MlKem512,
        "mlkem768" => KeGroup::MlKem768,
        "mlkem1024" => KeGroup::MlKem1024,
        _ => return None,
    })
}

/// `ke1_mlkem768`, `ke3_none`: (n, method or NONE).
fn addke_keyword(word: &str) -> Option<(usize, Option<KeGroup>)> {
    let rest = word.strip_prefix("ke")?;
    let (n, name) = rest.split_once('_')?;
    let n: usize = n.parse().ok().filter(|n| (1..=7).contains(n))?;
    if name == "none" {
        return Some((n, None));
    }
    Some((n, Some(method(name)?)))
}

fn keyword(word: &str, kind: ProposalKind) -> Option<Keyword> {
    let k = match word {
        "aes128" => Keyword::Enc(Encryption::AesCbc128),
        "aes256" => Keyword::Enc(Encryption::AesCbc256),
        "aes128gcm16" | "aes128gcm128" => Keyword::Enc(Encryption::AesGcm16_128),
        "aes256gcm16" | "aes256gcm128" => Keyword::Enc(Encryption::AesGcm16_256),
        "chacha20poly1305" => Keyword::Enc(Encryption::ChaCha20Poly1305),
        "sha256" | "sha2_256" => Keyword::Integ(Integrity::HmacSha256_128),
        "sha384" | "sha2_384" if kind == ProposalKind::Ike => {
            Keyword::Integ(Integrity::HmacSha384_192)
        }
        "sha512" | "sha2_512" if kind == ProposalKind::Ike => {
            Keyword::Integ(Integrity::HmacSha512_256)
        }
        "sha1" | "sha" if kind == ProposalKind::Esp => Keyword::Integ(Integrity::HmacSha1_96),
        "prfsha256" | "prfsha2_256" if kind == ProposalKind::Ike => Keyword::Prf(Prf::HmacSha256),
        "prfsha384" | "prfsha2_384" if kind == ProposalKind::Ike => Keyword::Prf(Prf::HmacSha384),
        "prfsha512" | "prfsha2_512" if kind == ProposalKind::Ike => Keyword::Prf(Prf::HmacSha512),
        "x25519" | "curve25519" | "ecp256" | "ecp384" | "modp2048" => Keyword::Ke(method(word)?),
        w if addke_keyword(w).is_some() => {
            let (n, g) = addke_keyword(w)?;
            Keyword::AddKe(n, g)
        }
        "esn" if kind == ProposalKind::Esp => Keyword::Esn(Esn::Yes),
        "noesn" if kind == ProposalKind::Esp => Keyword::Esn(Esn::No),
        _ => return None,
    };
    Some(k)
}

fn push_unique<T: PartialEq>(list: &mut Vec<T>, item: T) {
    if !list.contains(&item) {
        list.push(item);
    }
}

/// The four lists a proposal string fills, before the per-kind checks.
#[derive(Default)]
struct Lists {
    encryption: Vec<Encryption>,
    integrity: Vec<Integrity>,
    prf: Vec<Prf>,
    ke: Vec<KeGroup>,
    addke: [Vec<Option<KeGroup>>; 7],
    esn: Vec<Esn>,
}

/// Splits `s` into proposals and each into keyword lists, checking what is
/// common to IKE and ESP.
fn parse_lists(s: &str, kind: ProposalKind) -> Result<Vec<(usize, String, Lists)>, ProposalError> {
    let mut out = Vec::new();
    for (i, text) in s.split(',').enumerate() {
        let text = text.trim();
        let err = |reason| ProposalError {
            index: i + 1,
            proposal: text.to_string(),
            reason,
        };
        if text.is_empty() {
            return Err(err(ProposalErrorReason::Empty));
        }
        let mut lists = Lists::default();
        for word in text.split('-') {
            let lower = word.trim().to_ascii_lowercase();
            match keyword(&lower, kind) {
                Some(Keyword::Enc(e)) => push_unique(&mut lists.encryption, e),
                Some(Keyword::Integ(a)) => push_unique(&mut lists.integrity, a),
                Some(Keyword::Prf(p)) => push_unique(&mut lists.prf, p),
                Some(Keyword::Ke(g)) => push_unique(&mut lists.ke, g),
                Some(Keyword::Esn(e)) => push_unique(&mut lists.esn, e),
                Some(Keyword::AddKe(n, g)) => push_unique(&mut lists.addke[n - 1], g),
                None if method(&lower).is_some() => {
                    return Err(err(ProposalErrorReason::KemAsPrimary(lower)))
                }
                None => {
                    return Err(err(ProposalErrorReason::UnknownKeyword(
                        word.trim().to_string(),
                    )))
                }
            }
        }
        if lists.encryption.is_empty() {
            return Err(err(ProposalErrorReason::MissingEncryption));
        }
        let aead = lists.encryption.iter().filter(|e| e.is_aead()).count();
        if aead != 0 && aead != lists.encryption.len() {
            return Err(err(ProposalErrorReason::MixedAeadAndCbc));
        }
        if aead != 0 && !lists.integrity.is_empty() {
            return Err(err(ProposalErrorReason::IntegrityWithAead));
        }
        if aead == 0 && lists.integrity.is_empty() {
            return Err(err(ProposalErrorReason::MissingIntegrity));
        }
        out.push((i + 1, text.to_string(), lists));
    }
    Ok(out)
}

/// Parses IKE SA proposals, e.g.
/// `"aes256gcm16-prfsha384-ecp384,aes128-sha256-modp2048"`.
///
/// As strongSwan does, a CBC proposal without a PRF gets the PRFs matching
/// its integrity algorithms (`sha256` gives `prfsha256`); an AEAD proposal
/// must name its PRF.
pub fn parse_ike_proposals(s: &str) -> Result<Vec<IkeProposal>, ProposalError> {
    let mut out = Vec::new();
    for (index, text, mut lists) in parse_lists(s, ProposalKind::Ike)? {
        let err = |reason| ProposalError {
            index,
            proposal: text.clone(),
            reason,
        };
        if lists.prf.is_empty() {
            for integ in &lists.integrity {
                let prf = match integ {
                    Integrity::HmacSha256_128 => Prf::HmacSha256,
                    Integrity::HmacSha384_192 => Prf::HmacSha384,
                    Integrity::HmacSha512_256 => Prf::HmacSha512,
                    // Not accepted in IKE proposals by `keyword`.
                    Integrity::HmacSha1_96 => continue,
                };
                push_unique(&mut lists.prf, prf);
            }
        }
        if lists.prf.is_empty() {
            return Err(err(ProposalErrorReason::MissingPrf));
        }
        if lists.ke.is_empty() {
            return Err(err(ProposalErrorReason::MissingKeyExchange));
        }
        out.push(IkeProposal {
            encryption: lists.encryption,
            integrity: lists.integrity,
            prf: lists.prf,
            ke: lists.ke,
            addke: lists.addke,
        });
    }
    Ok(out)
}

/// Parses CHILD_SA proposals, e.g. `"aes128gcm16-x25519-esn,aes128-sha256"`.
/// A group makes PFS on rekey mandatory with that group; `esn`/`noesn`
/// default to `noesn`.
pub fn parse_esp_proposals(s: &str) -> Result<Vec<EspProposal>, ProposalError> {
    let mut out = Vec::new();
    for (index, text, mut lists) in parse_lists(s, ProposalKind::Esp)? {
        let any_suite = lists.encryption.iter().any(|&e| {
            if e.is_aead() {
                EspSuite::from_algorithms(e, None).is_some()
            } else {
                lists
                    .integrity
                    .iter()
                    .any(|&i| EspSuite::from_algorithms(e, Some(i)).is_some())
            }
        });
        if !any_suite {
            return Err(ProposalError {
                index,
                proposal: text,
                reason: ProposalErrorReason::NoEspSuite,
            });
        }
        // RFC 9370 2.2.4 runs the additional exchanges after the
        // CREATE_CHILD_SA exchange's own: a proposal without a PFS group
        // has none to follow.
        let addke_named = text
            .split('-')
            .map(|w| w.trim().to_ascii_lowercase())
            .find(|w| matches!(addke_keyword(w), Some((_, Some(_)))));
        if let (Some(named), true) = (addke_named, lists.ke.is_empty()) {
            return Err(ProposalError {
                index,
                proposal: text,
                reason: ProposalErrorReason::AddKeWithoutPfs(named),
            });
        }
        if lists.esn.is_empty() {
            lists.esn.push(Esn::No);
        }
        out.push(EspProposal {
            encryption: lists.encryption,
            integrity: lists.integrity,
            ke: lists.ke,
            esn: lists.esn,
            addke: lists.addke,
        });
    }
    Ok(out)
}

/// The first transform of `kind` in `offered` (the peer's preference order)
/// that `decode` maps to something `ours` lists.
fn first_accepted<T: PartialEq + Copy>(
    offered: &[Transform],
    kind: TransformType,
    ours: &[T],
    decode: impl Fn(&Transform) -> Option<T>,
) -> Option<T> {
    offered
        .iter()
        .filter(|t| t.kind == kind)
        .filter_map(decode)
        .find(|v| ours.contains(v))
}

/// RFC 7296 section 3.3.6: a proposal with a transform type we do not
/// understand is unacceptable as a whole.
fn has_unknown_type(offered: &[Transform]) -> bool {
    offered
        .iter()
        .any(|t| matches!(t.kind, TransformType::Other(_)))
}

/// RFC 9370 section 2.2.1: for each ADDKEn, the peer's first offered
/// method (or NONE) that `ours[n - 1]` accepts. A type the peer does not
/// offer counts as NONE; an empty list of ours accepts only NONE. `None`
/// when some ADDKEn has no acceptable choice, so a proposal that requires
/// an additional exchange is never silently taken without it (and one we
/// require is never given up).
fn select_addke(
    offered: &[Transform],
    ours: &[Vec<Option<KeGroup>>; 7],
) -> Option<[Option<KeGroup>; 7]> {
    let mut chosen = [None; 7];
    for (i, slot) in chosen.iter_mut().enumerate() {
        let kind = TransformType::AdditionalKeyExchange(i as u8 + 1);
        let offers: Vec<Option<Option<KeGroup>>> = offered
            .iter()
            .filter(|t| t.kind == kind)
            .map(|t| {
                if t.id == KE_NONE && t.key_length.is_none() {
                    Some(None)
                } else if t.key_length.is_none() {
                    KeGroup::from_any_id(t.id).map(Some)
                } else {
                    None
                }
            })
            .collect();
        let accepts = |g: &Option<KeGroup>| {
            if ours[i].is_empty() {
                g.is_none()
            } else {
                ours[i].contains(g)
            }
        };
        *slot = if offers.is_empty() {
            if !accepts(&None) {
                return None;
            }
            None
        } else {
            offers.into_iter().flatten().find(accepts)?
        };
    }
    Some(chosen)
}

/// The ADDKE transforms of a proposal we offer: every method (or NONE)
/// of each ADDKEn.
fn offered_addke(addke: &[Vec<Option<KeGroup>>; 7]) -> impl Iterator<Item = Transform> + '_ {
    addke.iter().enumerate().flat_map(|(i, methods)| {
        let kind = TransformType::AdditionalKeyExchange(i as u8 + 1);
        methods
            .iter()
            .map(move |g| Transform::new(kind, g.map_or(KE_NONE, KeGroup::id)))
    })
}

/// The ADDKE transforms of a responder's single-choice answer: the
/// chosen method of each ADDKEn, none where NONE was chosen.
fn chosen_addke(addke: &[Option<KeGroup>; 7]) -> impl Iterator<Item = Transform> + '_ {
    addke.iter().enumerate().filter_map(|(i, g)| {
        g.map(|g| Transform::new(TransformType::AdditionalKeyExchange(i as u8 + 1), g.id()))
    })
}

impl IkeProposal {
    /// The transforms to put in an SA payload's proposal (protocol IKE).
    pub fn transforms(&self) -> Vec<Transform> {
        let mut t: Vec<Transform> = self.encryption.iter().map(|e| e.transform()).collect();
        t.extend(self.prf.iter().map(|p| p.transform()));
        t.extend(self.integrity.iter().map(|i| i.transform()));
        t.extend(self.ke.iter().map(|g| g.transform()));
        t.extend(offered_addke(&self.addke));
        t
    }

    /// The suite this proposal accepts from one offered proposal's
    /// transforms, taking the peer's first acceptable choice of each type;
    /// `None` if some type has no acceptable transform.
    pub fn select(&self, offered: &[Transform]) -> Option<IkeSuite> {
        if has_unknown_type(offered) {
            return None;
        }
        let encryption = first_accepted(
            offered,
            TransformType::Encryption,
            &self.encryption,
            Encryption::from_transform,
        )?;
        let prf = first_accepted(offered, TransformType::Prf, &self.prf, Prf::from_transform)?;
        let ke = first_accepted(
            offered,
            TransformType::KeyExchange,
            &self.ke,
            KeGroup::from_transform,
        )?;
        let offers_integrity = offered.iter().any(|t| t.kind == TransformType::Integrity);
        let integrity = if encryption.is_aead() {
            // RFC 7296 3.3: with a combined-mode cipher the integrity
            // transform is omitted (or NONE, id 0).
            if offered
                .iter()
                .any(|t| t.kind == TransformType::Integrity && t.id != 0)
            {
                return None;
            }
            None
        } else {
            if !offers_integrity {
                return None;
            }
            Some(first_accepted(
                offered,
                TransformType::Integrity,
                &self.integrity,
                Integrity::from_transform,
            )?)
        };
        let addke = select_addke(offered, &self.addke)?;
        Some(IkeSuite {
            encryption,
            integrity,
            prf,
            ke,
            addke,
        })
    }
}

impl IkeSuite {
    /// The single-choice proposal a responder answers with.
    pub fn transforms(&self) -> Vec<Transform> {
        let mut t = vec![self.encryption.transform(), self.prf.transform()];
        t.extend(self.integrity.map(|i| i.transform()));
        t.push(self.ke.transform());
        t.extend(chosen_addke(&self.addke));
        t
    }
}

impl EspProposal {
    /// The transforms to put in an SA payload's proposal (protocol ESP).
    /// Without PFS groups no Key Exchange transform is sent.
    pub fn transforms(&self) -> Vec<Transform> {
        let mut t: Vec<Transform> = self.encryption.iter().map(|e| e.transform()).collect();
        t.extend(self.integrity.iter().map(|i| i.transform()));
        t.extend(self.ke.iter().map(|g| g.transform()));
        t.extend(offered_addke(&self.addke));
        t.extend(self.esn.iter().map(|e| e.transform()));
        t
    }

    /// The suite this proposal accepts from one offered ESP proposal.
    /// Encryption and integrity are chosen as a pair that is a data-plane
    /// suite, in the peer's order. With no PFS group on our side the offer
    /// must allow none (no KE transform, or NONE); with groups, one of the
    /// offered groups must be ours. Additional key exchanges as for IKE
    /// (`select_addke`). The ESN transform is mandatory in ESP proposals
    /// (RFC 7296 3.3.3).
    pub fn select(&self, offered: &[Transform]) -> Option<ChildSuite> {
        if has_unknown_type(offered) {
            return None;
        }
        let encs = offered
            .iter()
            .filter(|t| t.kind == TransformType::Encryption)
            .filter_map(Encryption::from_transform)
            .filter(|e| self.encryption.contains(e));
        let integs: Vec<Integrity> = offered
            .iter()
            .filter(|t| t.kind == TransformType::Integrity)
            .filter_map(Integrity::from_transform)
            .filter(|i| self.integrity.contains(i))
            .collect();
        let offers_integrity = offered
            .iter()
            .any(|t| t.kind == TransformType::Integrity && t.id != 0);
        let mut esp = None;
        for enc in encs {
            let found = if enc.is_aead() {
                if offers_integrity {
                    None
                } else {
                    EspSuite::from_algorithms(enc, None)
                }
            } else {
                integs
                    .iter()
                    .find_map(|&i| EspSuite::from_algorithms(enc, Some(i)))
            };
            if found.is_some() {
                esp = found;
                break;
            }
        }
        let esp = esp?;
        let offered_ke: Vec<&Transform> = offered
            .iter()
            .filter(|t| t.kind == TransformType::KeyExchange)
            .collect();
        let ke = if self.ke.is_empty() {
            if !offered_ke.is_empty() && !offered_ke.iter().any(|t| t.id == KE_NONE) {
                return None;
            }
            None
        } else {
            Some(first_accepted(
                offered,
                TransformType::KeyExchange,
                &self.ke,
                KeGroup::from_transform,
            )?)
        };
        let esn = first_accepted(offered, TransformType::Esn, &self.esn, Esn::from_transform)?;
        let addke = select_addke(offered, &self.addke)?;
        Some(ChildSuite {
            esp,
            ke,
            esn,
            addke,
        })
    }
}

impl ChildSuite {
    /// The single-choice proposal a responder answers with.
    pub fn transforms(&self) -> Vec<Transform> {
        let (enc, integ) = self.esp.algorithms();
        let mut t = vec![enc.transform()];
        t.extend(integ.map(|i| i.transform()));
        t.extend(self.ke.map(|g| g.transform()));
        t.extend(chosen_addke(&self.addke));
        t.push(self.esn.transform());
        t
    }
}

/// Responder's choice among the initiator's IKE proposals: the first
/// offered proposal (by its position) that one of ours accepts, with its
/// proposal number. `offered` holds (proposal number, transforms).
pub fn select_ike<'a>(
    ours: &[IkeProposal],
    offered: impl IntoIterator<Item = (u8, &'a [Transform])>,
) -> Option<(u8, IkeSuite)> {
    offered.into_iter().find_map(|(num, transforms)| {
        ours.iter()
            .find_map(|p| p.select(transforms))
            .map(|s| (num, s))
    })
}

/// Responder's choice among the initiator's ESP proposals (as
/// [`select_ike`]).
pub fn select_esp<'a>(
    ours: &[EspProposal],
    offered: impl IntoIterator<Item = (u8, &'a [Transform])>,
) -> Option<(u8, ChildSuite)> {
    offered.into_iter().find_map(|(num, transforms)| {
        ours.iter()
            .find_map(|p| p.select(transforms))
            .map(|s| (num, s))
    })
}

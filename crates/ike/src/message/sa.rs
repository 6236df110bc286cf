//! Security Association payload (RFC 7296 3.3): proposals, transforms and
//! transform attributes.
//!
//! ```text
//! proposal substructure:
//! | Last Substruc |   RESERVED    |         Proposal Length       |
//! | Proposal Num  |  Protocol ID  |    SPI Size   |Num  Transforms|
//! ~                        SPI (variable)                         ~
//! ~                        <Transforms>                           ~
//!
//! transform substructure:
//! | Last Substruc |   RESERVED    |        Transform Length       |
//! |Transform Type |   RESERVED    |          Transform ID         |
//! ~                      Transform Attributes                     ~
//!
//! attribute:
//! |A|       Attribute Type        |    AF=0  Attribute Length     |
//! |                               |    AF=1  Attribute Value      |
//! ~                 AF=0  Attribute Value (TLV only)              ~
//! ```
//!
//! "Last Substruc" must be 2 (proposal) / 3 (transform) on every
//! substructure but the last and 0 on the last, every length must end inside
//! its container, and Num Transforms must equal the transforms present.
//! Proposal numbering and which transforms make sense together are the
//! negotiation's business, not the codec's.

use super::error::{Problem, SubstructureProblem};
use super::payload::{be16, patch_len16, put16, PayloadBody, TooLong};
use super::types::{AttributeType, ProtocolId, TransformType};

/// Length of a proposal substructure's fixed part.
const PROPOSAL_HEADER_LEN: usize = 8;
/// Length of a transform substructure's fixed part.
const TRANSFORM_HEADER_LEN: usize = 8;
/// Length of an attribute's fixed part (the whole of a TV attribute).
const ATTRIBUTE_HEADER_LEN: usize = 4;

/// "Last Substruc" of a proposal that has more after it.
const MORE_PROPOSALS: u8 = 2;
/// "Last Substruc" of a transform that has more after it.
const MORE_TRANSFORMS: u8 = 3;
/// The Attribute Format bit: TV (value in the header) when set.
const AF_TV: u16 = 0x8000;

/// Offsets shared by proposal and transform substructures.
const SUBSTRUC_LAST: usize = 0;
const SUBSTRUC_LENGTH: usize = 2;

mod proposal_field {
    pub const LENGTH: usize = super::SUBSTRUC_LENGTH;
    pub const NUMBER: usize = 4;
    pub const PROTOCOL: usize = 5;
    pub const SPI_SIZE: usize = 6;
    pub const NUM_TRANSFORMS: usize = 7;
    pub const SPI: usize = 8;
}

mod transform_field {
    pub const LENGTH: usize = super::SUBSTRUC_LENGTH;
    pub const TYPE: usize = 4;
    pub const ID: usize = 6;
    pub const ATTRIBUTES: usize = 8;
}

/// A transform attribute's value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AttributeValue {
    /// TV format: a 16-bit value in the header (Key Length is always TV).
    Short(u16),
    /// TLV format: a variable-length value.
    Long(Vec<u8>),
}

/// A transform attribute.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attribute {
    /// Attribute Type (15 bits).
    pub attribute_type: AttributeType,
    /// Its value.
    pub value: AttributeValue,
}

/// A transform.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transform {
    /// Transform Type.
    pub transform_type: TransformType,
    /// Transform ID (IANA registry of the type).
    pub id: u16,
    /// Attributes (only Key Length is defined for IKEv2).
    pub attributes: Vec<Attribute>,
}

impl Transform {
    /// A transform without attributes.
    pub fn new(transform_type: TransformType, id: u16) -> Self {
        Transform {
            transform_type,
            id,
            attributes: Vec::new(),
        }
    }

    /// A transform with a Key Length attribute (bits).
    pub fn with_key_length(transform_type: TransformType, id: u16, bits: u16) -> Self {
        Transform {
            transform_type,
            id,
            attributes: vec![Attribute {
                attribute_type: AttributeType::KEY_LENGTH,
                value: AttributeValue::Short(bits),
            }],
        }
    }

    /// The Key Length attribute, when present in TV format.
    pub fn key_length(&self) -> Option<u16> {
        self.attributes.iter().find_map(|a| match a.value {
            AttributeValue::Short(v) if a.attribute_type == AttributeType::KEY_LENGTH => Some(v),
            _ => None,
        })
    }
}

/// A proposal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proposal {
    /// Proposal Num.
    pub number: u8,
    /// Protocol ID (IKE, AH, ESP).
    pub protocol: ProtocolId,
    /// SPI (empty in IKE_SA_INIT, 8 bytes for an IKE rekey, 4 for ESP/AH).
    pub spi: Vec<u8>,
    /// The transforms.
    pub transforms: Vec<Transform>,
}

/// An SA payload: one or more proposals.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecurityAssociation(pub Vec<Proposal>);

/// Reads the common header of a proposal or transform: checks Last
/// Substruc against `more` and whether bytes follow, and the length against
/// the fixed part and the container. Returns the substructure's length.
fn substructure(
    b: &[u8],
    fixed: usize,
    more: u8,
    err: fn(SubstructureProblem) -> Problem,
) -> Result<usize, Problem> {
    if b.len() < fixed {
        return Err(err(SubstructureProblem::Truncated { available: b.len() }));
    }
    let length = be16(b, SUBSTRUC_LENGTH);
    let len = usize::from(length);
    if len < fixed || len > b.len() {
        return Err(err(SubstructureProblem::Length {
            length,
            available: b.len(),
        }));
    }
    let last = b[SUBSTRUC_LAST];
    let follows = len < b.len();
    if (last == more) != follows || (last != more && last != 0) {
        return Err(err(SubstructureProblem::LastSubstruc { value: last }));
    }
    Ok(len)
}

fn parse_attributes(mut b: &[u8]) -> Result<Vec<Attribute>, Problem> {
    let err = Problem::Attribute;
    let mut out = Vec::new();
    while !b.is_empty() {
        if b.len() < ATTRIBUTE_HEADER_LEN {
            return Err(err(SubstructureProblem::Truncated { available: b.len() }));
        }
        let head = be16(b, 0);
        let attribute_type = AttributeType(head & !AF_TV);
        let second = be16(b, 2);
        let (value, len) = if head & AF_TV != 0 {
            (AttributeValue::Short(second), ATTRIBUTE_HEADER_LEN)
        } else {
            let len = ATTRIBUTE_HEADER_LEN + usize::from(second);
            if len > b.len() {
                return Err(err(SubstructureProblem::Length {
                    length: second,
                    available: b.len(),
                }));
            }
            (
                AttributeValue::Long(b[ATTRIBUTE_HEADER_LEN..len].to_vec()),
                len,
            )
        };
        out.push(Attribute {
            attribute_type,
            value,
        });
        b = &b[len..];
    }
    Ok(out)
}

fn parse_transform(b: &[u8]) -> Result<(Transform, usize), Problem> {
    use transform_field as f;
    let len = substructure(b, TRANSFORM_HEADER_LEN, MORE_TRANSFORMS, Problem::Transform)?;
    let t = &b[..len];
    Ok((
        Transform {
            transform_type: TransformType(t[f::TYPE]),
            id: be16(t, f::ID),
            attributes: parse_attributes(&t[f::ATTRIBUTES..])?,
        },
        len,
    ))
}

fn parse_proposal(b: &[u8]) -> Result<(Proposal, usize), Problem> {
    use proposal_field as f;
    let err = Problem::Proposal;
    let len = substructure(b, PROPOSAL_HEADER_LEN, MORE_PROPOSALS, err)?;
    let p = &b[..len];
    let spi_end = f::SPI + usize::from(p[f::SPI_SIZE]);
    if spi_end > len {
        return Err(err(SubstructureProblem::Inconsistent {
            length: be16(p, f::LENGTH),
        }));
    }
    let count = usize::from(p[f::NUM_TRANSFORMS]);
    let mut rest = &p[spi_end..];
    let mut transforms = Vec::with_capacity(count);
    while !rest.is_empty() {
        let (t, tlen) = parse_transform(rest)?;
        transforms.push(t);
        rest = &rest[tlen..];
    }
    if transforms.len() != count {
        return Err(err(SubstructureProblem::Count {
            field: count,
            found: transforms.len(),
        }));
    }
    Ok((
        Proposal {
            number: p[f::NUMBER],
            protocol: ProtocolId(p[f::PROTOCOL]),
            spi: p[f::SPI..spi_end].to_vec(),
            transforms,
        },
        len,
    ))
}

impl PayloadBody for SecurityAssociation {
    fn parse_body(body: &[u8]) -> Result<Self, Problem> {
        if body.is_empty() {
            return Err(Problem::BodyTooShort {
                len: 0,
                min: PROPOSAL_HEADER_LEN,
            });
        }
        let mut rest = body;
        let mut proposals = Vec::new();
        while !rest.is_empty() {
            let (p, len) = parse_proposal(rest)?;
            proposals.push(p);
            rest = &rest[len..];
        }
        Ok(SecurityAssociation(proposals))
    }

    fn emit_body(&self, out: &mut Vec<u8>) -> Result<(), TooLong> {
        for (i, p) in self.0.iter().enumerate() {
            let start = out.len();
            let last = if i + 1 == self.0.len() {
                0
            } else {
                MORE_PROPOSALS
            };
            out.extend_from_slice(&[last, 0, 0, 0, p.number, p.protocol.0]);
            out.push(u8::try_from(p.spi.len()).map_err(|_| TooLong)?);
            out.push(u8::try_from(p.transforms.len()).map_err(|_| TooLong)?);
            out.extend_from_slice(&p.spi);
            for (j, t) in p.transforms.iter().enumerate() {
                let tstart = out.len();
                let tlast = if j + 1 == p.transforms.len() {
                    0
                } else {
                    MORE_TRANSFORMS
                };
                out.extend_from_slice(&[tlast, 0, 0, 0, t.transform_type.0, 0]);
                put16(out, t.id);
                for a in &t.attributes {
                    if a.attribute_type.0 & AF_TV != 0 {
                        return Err(TooLong);
                    }
                    match &a.value {
                        AttributeValue::Short(v) => {
                            put16(out, a.attribute_type.0 | AF_TV);
                            put16(out, *v);
                        }
                        AttributeValue::Long(v) => {
                            put16(out, a.attribute_type.0);
                            put16(out, u16::try_from(v.len()).map_err(|_| TooLong)?);
                            out.extend_from_slice(v);
                        }
                    }
                }
                patch_len16(out, tstart, transform_field::LENGTH)?;
            }
            patch_len16(out, start, proposal_field::LENGTH)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn emit(sa: &SecurityAssociation) -> Vec<u8> {
        let mut out = Vec::new();
        sa.emit_body(&mut out).unwrap();
        out
    }

    /// aes128gcm16-prfsha256-x25519, as an IKE_SA_INIT proposal.
    fn ike_proposal() -> Proposal {
        Proposal {
            number: 1,
            protocol: ProtocolId::IKE,
            spi: vec![],
            transforms: vec![
                Transform::with_key_length(TransformType::ENCR, 20, 128),
                Transform::new(TransformType::PRF, 5),
                Transform::new(TransformType::KE, 31),
            ],
        }
    }

    #[test]
    fn proposal_wire_layout() {
        let bytes = emit(&SecurityAssociation(vec![ike_proposal()]));
        #[rustfmt::skip]
        let want = [
            0, 0, 0, 36, 1, 1, 0, 3,
            3, 0, 0, 12, 1, 0, 0, 20, 0x80, 14, 0, 128,
            3, 0, 0, 8, 2, 0, 0, 5,
            0, 0, 0, 8, 4, 0, 0, 31,
        ];
        assert_eq!(bytes, want);
        let sa = SecurityAssociation::parse_body(&bytes).unwrap();
        assert_eq!(sa.0[0].transforms[0].key_length(), Some(128));
        assert_eq!(sa.0[0].transforms[1].key_length(), None);
    }

    #[test]
    fn several_proposals_with_spis_and_tlv_attributes_round_trip() {
        let esp = Proposal {
            number: 2,
            protocol: ProtocolId::ESP,
            spi: vec![0xc1, 0xa2, 0x00, 0x07],
            transforms: vec![
                Transform {
                    transform_type: TransformType::ENCR,
                    id: 12,
                    attributes: vec![
                        Attribute {
                            attribute_type: AttributeType::KEY_LENGTH,
                            value: AttributeValue::Short(256),
                        },
                        Attribute {
                            attribute_type: AttributeType(99),
                            value: AttributeValue::Long(vec![1, 2, 3]),
                        },
                    ],
                },
                Transform::new(TransformType::ESN, 0),
            ],
        };
        let sa = SecurityAssociation(vec![ike_proposal(), esp]);
        let bytes = emit(&sa);
        assert_eq!(bytes[0], MORE_PROPOSALS);
        assert_eq!(SecurityAssociation::parse_body(&bytes), Ok(sa));
    }

    #[test]
    fn last_substruc_must_match_what_follows() {
        let one = emit(&SecurityAssociation(vec![ike_proposal()]));
        let mut says_more = one.clone();
        says_more[0] = MORE_PROPOSALS;
        assert_eq!(
            SecurityAssociation::parse_body(&says_more),
            Err(Problem::Proposal(SubstructureProblem::LastSubstruc {
                value: 2
            }))
        );
        let mut two = emit(&SecurityAssociation(vec![ike_proposal(), ike_proposal()]));
        two[0] = 0;
        assert_eq!(
            SecurityAssociation::parse_body(&two),
            Err(Problem::Proposal(SubstructureProblem::LastSubstruc {
                value: 0
            }))
        );
        let mut transform_last = one.clone();
        transform_last[8] = 0; // first transform claims to be the last
        assert_eq!(
            SecurityAssociation::parse_body(&transform_last),
            Err(Problem::Transform(SubstructureProblem::LastSubstruc {
                value: 0
            }))
        );
        let mut bogus = one;
        bogus[8] = 7;
        assert_eq!(
            SecurityAssociation::parse_body(&bogus),
            Err(Problem::Transform(SubstructureProblem::LastSubstruc {
                value: 7
            }))
        );
    }

    #[test]
    fn lengths_and_counts_are_checked() {
        let one = emit(&SecurityAssociation(vec![ike_proposal()]));
        let mut count = one.clone();
        count[7] = 4;
        assert_eq!(
            SecurityAssociation::parse_body(&count),
            Err(Problem::Proposal(SubstructureProblem::Count {
                field: 4,
                found: 3
            }))
        );
        let mut long = one.clone();
        long[3] = 40;
        assert_eq!(
            SecurityAssociation::parse_body(&long),
            Err(Problem::Proposal(SubstructureProblem::Length {
                length: 40,
                available: 36
            }))
        );
        let mut spi = one.clone();
        spi[6] = 40;
        assert_eq!(
            SecurityAssociation::parse_body(&spi),
            Err(Problem::Proposal(SubstructureProblem::Inconsistent {
                length: 36
            }))
        );
        let mut tlen = one.clone();
        tlen[11] = 7;
        assert_eq!(
            SecurityAssociation::parse_body(&tlen),
            Err(Problem::Transform(SubstructureProblem::Length {
                length: 7,
                available: 28
            }))
        );
        // A TLV attribute whose length runs past its transform.
        let mut attr = one.clone();
        attr[16] = 0x00; // AF cleared: Key Length now TLV with length 128
        assert_eq!(
            SecurityAssociation::parse_body(&attr),
            Err(Problem::Attribute(SubstructureProblem::Length {
                length: 128,
                available: 4
            }))
        );
        assert_eq!(
            SecurityAssociation::parse_body(&[]),
            Err(Problem::BodyTooShort { len: 0, min: 8 })
        );
    }
}

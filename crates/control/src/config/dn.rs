//! Distinguished names as strongSwan writes them (`C=CH, O=strongSwan,
//! CN=moon`) to and from the DER `Name` a certificate's subject holds.
//!
//! The IKE engine compares an ID_DER_ASN1_DN identity with the subject
//! byte for byte, so the encoding follows strongSwan's (and so `pki`'s,
//! which made the test certificates): one attribute per RDN, in the order
//! written; `C` as PrintableString, `E`/`DC` as IA5String, the rest
//! PrintableString when the value allows it, UTF8String otherwise.

const PRINTABLE_STRING: u8 = 0x13;
const IA5_STRING: u8 = 0x16;
const UTF8_STRING: u8 = 0x0c;

/// Attribute names and their OIDs (contents octets).
const ATTRIBUTES: &[(&str, &[u8])] = &[
    ("CN", &[0x55, 0x04, 0x03]),
    ("SN", &[0x55, 0x04, 0x05]),
    ("C", &[0x55, 0x04, 0x06]),
    ("L", &[0x55, 0x04, 0x07]),
    ("ST", &[0x55, 0x04, 0x08]),
    ("O", &[0x55, 0x04, 0x0a]),
    ("OU", &[0x55, 0x04, 0x0b]),
    ("E", &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x09, 0x01]),
    (
        "DC",
        &[0x09, 0x92, 0x26, 0x89, 0x93, 0xf2, 0x2c, 0x64, 0x01, 0x19],
    ),
];

fn wrap(tag: u8, contents: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    let n = contents.len();
    if n < 0x80 {
        out.push(n as u8);
    } else {
        let bytes: Vec<u8> = n
            .to_be_bytes()
            .into_iter()
            .skip_while(|b| *b == 0)
            .collect();
        out.push(0x80 | bytes.len() as u8);
        out.extend(bytes);
    }
    out.extend_from_slice(contents);
    out
}

fn printable(s: &str) -> bool {
    s.bytes()
        .all(|b| b.is_ascii_alphanumeric() || b" '()+,-./:=?".contains(&b))
}

/// Whether an identity string is meant as a DN (strongSwan: it has `=`).
pub fn looks_like_dn(s: &str) -> bool {
    s.contains('=')
}

/// `C=CH, O=strongSwan, CN=moon` as a DER Name. Errors name the part.
pub fn dn_to_der(text: &str) -> Result<Vec<u8>, String> {
    let mut rdns = Vec::new();
    for part in text.split(',') {
        let part = part.trim();
        let Some((key, value)) = part.split_once('=') else {
            return Err(format!(
                "{part:?} is not KEY=VALUE (escaped commas are not supported)"
            ));
        };
        let (key, value) = (key.trim(), value.trim());
        let Some((name, oid)) = ATTRIBUTES.iter().find(|(n, _)| n.eq_ignore_ascii_case(key)) else {
            let known: Vec<&str> = ATTRIBUTES.iter().map(|(n, _)| *n).collect();
            return Err(format!(
                "unknown attribute {key:?} (known: {})",
                known.join(", ")
            ));
        };
        if value.is_empty() {
            return Err(format!("{key} has an empty value"));
        }
        let tag = match *name {
            "E" | "DC" => IA5_STRING,
            _ if printable(value) => PRINTABLE_STRING,
            "C" => return Err(format!("C={value:?}: a country is two letters")),
            _ => UTF8_STRING,
        };
        if tag == IA5_STRING && !value.is_ascii() {
            return Err(format!("{key}={value:?} must be ASCII"));
        }
        let mut atv = wrap(0x06, oid);
        atv.extend(wrap(tag, value.as_bytes()));
        rdns.extend(wrap(0x31, &wrap(0x30, &atv)));
    }
    Ok(wrap(0x30, &rdns))
}

fn tlv<'a>(input: &mut &'a [u8]) -> Option<(u8, &'a [u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let len = rest[..n]
            .iter()
            .fold(0usize, |a, b| (a << 8) | usize::from(*b));
        (len, &rest[n..])
    };
    if rest.len() < len {
        return None;
    }
    let (value, rest) = rest.split_at(len);
    *input = rest;
    Some((tag, value))
}

/// A DER Name as strongSwan prints it (`C=CH, O=espgw test, CN=a.example`);
/// attributes not in the table print as `#OID-hex`. None if it does not
/// parse.
pub fn dn_text(der: &[u8]) -> Option<String> {
    let mut input = der;
    let (0x30, mut rdns) = tlv(&mut input)? else {
        return None;
    };
    let mut parts = Vec::new();
    while !rdns.is_empty() {
        let (0x31, mut set) = tlv(&mut rdns)? else {
            return None;
        };
        while !set.is_empty() {
            let (0x30, mut atv) = tlv(&mut set)? else {
                return None;
            };
            let (0x06, oid) = tlv(&mut atv)? else {
                return None;
            };
            let (_, value) = tlv(&mut atv)?;
            let name = ATTRIBUTES
                .iter()
                .find(|(_, o)| *o == oid)
                .map(|(n, _)| n.to_string())
                .unwrap_or_else(|| {
                    format!(
                        "#{}",
                        oid.iter().map(|b| format!("{b:02x}")).collect::<String>()
                    )
                });
            parts.push(format!("{name}={}", String::from_utf8_lossy(value)));
        }
    }
    Some(parts.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_errors() {
        let d = dn_to_der("C=CH, O=strongSwan, CN=moon").unwrap();
        assert_eq!(dn_text(&d).unwrap(), "C=CH, O=strongSwan, CN=moon");
        // By hand: SEQ { SET { SEQ { OID 2.5.4.6, PrintableString "CH" } } ... }
        assert_eq!(
            &d[..13],
            &[0x30, 0x31, 0x31, 0x0b, 0x30, 0x09, 0x06, 0x03, 0x55, 0x04, 0x06, 0x13, 0x02]
        );
        let u = dn_to_der("CN=Zürich").unwrap();
        assert!(u.windows(2).any(|w| w == [UTF8_STRING, 7]));
        assert!(dn_to_der("CN").is_err());
        assert!(dn_to_der("XX=1").is_err());
        assert!(dn_to_der("CN=").is_err());
        assert!(dn_text(&[0x30, 0x05, 0x31]).is_none());
        let long = dn_to_der(&format!("CN={}", "a".repeat(300))).unwrap();
        assert_eq!(dn_text(&long).unwrap().len(), 303);
    }
}

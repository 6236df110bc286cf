//! The little DER reading the certificate code needs beyond what webpki
//! exposes: a certificate's subjectAltName entries and a Distinguished
//! Name as text for logs. Every malformed input is `None`, never a panic.

/// Reads one TLV from the front of `input`: (tag, contents), advancing
/// `input` past it. Single-byte tags only (all that X.509 uses), definite
/// lengths of at most 4 length bytes.
pub(crate) fn tlv<'a>(input: &mut &'a [u8]) -> Option<(u8, &'a [u8])> {
    let (&tag, rest) = input.split_first()?;
    if tag & 0x1f == 0x1f {
        return None;
    }
    let (&first, mut rest) = rest.split_first()?;
    let len = if first < 0x80 {
        usize::from(first)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let len = rest[..n]
            .iter()
            .fold(0usize, |acc, b| (acc << 8) | usize::from(*b));
        rest = &rest[n..];
        len
    };
    if rest.len() < len {
        return None;
    }
    let (contents, after) = rest.split_at(len);
    *input = after;
    Some((tag, contents))
}

/// Reads one TLV that must carry `tag`.
pub(crate) fn expect<'a>(input: &mut &'a [u8], tag: u8) -> Option<&'a [u8]> {
    match tlv(input)? {
        (t, c) if t == tag => Some(c),
        _ => None,
    }
}

/// `contents` wrapped in a TLV of `tag` (DER length).
pub(crate) fn wrap(tag: u8, contents: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    let len = contents.len();
    if len < 0x80 {
        out.push(len as u8);
    } else {
        let bytes = len.to_be_bytes();
        let skip = bytes.iter().take_while(|b| **b == 0).count();
        out.push(0x80 | (bytes.len() - skip) as u8);
        out.extend_from_slice(&bytes[skip..]);
    }
    out.extend_from_slice(contents);
    out
}

const SEQUENCE: u8 = 0x30;
const SET: u8 = 0x31;
const OID: u8 = 0x06;
const OCTET_STRING: u8 = 0x04;
const BOOLEAN: u8 = 0x01;
/// tbsCertificate's `[3] EXPLICIT Extensions`.
const EXTENSIONS: u8 = 0xa3;
/// id-ce-subjectAltName, 2.5.29.17.
const SUBJECT_ALT_NAME: &[u8] = &[0x55, 0x1d, 0x11];

/// One subjectAltName entry of the kinds IKE identities name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AltName<'a> {
    /// rfc822Name ([1] IA5String).
    Email(&'a [u8]),
    /// dNSName ([2] IA5String).
    Dns(&'a [u8]),
    /// iPAddress ([7] OCTET STRING, 4 or 16 bytes).
    Ip(&'a [u8]),
}

/// The subjectAltName entries (email, DNS, IP) of a DER certificate; empty
/// without the extension, None when the certificate does not parse.
pub fn alt_names(cert: &[u8]) -> Option<Vec<AltName<'_>>> {
    let mut input = cert;
    let mut certificate = expect(&mut input, SEQUENCE)?;
    let mut tbs = expect(&mut certificate, SEQUENCE)?;
    let mut names = Vec::new();
    while !tbs.is_empty() {
        let (tag, contents) = tlv(&mut tbs)?;
        if tag != EXTENSIONS {
            continue;
        }
        let mut c = contents;
        let mut exts = expect(&mut c, SEQUENCE)?;
        while !exts.is_empty() {
            let mut ext = expect(&mut exts, SEQUENCE)?;
            let oid = expect(&mut ext, OID)?;
            let mut value = match tlv(&mut ext)? {
                (BOOLEAN, _) => expect(&mut ext, OCTET_STRING)?,
                (OCTET_STRING, v) => v,
                _ => return None,
            };
            if oid != SUBJECT_ALT_NAME {
                continue;
            }
            let mut general_names = expect(&mut value, SEQUENCE)?;
            while !general_names.is_empty() {
                match tlv(&mut general_names)? {
                    (0x81, v) => names.push(AltName::Email(v)),
                    (0x82, v) => names.push(AltName::Dns(v)),
                    (0x87, v) => names.push(AltName::Ip(v)),
                    _ => {}
                }
            }
        }
    }
    Some(names)
}

/// A Distinguished Name (the DER of the Name SEQUENCE) as strongSwan
/// prints it: `C=CH, O=espgw test, CN=b.example`. Attributes of unknown
/// types print as their dotted OID; None when it does not parse.
pub fn dn_text(name: &[u8]) -> Option<String> {
    let mut input = name;
    let mut rdns = expect(&mut input, SEQUENCE)?;
    let mut parts = Vec::new();
    while !rdns.is_empty() {
        let mut set = expect(&mut rdns, SET)?;
        while !set.is_empty() {
            let mut atv = expect(&mut set, SEQUENCE)?;
            let oid = expect(&mut atv, OID)?;
            let (_, value) = tlv(&mut atv)?;
            let key = match oid {
                [0x55, 0x04, 0x03] => "CN".to_string(),
                [0x55, 0x04, 0x06] => "C".to_string(),
                [0x55, 0x04, 0x07] => "L".to_string(),
                [0x55, 0x04, 0x08] => "ST".to_string(),
                [0x55, 0x04, 0x0a] => "O".to_string(),
                [0x55, 0x04, 0x0b] => "OU".to_string(),
                [0x55, 0x04, 0x05] => "SN".to_string(),
                [0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x09, 0x01] => "E".to_string(),
                _ => oid_text(oid)?,
            };
            parts.push(format!("{key}={}", String::from_utf8_lossy(value)));
        }
    }
    Some(parts.join(", "))
}

fn oid_text(oid: &[u8]) -> Option<String> {
    let (&first, rest) = oid.split_first()?;
    let mut arcs = vec![u64::from(first / 40), u64::from(first % 40)];
    let mut acc: u64 = 0;
    for b in rest {
        acc = acc.checked_mul(128)? | u64::from(b & 0x7f);
        if b & 0x80 == 0 {
            arcs.push(acc);
            acc = 0;
        }
    }
    Some(
        arcs.iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join("."),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths() {
        let mut i: &[u8] = &[0x04, 0x02, 0xaa, 0xbb, 0x05, 0x00];
        assert_eq!(tlv(&mut i), Some((0x04, &[0xaa, 0xbb][..])));
        assert_eq!(tlv(&mut i), Some((0x05, &[][..])));
        assert_eq!(tlv(&mut i), None);
        let long = wrap(0x04, &[7u8; 300]);
        assert_eq!(&long[..4], &[0x04, 0x82, 0x01, 0x2c]);
        let mut i = &long[..];
        assert_eq!(tlv(&mut i).map(|(_, c)| c.len()), Some(300));
        // Truncated, indefinite, too many length bytes, multi-byte tags.
        for bad in [
            &[0x04, 0x03, 0x00][..],
            &[0x30, 0x80, 0x00, 0x00],
            &[0x04, 0x85, 1, 0, 0, 0, 0],
            &[0x1f, 0x01, 0x00],
            &[0x04],
        ] {
            let mut i = bad;
            assert_eq!(tlv(&mut i), None, "{bad:02x?}");
        }
    }

    #[test]
    fn dn() {
        // SEQUENCE { SET { C=CH } SET { CN=a.example } SET { 1.2.3=x } }
        let c = wrap(
            SET,
            &wrap(
                SEQUENCE,
                &[&[6, 3, 0x55, 4, 6][..], &[0x13, 2, b'C', b'H']].concat(),
            ),
        );
        let cn = wrap(
            SET,
            &wrap(
                SEQUENCE,
                &[&[6, 3, 0x55, 4, 3][..], &wrap(0x0c, b"a.example")].concat(),
            ),
        );
        let other = wrap(
            SET,
            &wrap(
                SEQUENCE,
                &[&[6, 2, 0x2a, 0x03][..], &[0x0c, 1, b'x']].concat(),
            ),
        );
        let name = wrap(SEQUENCE, &[c, cn, other].concat());
        assert_eq!(
            dn_text(&name).as_deref(),
            Some("C=CH, CN=a.example, 1.2.3=x")
        );
        assert_eq!(dn_text(&name[..name.len() - 1]), None);
    }
}

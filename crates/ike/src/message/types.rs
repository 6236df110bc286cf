//! The IANA registries the codec names (RFC 7296 section 3 and the IKEv2
//! parameters registry), as open newtypes: a value from the wire that has no
//! name here still parses (the engine decides what to do with it), and Debug
//! prints the name when there is one.

/// Declares a newtype over an integer with named constants and a Debug that
/// prints the name (or the number when unnamed).
macro_rules! registry {
    ($(#[$meta:meta])* $name:ident($int:ty) { $($(#[$cmeta:meta])* $cname:ident = $value:expr,)* }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(pub $int);

        impl $name {
            $($(#[$cmeta])* pub const $cname: $name = $name($value);)*

            /// The registry name, when this codec knows one.
            pub fn name(self) -> Option<&'static str> {
                match self.0 {
                    $($value => Some(stringify!($cname)),)*
                    _ => None,
                }
            }
        }

        impl core::fmt::Debug for $name {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                match self.name() {
                    Some(n) => f.write_str(n),
                    None => write!(f, "{}({})", stringify!($name), self.0),
                }
            }
        }

        impl From<$int> for $name {
            fn from(v: $int) -> Self {
                $name(v)
            }
        }
    };
}

registry! {
    /// Next Payload / payload type (RFC 7296 3.2, RFC 7383 2.5).
    PayloadType(u8) {
        /// No Next Payload: the end of a chain.
        NONE = 0,
        /// Security Association.
        SA = 33,
        /// Key Exchange.
        KE = 34,
        /// Identification - Initiator.
        IDI = 35,
        /// Identification - Responder.
        IDR = 36,
        /// Certificate.
        CERT = 37,
        /// Certificate Request.
        CERTREQ = 38,
        /// Authentication.
        AUTH = 39,
        /// Nonce (Ni, Nr).
        NONCE = 40,
        /// Notify.
        NOTIFY = 41,
        /// Delete.
        DELETE = 42,
        /// Vendor ID.
        VENDOR_ID = 43,
        /// Traffic Selector - Initiator.
        TSI = 44,
        /// Traffic Selector - Responder.
        TSR = 45,
        /// Encrypted and Authenticated.
        SK = 46,
        /// Configuration.
        CP = 47,
        /// Extensible Authentication.
        EAP = 48,
        /// Encrypted and Authenticated Fragment (RFC 7383).
        SKF = 53,
    }
}

registry! {
    /// Exchange Type (RFC 7296 3.1, RFC 9242).
    ExchangeType(u8) {
        /// IKE_SA_INIT.
        IKE_SA_INIT = 34,
        /// IKE_AUTH.
        IKE_AUTH = 35,
        /// CREATE_CHILD_SA.
        CREATE_CHILD_SA = 36,
        /// INFORMATIONAL.
        INFORMATIONAL = 37,
        /// IKE_INTERMEDIATE (RFC 9242, used by RFC 9370 additional key exchanges).
        IKE_INTERMEDIATE = 43,
        /// IKE_FOLLOWUP_KE (RFC 9370 2.2.4): an additional key exchange
        /// after a CREATE_CHILD_SA exchange.
        IKE_FOLLOWUP_KE = 44,
    }
}

registry! {
    /// Protocol ID in proposals, Notify and Delete (RFC 7296 3.3.1).
    ProtocolId(u8) {
        /// Not about a particular SA (Notify only).
        NONE = 0,
        /// The IKE SA.
        IKE = 1,
        /// AH.
        AH = 2,
        /// ESP.
        ESP = 3,
    }
}

registry! {
    /// Transform Type (RFC 7296 3.3.2, RFC 9370).
    TransformType(u8) {
        /// Encryption Algorithm (ENCR).
        ENCR = 1,
        /// Pseudorandom Function (PRF).
        PRF = 2,
        /// Integrity Algorithm (INTEG).
        INTEG = 3,
        /// Key Exchange Method (KE; "D-H group" in RFC 7296).
        KE = 4,
        /// Extended Sequence Numbers (ESN).
        ESN = 5,
        /// Additional Key Exchange 1 (RFC 9370).
        ADDKE1 = 6,
        /// Additional Key Exchange 2 (RFC 9370).
        ADDKE2 = 7,
        /// Additional Key Exchange 3 (RFC 9370).
        ADDKE3 = 8,
        /// Additional Key Exchange 4 (RFC 9370).
        ADDKE4 = 9,
        /// Additional Key Exchange 5 (RFC 9370).
        ADDKE5 = 10,
        /// Additional Key Exchange 6 (RFC 9370).
        ADDKE6 = 11,
        /// Additional Key Exchange 7 (RFC 9370).
        ADDKE7 = 12,
    }
}

registry! {
    /// Transform attribute type (RFC 7296 3.3.5).
    AttributeType(u16) {
        /// Key Length in bits (always TV format).
        KEY_LENGTH = 14,
    }
}

registry! {
    /// ID Type of IDi/IDr (RFC 7296 3.5).
    IdType(u8) {
        /// A single four-octet IPv4 address.
        IPV4_ADDR = 1,
        /// A fully qualified domain name string.
        FQDN = 2,
        /// A fully qualified RFC 822 email address string.
        RFC822_ADDR = 3,
        /// A single sixteen-octet IPv6 address.
        IPV6_ADDR = 5,
        /// The binary DER encoding of an ASN.1 X.500 Distinguished Name.
        DER_ASN1_DN = 9,
        /// The binary DER encoding of an ASN.1 X.509 GeneralName.
        DER_ASN1_GN = 10,
        /// An opaque octet stream (vendor-specific).
        KEY_ID = 11,
    }
}

registry! {
    /// Certificate Encoding of CERT and CERTREQ (RFC 7296 3.6).
    CertEncoding(u8) {
        /// PKCS #7 wrapped X.509 certificate.
        PKCS7_X509 = 1,
        /// X.509 Certificate - Signature.
        X509_SIGNATURE = 4,
        /// Certificate Revocation List (CRL).
        CRL = 7,
        /// Raw RSA Key.
        RAW_RSA_KEY = 11,
        /// Hash and URL of X.509 certificate.
        HASH_URL_X509_CERT = 12,
        /// Hash and URL of X.509 bundle.
        HASH_URL_X509_BUNDLE = 13,
    }
}

registry! {
    /// Auth Method of the AUTH payload (RFC 7296 3.8, RFC 7427).
    AuthMethod(u8) {
        /// RSA Digital Signature (PKCS#1 v1.5 with SHA-1).
        RSA_SIG = 1,
        /// Shared Key Message Integrity Code.
        SHARED_KEY_MIC = 2,
        /// DSS Digital Signature.
        DSS_SIG = 3,
        /// ECDSA with SHA-256 on the P-256 curve (RFC 4754).
        ECDSA_SHA256_P256 = 9,
        /// ECDSA with SHA-384 on the P-384 curve (RFC 4754).
        ECDSA_SHA384_P384 = 10,
        /// ECDSA with SHA-512 on the P-521 curve (RFC 4754).
        ECDSA_SHA512_P521 = 11,
        /// Digital Signature (RFC 7427).
        DIGITAL_SIGNATURE = 14,
    }
}

registry! {
    /// TS Type of a traffic selector (RFC 7296 3.13.1).
    TsType(u8) {
        /// IPv4 address range.
        IPV4_ADDR_RANGE = 7,
        /// IPv6 address range.
        IPV6_ADDR_RANGE = 8,
    }
}

registry! {
    /// CFG Type of the CP payload (RFC 7296 3.15).
    ConfigType(u8) {
        /// CFG_REQUEST.
        REQUEST = 1,
        /// CFG_REPLY.
        REPLY = 2,
        /// CFG_SET.
        SET = 3,
        /// CFG_ACK.
        ACK = 4,
    }
}

registry! {
    /// Notify Message Type (RFC 7296 3.10.1 and the IKEv2 registry). Types
    /// below 16384 are errors, the rest status ([`NotifyType::is_error`]).
    NotifyType(u16) {
        /// A critical payload this end does not understand.
        UNSUPPORTED_CRITICAL_PAYLOAD = 1,
        /// An SPI this end does not know.
        INVALID_IKE_SPI = 4,
        /// Major version not supported.
        INVALID_MAJOR_VERSION = 5,
        /// A malformed or unexpected message.
        INVALID_SYNTAX = 7,
        /// A message ID outside the window.
        INVALID_MESSAGE_ID = 9,
        /// An ESP or AH SPI this end does not know.
        INVALID_SPI = 11,
        /// None of the proposals is acceptable.
        NO_PROPOSAL_CHOSEN = 14,
        /// The KE payload's group is not the one wanted (data: the group).
        INVALID_KE_PAYLOAD = 17,
        /// AUTH did not verify.
        AUTHENTICATION_FAILED = 24,
        /// IKE_AUTH succeeded but the CHILD_SA needs a single pair.
        SINGLE_PAIR_REQUIRED = 34,
        /// No more CHILD_SAs accepted.
        NO_ADDITIONAL_SAS = 35,
        /// Address assignment failed.
        INTERNAL_ADDRESS_FAILURE = 36,
        /// CP payload processing failed.
        FAILED_CP_REQUIRED = 37,
        /// None of the traffic selectors is acceptable.
        TS_UNACCEPTABLE = 38,
        /// Bad traffic selector address or port list.
        INVALID_SELECTORS = 39,
        /// Temporary failure (e.g. a rekey collision in progress).
        TEMPORARY_FAILURE = 43,
        /// The CHILD_SA to rekey or to create a CHILD_SA under was not found.
        CHILD_SA_NOT_FOUND = 44,
        /// RFC 9370: an IKE_FOLLOWUP_KE request whose link names no
        /// exchange the responder holds.
        STATE_NOT_FOUND = 47,
        /// RFC 9611: the responder creates no more CHILD_SAs with these
        /// traffic selectors (per-resource SAs).
        TS_MAX_QUEUE = 48,
        /// Initial contact: delete other SAs with this peer.
        INITIAL_CONTACT = 16384,
        /// The sender's maximum outstanding requests.
        SET_WINDOW_SIZE = 16385,
        /// Acceptable traffic selectors (additional TS info).
        ADDITIONAL_TS_POSSIBLE = 16386,
        /// IPCOMP.
        IPCOMP_SUPPORTED = 16387,
        /// NAT detection hash of the source address and port.
        NAT_DETECTION_SOURCE_IP = 16388,
        /// NAT detection hash of the destination address and port.
        NAT_DETECTION_DESTINATION_IP = 16389,
        /// Stateless cookie (RFC 7296 2.6).
        COOKIE = 16390,
        /// Transport mode requested.
        USE_TRANSPORT_MODE = 16391,
        /// HTTP certificate lookups supported.
        HTTP_CERT_LOOKUP_SUPPORTED = 16392,
        /// This CHILD_SA rekeys the one whose SPI is in the Notify.
        REKEY_SA = 16393,
        /// TFC padding not supported.
        ESP_TFC_PADDING_NOT_SUPPORTED = 16394,
        /// Non-first fragments also (RFC 7296 2.23).
        NON_FIRST_FRAGMENTS_ALSO = 16395,
        /// MOBIKE supported (RFC 4555).
        MOBIKE_SUPPORTED = 16396,
        /// Redirect supported (RFC 5685).
        REDIRECT_SUPPORTED = 16406,
        /// IKE fragmentation supported (RFC 7383).
        IKEV2_FRAGMENTATION_SUPPORTED = 16430,
        /// RFC 7427 signature hash algorithms (data: 2-byte identifiers).
        SIGNATURE_HASH_ALGORITHMS = 16431,
        /// IKE_INTERMEDIATE supported (RFC 9242).
        INTERMEDIATE_EXCHANGE_SUPPORTED = 16438,
        /// The key exchange of a CREATE_CHILD_SA with RFC 9370 ADDKE (RFC 9370).
        ADDITIONAL_KEY_EXCHANGE = 16441,
        /// RFC 9611: this CHILD_SA is one of a group with the same traffic
        /// selectors, each bound to a resource (a CPU); data: an optional
        /// opaque resource identifier.
        SA_RESOURCE_INFO = 16444,
    }
}

impl NotifyType {
    /// True for error types (RFC 7296 3.10.1: 0..=16383), false for status.
    pub fn is_error(self) -> bool {
        self.0 < 16384
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_print_and_unnamed_values_print_numbers() {
        assert_eq!(format!("{:?}", PayloadType::SKF), "SKF");
        assert_eq!(format!("{:?}", PayloadType(99)), "PayloadType(99)");
        assert_eq!(NotifyType::COOKIE.name(), Some("COOKIE"));
        assert_eq!(NotifyType(40000).name(), None);
    }

    #[test]
    fn error_and_status_notify_types_split_at_16384() {
        assert!(NotifyType::AUTHENTICATION_FAILED.is_error());
        assert!(NotifyType(16383).is_error());
        assert!(!NotifyType::INITIAL_CONTACT.is_error());
        assert!(!NotifyType::NAT_DETECTION_SOURCE_IP.is_error());
    }
}

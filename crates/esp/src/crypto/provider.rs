//! The one place that decides which implementation runs each suite.
//!
//! [`choose`] is the table (suite and CPU in, [`Backend`] out), [`Cpu`] the
//! CPU features it looks at, detected once per process, and
//! [`new_cipher_with`] builds a named backend or says why it cannot: it
//! never falls back to another one. [`super::new_cipher`] is
//! `new_cipher_with(choose(suite, Cpu::detected()), ..)`; tests force each
//! backend with `new_cipher_with` (tests/kat_backends.rs), and
//! [`super::EspCipher::implementation`] shows which code a packet length
//! reaches. Why each entry of the table wins: docs/crypto.md.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

use super::{aead, cbc_hmac, fast_gcm, integrity, ipsec_mb_aead, ring_aead, rustcrypto_cbc};
use super::{check_key_lengths, EspCipher, KeyError};
use crate::Suite;

/// The CPU features the choice depends on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cpu {
    /// AES-NI, PCLMULQDQ and AVX: what `espgw-aesgcm` needs
    /// ([`espgw_aesgcm::is_supported`]).
    pub aes_gcm_short: bool,
    /// intel-ipsec-mb initialised (any x86_64 CPU: it picks SSE, AVX,
    /// AVX2 or AVX-512 code itself) and not turned off
    /// ([`set_ipsec_mb_allowed`]).
    pub ipsec_mb: bool,
    /// AVX-512 with VAES and VPCLMULQDQ, and intel-ipsec-mb runs its
    /// 512-bit VAES GCM kernels: the CPUs on which it beats ring.
    pub vaes_avx512: bool,
}

impl Cpu {
    /// This machine's features, detected on the first call only, with
    /// `vaes_avx512` false while [`max_simd_width`] is 256 bits.
    pub fn detected() -> Cpu {
        static DETECTED: OnceLock<Cpu> = OnceLock::new();
        let cpu = *DETECTED.get_or_init(|| Cpu {
            aes_gcm_short: espgw_aesgcm::is_supported(),
            ipsec_mb: ipsec_mb::Library::get().is_some(),
            vaes_avx512: ipsec_mb_aead::IpsecMbAead::has_vaes_avx512(),
        });
        Cpu {
            vaes_avx512: cpu.vaes_avx512 && max_simd_width() == SimdWidth::Bits512,
            ipsec_mb: cpu.ipsec_mb && ipsec_mb_allowed(),
            ..cpu
        }
    }
}

/// Whether [`choose`] may pick intel-ipsec-mb (true unless
/// [`set_ipsec_mb_allowed`] said otherwise).
static IPSEC_MB_ALLOWED: AtomicBool = AtomicBool::new(true);

/// Keeps [`choose`] off intel-ipsec-mb for the ciphers built from now on
/// (process-wide, as [`set_max_simd_width`]): AES-GCM from the split on
/// then runs ring (whose code on an AVX-512 CPU is 256-bit VAES) while
/// espgw-aesgcm's short path keeps its width, and ChaCha20-Poly1305 runs
/// ring. `espgw bench --no-ipsec-mb`: on a 16-core Xeon guest the default
/// intel-ipsec-mb AVX-512 AES-GCM stopped scaling from 8 workers on while
/// the 512-bit short path did not (docs/crypto.md, "Wide vectors on many
/// Intel cores"); this measures the two together.
pub fn set_ipsec_mb_allowed(allowed: bool) {
    IPSEC_MB_ALLOWED.store(allowed, Ordering::Relaxed);
}

/// What [`set_ipsec_mb_allowed`] set (true until then).
pub fn ipsec_mb_allowed() -> bool {
    IPSEC_MB_ALLOWED.load(Ordering::Relaxed)
}

/// The widest vector registers the code [`choose`] picks may use:
/// `[dataplane] max_simd_bitwidth` (`espgw bench --max-simd-bitwidth`),
/// after DPDK's `--force-max-simd-bitwidth`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SimdWidth {
    /// No 512-bit (AVX-512) code: what a CPU with AVX2 and no AVX-512
    /// runs. For CPUs that lower their clock for 512-bit code (several
    /// Intel Xeon generations), and to measure that path on one that has
    /// AVX-512.
    Bits256,
    /// Whatever the CPU has (the default).
    Bits512,
}

impl SimdWidth {
    pub fn bits(self) -> u16 {
        match self {
            SimdWidth::Bits256 => 256,
            SimdWidth::Bits512 => 512,
        }
    }

    /// 256 or 512; nothing else is a width espgw can run at (its 128-bit
    /// AES-GCM is only its short-packet half; ring picks its own code).
    pub fn from_bits(bits: u16) -> Option<SimdWidth> {
        match bits {
            256 => Some(SimdWidth::Bits256),
            512 => Some(SimdWidth::Bits512),
            _ => None,
        }
    }
}

/// Sets the widest vector registers of the ciphers built from now on
/// (process-wide; ciphers already built keep their code): with
/// [`SimdWidth::Bits256`], [`choose`] picks what it picks on a CPU without
/// AVX-512 (intel-ipsec-mb is not chosen, espgw-aesgcm keeps to its
/// 128-bit path). A backend forced by name ([`new_cipher_with`]) is built
/// as asked. Call it before the first SA is built: `espgw run`, `check`
/// and `bench` do, from the config or the option.
///
/// The one switch is espgw-aesgcm's ([`espgw_aesgcm::allow_512_bit`]):
/// `choose` reads it back through [`max_simd_width`], so the two can
/// never disagree.
pub fn set_max_simd_width(width: SimdWidth) {
    espgw_aesgcm::allow_512_bit(width == SimdWidth::Bits512);
}

/// What [`set_max_simd_width`] set ([`SimdWidth::Bits512`] until then).
pub fn max_simd_width() -> SimdWidth {
    if espgw_aesgcm::is_512_bit_allowed() {
        SimdWidth::Bits512
    } else {
        SimdWidth::Bits256
    }
}

/// One line for `espgw check` and `espgw bench` when the width is capped
/// on a CPU that has more: `None` otherwise.
pub fn simd_width_note() -> Option<String> {
    // The CPU's own features, whatever intel-ipsec-mb (present or not)
    // and the cap say.
    let has_512 = espgw_aesgcm::cpu_has_512_bit();
    (max_simd_width() == SimdWidth::Bits256 && has_512).then(|| {
        "max_simd_bitwidth = 256: the ciphers run no 512-bit code (this CPU has AVX-512 and VAES)"
            .to_string()
    })
}

/// A cipher implementation that can be asked for by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Backend {
    /// AES-GCM split by payload length ([`fast_gcm::FastGcm`]):
    /// `espgw-aesgcm` below the threshold, ring from it on. Needs
    /// [`Cpu::aes_gcm_short`].
    SplitGcm,
    /// ring for every length: ChaCha20-Poly1305 always, AES-GCM on a CPU
    /// without the short-packet instructions.
    Ring,
    /// AES-GCM split by payload length
    /// ([`fast_gcm::FastGcmIpsecMb`]): `espgw-aesgcm` below the threshold,
    /// intel-ipsec-mb from it on. Needs [`Cpu::aes_gcm_short`] and
    /// [`Cpu::ipsec_mb`]; chosen only with [`Cpu::vaes_avx512`].
    SplitIpsecMb,
    /// intel-ipsec-mb for every length: its AES-GCM (direct API), or its
    /// ChaCha20-Poly1305 (job API). Needs [`Cpu::ipsec_mb`]; chosen for
    /// ChaCha20-Poly1305 only with [`Cpu::vaes_avx512`] (its AVX-512 code).
    IpsecMb,
    /// RustCrypto AES-CBC with RustCrypto HMAC ([`cbc_hmac::CbcHmac`]).
    RustCryptoCbc,
}

impl Backend {
    /// Every backend, in a fixed order.
    pub const ALL: [Backend; 5] = [
        Backend::SplitGcm,
        Backend::Ring,
        Backend::SplitIpsecMb,
        Backend::IpsecMb,
        Backend::RustCryptoCbc,
    ];

    /// Short name for logs and test output.
    pub fn name(self) -> &'static str {
        match self {
            Backend::SplitGcm => "split-gcm",
            Backend::Ring => "ring",
            Backend::SplitIpsecMb => "split-ipsec-mb",
            Backend::IpsecMb => "ipsec-mb",
            Backend::RustCryptoCbc => "rustcrypto-cbc",
        }
    }

    /// Whether this backend implements `suite` at all.
    pub fn serves(self, suite: Suite) -> bool {
        match self {
            Backend::SplitGcm | Backend::SplitIpsecMb => {
                matches!(suite, Suite::Aes128Gcm16 | Suite::Aes256Gcm16)
            }
            Backend::Ring | Backend::IpsecMb => suite.is_aead(),
            Backend::RustCryptoCbc => !suite.is_aead(),
        }
    }

    /// Whether this backend can run on `cpu`.
    pub fn runs_on(self, cpu: Cpu) -> bool {
        match self {
            Backend::SplitGcm => cpu.aes_gcm_short,
            Backend::SplitIpsecMb => cpu.aes_gcm_short && cpu.ipsec_mb,
            Backend::IpsecMb => cpu.ipsec_mb,
            Backend::Ring | Backend::RustCryptoCbc => true,
        }
    }
}

/// Which code seals and opens a given packet (see
/// [`super::EspCipher::implementation`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Implementation {
    /// `espgw-aesgcm` (AES-NI + PCLMULQDQ, one pass).
    EspgwAesGcm,
    /// ring's AEAD.
    Ring,
    /// The RustCrypto crates.
    RustCrypto,
    /// aws-lc-rs (only with the `awslc` feature, for the benchmark).
    AwsLc,
    /// intel-ipsec-mb's direct GCM API (`dpdk/ipsec-mb`).
    IpsecMb,
}

/// The table: the backend [`super::new_cipher`] builds for `suite` on `cpu`.
/// It picks only a backend that serves the suite and runs on the CPU.
pub fn choose(suite: Suite, cpu: Cpu) -> Backend {
    match suite {
        Suite::Aes128Gcm16 | Suite::Aes256Gcm16
            if cpu.vaes_avx512 && cpu.ipsec_mb && cpu.aes_gcm_short =>
        {
            Backend::SplitIpsecMb
        }
        Suite::Aes128Gcm16 | Suite::Aes256Gcm16 if cpu.aes_gcm_short => Backend::SplitGcm,
        // Its AVX-512 ChaCha20-Poly1305 (through the job API) beats ring at
        // every size measured there; elsewhere it runs AVX2 or SSE code
        // that was not measured against ring, so ring stays.
        Suite::Chacha20Poly1305 if cpu.vaes_avx512 && cpu.ipsec_mb => Backend::IpsecMb,
        Suite::Aes128Gcm16 | Suite::Aes256Gcm16 | Suite::Chacha20Poly1305 => Backend::Ring,
        Suite::Aes128Sha256 | Suite::Aes256Sha256 | Suite::Aes128Sha1 => Backend::RustCryptoCbc,
    }
}

/// What [`super::new_cipher`] runs for `suite` on this machine, in one
/// line: the backend's name and, for AES-GCM, which code takes which
/// payload lengths (`espgw bench` and `espgw check` print it).
pub fn describe(suite: Suite) -> String {
    use fast_gcm::LongGcm;
    let ipsec_mb = || match ipsec_mb::Library::get() {
        Some(lib) if suite == Suite::Chacha20Poly1305 => {
            format!("intel-ipsec-mb job API, {:?}", lib.arch())
        }
        Some(lib) if lib.has_vaes_avx512() => "intel-ipsec-mb, AVX-512 VAES".to_string(),
        Some(lib) => format!("intel-ipsec-mb, {:?}", lib.arch()),
        None => "intel-ipsec-mb".to_string(),
    };
    let backend = choose(suite, Cpu::detected());
    let short = if espgw_aesgcm::has_wide_open() {
        "espgw-aesgcm (49-112 B on AVX-512 VAES)"
    } else {
        "espgw-aesgcm"
    };
    let detail = match backend {
        Backend::SplitGcm => format!(
            "{short} below {} B, ring from there",
            ring_aead::RingAead::short_max(suite)
        ),
        Backend::SplitIpsecMb => format!(
            "{short} below {} B, {} from there",
            ipsec_mb_aead::IpsecMbAead::short_max(suite),
            ipsec_mb()
        ),
        Backend::IpsecMb => ipsec_mb(),
        Backend::Ring => "ring".to_string(),
        Backend::RustCryptoCbc => "RustCrypto AES-CBC and HMAC".to_string(),
    };
    format!("{} ({detail})", backend.name())
}

/// Why [`new_cipher_with`] built nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BackendError {
    /// The keying material does not fit the suite.
    Key(KeyError),
    /// The backend does not implement the suite.
    NotForSuite { backend: Backend, suite: Suite },
    /// The backend needs CPU features this machine lacks.
    CpuLacks { backend: Backend },
}

impl core::fmt::Display for BackendError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            BackendError::Key(e) => e.fmt(f),
            BackendError::NotForSuite { backend, suite } => {
                write!(f, "backend {} does not implement {suite}", backend.name())
            }
            BackendError::CpuLacks { backend } => {
                write!(
                    f,
                    "backend {} needs CPU features this machine lacks",
                    backend.name()
                )
            }
        }
    }
}

impl std::error::Error for BackendError {}

/// Builds exactly `backend` for `suite` on this machine, or says why not.
pub fn new_cipher_with(
    backend: Backend,
    suite: Suite,
    key: &[u8],
    auth_key: &[u8],
) -> Result<Box<dyn EspCipher>, BackendError> {
    new_cipher_on(Cpu::detected(), backend, suite, key, auth_key)
}

/// [`new_cipher_with`] for a given `cpu` (tests use it to play a CPU without
/// the short-packet instructions).
pub(crate) fn new_cipher_on(
    cpu: Cpu,
    backend: Backend,
    suite: Suite,
    key: &[u8],
    auth_key: &[u8],
) -> Result<Box<dyn EspCipher>, BackendError> {
    if !backend.serves(suite) {
        return Err(BackendError::NotForSuite { backend, suite });
    }
    if !backend.runs_on(cpu) {
        return Err(BackendError::CpuLacks { backend });
    }
    check_key_lengths(suite, key, auth_key).map_err(BackendError::Key)?;
    let built: Box<dyn EspCipher> = match (backend, suite) {
        (Backend::SplitGcm, _) => Box::new(aead::EspAead::<fast_gcm::FastGcm>::new(suite, key)?),
        (Backend::Ring, _) => Box::new(aead::EspAead::<ring_aead::RingAead>::new(suite, key)?),
        (Backend::SplitIpsecMb, _) => {
            Box::new(aead::EspAead::<fast_gcm::FastGcmIpsecMb>::new(suite, key)?)
        }
        (Backend::IpsecMb, _) => Box::new(aead::EspAead::<ipsec_mb_aead::IpsecMbAead>::new(
            suite, key,
        )?),
        (Backend::RustCryptoCbc, Suite::Aes128Sha256) => {
            Box::new(cbc_hmac::CbcHmac::<
                rustcrypto_cbc::Aes128Cbc,
                integrity::RustCryptoHmacSha256,
            >::new(suite, key, auth_key)?)
        }
        (Backend::RustCryptoCbc, Suite::Aes256Sha256) => {
            Box::new(cbc_hmac::CbcHmac::<
                rustcrypto_cbc::Aes256Cbc,
                integrity::RustCryptoHmacSha256,
            >::new(suite, key, auth_key)?)
        }
        (Backend::RustCryptoCbc, Suite::Aes128Sha1) => {
            Box::new(cbc_hmac::CbcHmac::<
                rustcrypto_cbc::Aes128Cbc,
                integrity::RustCryptoHmacSha1,
            >::new(suite, key, auth_key)?)
        }
        (Backend::RustCryptoCbc, _) => return Err(BackendError::NotForSuite { backend, suite }),
    };
    Ok(built)
}

impl From<KeyError> for BackendError {
    fn from(e: KeyError) -> Self {
        BackendError::Key(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SUITES: [Suite; 6] = [
        Suite::Aes128Gcm16,
        Suite::Aes256Gcm16,
        Suite::Chacha20Poly1305,
        Suite::Aes128Sha256,
        Suite::Aes256Sha256,
        Suite::Aes128Sha1,
    ];
    const WITH: Cpu = Cpu {
        aes_gcm_short: true,
        ipsec_mb: true,
        vaes_avx512: true,
    };
    /// AES-NI, PCLMULQDQ, AVX2, no AVX-512 (the Zen 3 machines).
    const AVX2: Cpu = Cpu {
        aes_gcm_short: true,
        ipsec_mb: true,
        vaes_avx512: false,
    };
    const WITHOUT: Cpu = Cpu {
        aes_gcm_short: false,
        ipsec_mb: false,
        vaes_avx512: false,
    };

    fn keys(suite: Suite) -> (Vec<u8>, Vec<u8>) {
        (vec![7; suite.key_len()], vec![9; suite.auth_key_len()])
    }

    #[test]
    fn the_table_picks_only_backends_that_serve_the_suite_and_run_on_the_cpu() {
        for cpu in [WITH, AVX2, WITHOUT] {
            for suite in SUITES {
                let backend = choose(suite, cpu);
                assert!(backend.serves(suite), "{suite} {cpu:?}");
                assert!(backend.runs_on(cpu), "{suite} {cpu:?}");
                let (key, auth) = keys(suite);
                assert!(new_cipher_on(cpu, backend, suite, &key, &auth).is_ok());
            }
        }
    }

    #[test]
    fn aes_gcm_takes_the_split_backend_only_with_the_cpu_features() {
        for suite in [Suite::Aes128Gcm16, Suite::Aes256Gcm16] {
            assert_eq!(choose(suite, WITH), Backend::SplitIpsecMb);
            // Without AVX-512 the choice is the one made before
            // intel-ipsec-mb came in.
            assert_eq!(choose(suite, AVX2), Backend::SplitGcm);
            assert_eq!(choose(suite, WITHOUT), Backend::Ring);
        }
        assert_eq!(choose(Suite::Chacha20Poly1305, WITH), Backend::IpsecMb);
        assert_eq!(choose(Suite::Chacha20Poly1305, AVX2), Backend::Ring);
        assert_eq!(choose(Suite::Chacha20Poly1305, WITHOUT), Backend::Ring);
    }

    /// A forced backend is built as asked or refused: never another one.
    #[test]
    fn a_forced_backend_the_cpu_lacks_is_refused_not_replaced() {
        let (key, auth) = keys(Suite::Aes128Gcm16);
        for backend in [Backend::SplitGcm, Backend::SplitIpsecMb, Backend::IpsecMb] {
            let err = new_cipher_on(WITHOUT, backend, Suite::Aes128Gcm16, &key, &auth).err();
            assert_eq!(err, Some(BackendError::CpuLacks { backend }));
        }
    }

    #[test]
    fn a_backend_is_refused_for_a_suite_it_does_not_implement() {
        for backend in Backend::ALL {
            for suite in SUITES.into_iter().filter(|&s| !backend.serves(s)) {
                let (key, auth) = keys(suite);
                let err = new_cipher_on(WITH, backend, suite, &key, &auth).err();
                assert_eq!(err, Some(BackendError::NotForSuite { backend, suite }));
            }
        }
    }

    #[test]
    fn describe_names_the_chosen_backend() {
        for suite in SUITES {
            let text = describe(suite);
            assert!(
                text.starts_with(choose(suite, Cpu::detected()).name()),
                "{text}"
            );
        }
    }

    #[test]
    fn wrong_key_lengths_are_key_errors_for_every_backend() {
        for backend in Backend::ALL {
            for suite in SUITES.into_iter().filter(|&s| backend.serves(s)) {
                let err = new_cipher_on(WITH, backend, suite, &[0; 3], &[]).err();
                assert!(
                    matches!(err, Some(BackendError::Key(_))),
                    "{backend:?} {suite}"
                );
            }
        }
    }
}

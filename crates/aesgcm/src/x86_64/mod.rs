//! The x86_64 implementation. Everything that touches intrinsics is a
//! `#[target_feature(enable = "aes,pclmulqdq,avx")]` function; this
//! module is the one place that calls them, and only through a [`Key`],
//! which holds the proof ([`CpuFeatures`]) that the CPU has those features.

/// `$f::<14>(args)` for an AES-256 key, `$f::<10>(args)` for AES-128: the
/// round count is a const generic, so each key size runs its own unrolled
/// rounds and the choice is made once per call.
macro_rules! by_key_size {
    ($aes256:expr, $f:ident($($arg:expr),* $(,)?)) => {
        if $aes256 {
            $f::<14>($($arg),*)
        } else {
            $f::<10>($($arg),*)
        }
    };
}

mod aes;
mod block;
mod gcm;
mod ghash;
mod wide;

use crate::{OpenError, NONCE_LEN, TAG_LEN};

/// Proof that the running CPU has every feature named in the
/// `#[target_feature]` attributes of this module's functions. Only
/// [`CpuFeatures::detect`] makes one.
#[derive(Clone, Copy)]
pub(crate) struct CpuFeatures(());

impl CpuFeatures {
    pub(crate) fn detect() -> Option<Self> {
        let all = std::arch::is_x86_feature_detected!("aes")
            && std::arch::is_x86_feature_detected!("pclmulqdq")
            && std::arch::is_x86_feature_detected!("ssse3")
            && std::arch::is_x86_feature_detected!("sse4.1")
            && std::arch::is_x86_feature_detected!("avx");
        all.then_some(Self(()))
    }
}

/// Proof that the running CPU also has AVX-512 (F, BW, VL), VAES and
/// VPCLMULQDQ, the features of `wide`'s functions (and that they are not
/// turned off: [`crate::allow_512_bit`]).
#[derive(Clone, Copy)]
pub(crate) struct WideFeatures(());

impl WideFeatures {
    pub(crate) fn detect() -> Option<Self> {
        (crate::is_512_bit_allowed() && Self::cpu_has_them()).then_some(Self(()))
    }

    /// The CPU's features alone (the switch aside).
    pub(crate) fn cpu_has_them() -> bool {
        let all = std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512bw")
            && std::arch::is_x86_feature_detected!("avx512vl")
            && std::arch::is_x86_feature_detected!("vaes")
            && std::arch::is_x86_feature_detected!("vpclmulqdq");
        all && CpuFeatures::detect().is_some()
    }
}

/// Whether `wide`'s seal and open take this input (the CPU aside).
fn wide_fits(aad: &[u8], buf: &[u8]) -> bool {
    (wide::MIN_BYTES..=wide::MAX_BYTES).contains(&buf.len()) && aad.len() <= wide::MAX_AAD
}

/// An expanded key plus the proof that its functions may run here.
pub(crate) struct Key {
    _cpu: CpuFeatures,
    /// Present when the CPU runs the 512-bit short seal and open (and it is not
    /// turned off for this key: [`Key::narrow`]).
    wide: Option<WideFeatures>,
    material: gcm::KeyMaterial,
}

impl Key {
    pub(crate) fn new(key: &[u8]) -> Option<Self> {
        let cpu = CpuFeatures::detect()?;
        if key.len() != 16 && key.len() != 32 {
            return None;
        }
        // SAFETY: `cpu` exists, so the CPU has aes, pclmulqdq and avx (and
        // the SSE levels avx implies), the features `KeyMaterial::new` is
        // compiled for.
        let material = unsafe { gcm::KeyMaterial::new(key) }?;
        Some(Self {
            _cpu: cpu,
            wide: WideFeatures::detect(),
            material,
        })
    }

    /// The same key without the 512-bit path (tests: the 128-bit path
    /// stays tested on machines that would not take it).
    pub(crate) fn narrow(mut self) -> Self {
        self.wide = None;
        self
    }

    pub(crate) fn uses_wide_path(&self) -> bool {
        self.wide.is_some()
    }

    pub(crate) fn key_len(&self) -> usize {
        self.material.key_len()
    }

    pub(crate) fn seal(
        &self,
        nonce: &[u8; NONCE_LEN],
        aad: &[u8],
        buf: &mut [u8],
    ) -> [u8; TAG_LEN] {
        if self.wide.is_some() && wide_fits(aad, buf) {
            let m = &self.material;
            // SAFETY: as in `open`: `self.wide` proves the features, and
            // the input is within `wide`'s limits (checked just above).
            return unsafe { wide::seal(m, nonce, aad, buf) };
        }
        // SAFETY: a `Key` holds a `CpuFeatures`, made only after the run-time
        // check of the features `gcm::seal` is compiled for.
        unsafe { gcm::seal(&self.material, nonce, aad, buf) }
    }

    /// Two seals; one interleaved pass when both inputs are short enough.
    pub(crate) fn seal_two(
        &self,
        a: (&[u8; NONCE_LEN], &[u8], &mut [u8]),
        b: (&[u8; NONCE_LEN], &[u8], &mut [u8]),
    ) -> [[u8; TAG_LEN]; 2] {
        if self.wide.is_some() && wide_fits(a.1, a.2) && wide_fits(b.1, b.2) {
            let m = &self.material;
            // SAFETY: as in `open`: `self.wide` proves the features, and
            // both inputs are within `wide`'s limits (checked just above).
            return unsafe { wide::seal_two(m, a, b) };
        }
        if a.2.len() <= gcm::TWO_MAX_BYTES && b.2.len() <= gcm::TWO_MAX_BYTES {
            // SAFETY: as in `seal`; `gcm::seal_two` needs both inputs at
            // most TWO_MAX_BYTES long, checked just above.
            unsafe { gcm::seal_two(&self.material, a, b) }
        } else {
            [self.seal(a.0, a.1, a.2), self.seal(b.0, b.1, b.2)]
        }
    }

    pub(crate) fn open(
        &self,
        nonce: &[u8; NONCE_LEN],
        aad: &[u8],
        buf: &mut [u8],
        tag: &[u8; TAG_LEN],
    ) -> Result<(), OpenError> {
        if self.wide.is_some() && wide_fits(aad, buf) {
            let m = &self.material;
            // SAFETY: `self.wide` exists only after the run-time check of
            // every feature `wide::open` is compiled for; the lengths are
            // within its limits (checked just above).
            return unsafe { wide::open(m, nonce, aad, buf, tag) };
        }
        // SAFETY: as in `seal`: `self._cpu` proves the features.
        unsafe { gcm::open(&self.material, nonce, aad, buf, tag) }
    }
}

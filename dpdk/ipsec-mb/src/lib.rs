//! A safe AES-GCM over intel-ipsec-mb's direct GCM API (the library DPDK's
//! aesni_gcm PMD and ipsec-secgw use), for ESP: 96-bit nonce, 128-bit tag,
//! in place.
//!
//! The library is Debian's libipsec-mb (1.3). `init_mb_mgr_auto` picks the
//! code for this CPU (on one with AVX-512, VAES and VPCLMULQDQ, the 512-bit
//! VAES kernels); the C shim in `shim/shim.c` calls the `IMB_AES*_GCM_*`
//! macros, which read function pointers from that manager, so Rust never
//! mirrors the `IMB_MGR` layout. One manager is made per process and only
//! read afterwards (the direct API keeps its state in the caller's
//! context, which the shim keeps on its stack), so any number of threads
//! can seal and open at once.
//!
//! Every `unsafe` of this crate is an FFI call in this file, each with its
//! SAFETY comment; the rest of the workspace forbids `unsafe`.

use core::ffi::{c_int, c_void};
use core::ptr::NonNull;
use std::sync::OnceLock;

use zeroize::Zeroize;

/// Bytes reserved per expanded key; the shim's `_Static_assert` checks that
/// `struct gcm_key_data` fits (1008 bytes in 1.3).
const GCM_KEY_BYTES: usize = 1024;
/// Bytes of the tag.
pub const TAG_LEN: usize = 16;

const FEATURE_AVX512F: u64 = 1 << 7;
const FEATURE_VAES: u64 = 1 << 12;
const FEATURE_VPCLMULQDQ: u64 = 1 << 13;

extern "C" {
    fn espgw_imb_gcm_key_bytes() -> usize;
    fn espgw_imb_new_mgr(arch: *mut c_int, features: *mut u64) -> *mut c_void;
    fn espgw_imb_gcm_pre(mgr: *mut c_void, aes256: c_int, key: *const u8, kd: *mut KeyData);
    fn espgw_imb_gcm_enc(
        mgr: *mut c_void,
        aes256: c_int,
        kd: *const KeyData,
        buf: *mut u8,
        len: u64,
        iv: *const u8,
        aad: *const u8,
        aad_len: u64,
        tag: *mut u8,
    );
    fn espgw_imb_gcm_dec(
        mgr: *mut c_void,
        aes256: c_int,
        kd: *const KeyData,
        buf: *mut u8,
        len: u64,
        iv: *const u8,
        aad: *const u8,
        aad_len: u64,
        tag: *mut u8,
    );
}

extern "C" {
    fn espgw_imb_new_job_mgr() -> *mut c_void;
    fn espgw_imb_free_mgr(mgr: *mut c_void);
    fn espgw_imb_chacha_poly(
        mgr: *mut c_void,
        encrypt: c_int,
        key: *const u8,
        buf: *mut u8,
        len: u64,
        iv: *const u8,
        aad: *const u8,
        aad_len: u64,
        tag: *mut u8,
    ) -> c_int;
}

/// The code path `init_mb_mgr_auto` chose (`IMB_ARCH`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arch {
    NoAesni,
    Sse,
    Avx,
    Avx2,
    Avx512,
}

/// The library, initialised for this CPU.
pub struct Library {
    mgr: NonNull<c_void>,
    arch: Arch,
    features: u64,
}

// SAFETY: after `espgw_imb_new_mgr` returns, the manager is never written
// again (it is never freed either); the direct GCM calls only read its
// function pointers, and keep their per-call state in a context on the
// shim's stack.
unsafe impl Send for Library {}
// SAFETY: as for Send: shared use is read-only.
unsafe impl Sync for Library {}

impl Library {
    /// The process's library handle: `None` if the manager could not be
    /// made (no memory, or a CPU the library cannot run on).
    pub fn get() -> Option<&'static Library> {
        static LIB: OnceLock<Option<Library>> = OnceLock::new();
        LIB.get_or_init(|| {
            let (mut arch, mut features) = (0 as c_int, 0u64);
            // SAFETY: both out-pointers are valid for one write; the shim
            // returns NULL or a manager that init_mb_mgr_auto initialised.
            let mgr = unsafe { espgw_imb_new_mgr(&mut arch, &mut features) };
            let arch = match arch {
                1 => Arch::NoAesni,
                2 => Arch::Sse,
                3 => Arch::Avx,
                4 => Arch::Avx2,
                5 => Arch::Avx512,
                _ => return None,
            };
            Some(Library {
                mgr: NonNull::new(mgr)?,
                arch,
                features,
            })
        })
        .as_ref()
    }

    /// The code path chosen for this CPU.
    pub fn arch(&self) -> Arch {
        self.arch
    }

    /// Whether GCM runs the 512-bit VAES + VPCLMULQDQ kernels here.
    pub fn has_vaes_avx512(&self) -> bool {
        let want = FEATURE_AVX512F | FEATURE_VAES | FEATURE_VPCLMULQDQ;
        self.arch == Arch::Avx512 && self.features & want == want
    }
}

impl core::fmt::Debug for Library {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Library")
            .field("arch", &self.arch)
            .field("vaes_avx512", &self.has_vaes_avx512())
            .finish()
    }
}

/// `struct gcm_key_data`: round keys and powers of H. 64-aligned for the
/// 512-bit loads.
#[repr(C, align(64))]
struct KeyData([u8; GCM_KEY_BYTES]);

/// The tag did not verify; the buffer holds the ciphertext again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TagMismatch;

/// An AES-128-GCM or AES-256-GCM key, expanded by the library.
pub struct GcmKey {
    lib: &'static Library,
    aes256: c_int,
    data: Box<KeyData>,
}

impl GcmKey {
    /// Expands a 16- or 32-byte key; `None` for another length or if the
    /// library is unavailable.
    pub fn new(key: &[u8]) -> Option<GcmKey> {
        let aes256 = match key.len() {
            16 => 0,
            32 => 1,
            _ => return None,
        };
        let lib = Library::get()?;
        // SAFETY: a pure function of the library.
        debug_assert!(unsafe { espgw_imb_gcm_key_bytes() } <= GCM_KEY_BYTES);
        let mut data = Box::new(KeyData([0; GCM_KEY_BYTES]));
        // SAFETY: `key` has the length `aes256` announces; `data` is a
        // writable, 64-aligned block at least as large as gcm_key_data.
        unsafe { espgw_imb_gcm_pre(lib.mgr.as_ptr(), aes256, key.as_ptr(), &mut *data) };
        Some(GcmKey { lib, aes256, data })
    }

    /// Key length in bytes.
    pub fn key_len(&self) -> usize {
        if self.aes256 == 1 {
            32
        } else {
            16
        }
    }

    /// Encrypts `buf` in place and returns the tag over `aad` and the
    /// ciphertext.
    pub fn seal(&self, nonce: &[u8; 12], aad: &[u8], buf: &mut [u8]) -> [u8; TAG_LEN] {
        let mut tag = [0u8; TAG_LEN];
        self.seal_into(nonce, aad, buf, &mut tag);
        tag
    }

    /// [`GcmKey::seal`] with the tag written to `tag` by the library
    /// itself (for ESP: straight into the packet's ICV).
    pub fn seal_into(&self, nonce: &[u8; 12], aad: &[u8], buf: &mut [u8], tag: &mut [u8; TAG_LEN]) {
        // SAFETY: `buf` is valid for `buf.len()` reads and writes (in
        // place is supported), `nonce` for 12 reads, `aad` for `aad.len()`
        // reads and `tag` for 16 writes; the key data was expanded by
        // gcm_pre for this key size. Empty slices pass a dangling non-null
        // pointer that the library does not dereference for length 0.
        unsafe {
            espgw_imb_gcm_enc(
                self.lib.mgr.as_ptr(),
                self.aes256,
                &*self.data,
                buf.as_mut_ptr(),
                buf.len() as u64,
                nonce.as_ptr(),
                aad.as_ptr(),
                aad.len() as u64,
                tag.as_mut_ptr(),
            )
        };
    }

    /// Decrypts `buf` in place if `tag` verifies over `aad` and the
    /// ciphertext. On a mismatch the buffer is encrypted again (CTR is its
    /// own inverse), so it holds the ciphertext it came with and no
    /// plaintext is released.
    pub fn open(
        &self,
        nonce: &[u8; 12],
        aad: &[u8],
        buf: &mut [u8],
        tag: &[u8; TAG_LEN],
    ) -> Result<(), TagMismatch> {
        let mut computed = [0u8; TAG_LEN];
        // SAFETY: as in `seal`.
        unsafe {
            espgw_imb_gcm_dec(
                self.lib.mgr.as_ptr(),
                self.aes256,
                &*self.data,
                buf.as_mut_ptr(),
                buf.len() as u64,
                nonce.as_ptr(),
                aad.as_ptr(),
                aad.len() as u64,
                computed.as_mut_ptr(),
            )
        };
        verify_or_restore(&computed, tag, || {
            let _ = self.seal(nonce, aad, buf);
        })
    }
}

/// The end of both AEADs' `open`: the library decrypted in place and
/// computed `computed`; on a mismatch with the received `tag`,
/// `re_encrypt` runs (the keystream is its own inverse, so encrypting the
/// plaintext again under the same nonce restores the ciphertext: no
/// plaintext is left in the buffer) and the open fails.
#[inline(always)]
fn verify_or_restore(
    computed: &[u8; TAG_LEN],
    tag: &[u8; TAG_LEN],
    re_encrypt: impl FnOnce(),
) -> Result<(), TagMismatch> {
    // The difference folded into one word without branches, then compared
    // with 0 once, the word hidden from the optimizer (which could
    // otherwise split `x ^ y == 0` into an early exit on one half): no
    // timing tells a forger how many tag bytes matched, and only the
    // verdict (public: the packet is dropped or not) decides the branch.
    // Not subtle's `ct_eq`: its `black_box` was an out-of-line call on
    // every packet (1.3% of a 1420-byte decrypt profile, issue 14); the
    // same as crates/aesgcm's `tags_match`.
    let diff = u128::from_ne_bytes(*computed) ^ u128::from_ne_bytes(*tag);
    let folded = (diff as u64) | ((diff >> 64) as u64);
    if core::hint::black_box(folded) == 0 {
        Ok(())
    } else {
        re_encrypt();
        Err(TagMismatch)
    }
}

impl Drop for GcmKey {
    fn drop(&mut self) {
        self.data.0.zeroize();
    }
}

impl core::fmt::Debug for GcmKey {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("GcmKey")
            .field("key_len", &self.key_len())
            .finish()
    }
}

/// A job manager owned by one thread: unlike the direct API, the job API
/// keeps state (the job ring) in the manager.
struct JobMgr(NonNull<c_void>);

impl JobMgr {
    fn new() -> Option<JobMgr> {
        // SAFETY: no arguments; returns NULL or an initialised manager that
        // this value then owns.
        NonNull::new(unsafe { espgw_imb_new_job_mgr() }).map(JobMgr)
    }
}

impl Drop for JobMgr {
    fn drop(&mut self) {
        // SAFETY: the manager came from `espgw_imb_new_job_mgr`, is owned
        // by this value alone and no job is in flight (every job is
        // completed before the call that submitted it returns).
        unsafe { espgw_imb_free_mgr(self.0.as_ptr()) }
    }
}

thread_local! {
    /// This thread's job manager, made on first use.
    static JOB_MGR: Option<JobMgr> = JobMgr::new();
}

/// Runs one ChaCha20-Poly1305 job on this thread's manager, the computed
/// tag written to `tag`. Panics only if the manager cannot be made on this
/// thread (out of memory: `ChachaKey::new` made one on its own thread, so
/// the library runs on this CPU) or the library refuses a job whose
/// parameters are all in range (a broken library).
fn chacha_job(
    encrypt: bool,
    key: &[u8; 32],
    nonce: &[u8; 12],
    aad: &[u8],
    buf: &mut [u8],
    tag: &mut [u8; TAG_LEN],
) {
    let done = JOB_MGR.with(|mgr| {
        let mgr = mgr
            .as_ref()
            .expect("intel-ipsec-mb job manager for this thread");
        // SAFETY: `mgr` is this thread's manager (thread-local, so no other
        // thread submits to it, and the call completes its job before
        // returning); `key` is valid for 32 reads, `nonce` for 12, `aad`
        // for `aad.len()`, `buf` for `buf.len()` reads and writes (in place
        // is supported), `tag` for 16 writes. Empty slices pass a dangling
        // non-null pointer that the library does not dereference for
        // length 0.
        unsafe {
            espgw_imb_chacha_poly(
                mgr.0.as_ptr(),
                c_int::from(encrypt),
                key.as_ptr(),
                buf.as_mut_ptr(),
                buf.len() as u64,
                nonce.as_ptr(),
                aad.as_ptr(),
                aad.len() as u64,
                tag.as_mut_ptr(),
            )
        }
    });
    assert_eq!(done, 0, "intel-ipsec-mb refused a ChaCha20-Poly1305 job");
}

/// A ChaCha20-Poly1305 key (RFC 8439 AEAD) for intel-ipsec-mb's job API.
/// The key needs no expansion; it is kept in a box and zeroized on drop.
pub struct ChachaKey {
    key: Box<[u8; 32]>,
}

impl ChachaKey {
    /// A 32-byte key; `None` for another length, or if the library or a
    /// job manager cannot be made here.
    pub fn new(key: &[u8]) -> Option<ChachaKey> {
        let key: [u8; 32] = key.try_into().ok()?;
        Library::get()?;
        if !JOB_MGR.with(Option::is_some) {
            return None;
        }
        Some(ChachaKey { key: Box::new(key) })
    }

    /// Encrypts `buf` in place and returns the tag over `aad` and the
    /// ciphertext.
    pub fn seal(&self, nonce: &[u8; 12], aad: &[u8], buf: &mut [u8]) -> [u8; TAG_LEN] {
        let mut tag = [0u8; TAG_LEN];
        self.seal_into(nonce, aad, buf, &mut tag);
        tag
    }

    /// [`ChachaKey::seal`] with the tag written to `tag` by the library
    /// itself (see [`GcmKey::seal_into`]).
    pub fn seal_into(&self, nonce: &[u8; 12], aad: &[u8], buf: &mut [u8], tag: &mut [u8; TAG_LEN]) {
        chacha_job(true, &self.key, nonce, aad, buf, tag);
    }

    /// Decrypts `buf` in place if `tag` verifies over `aad` and the
    /// ciphertext. The library decrypts and computes the tag in one pass;
    /// on a mismatch the buffer is encrypted again under the same nonce
    /// (the keystream is its own inverse), so it holds the ciphertext it
    /// came with and no plaintext is released.
    pub fn open(
        &self,
        nonce: &[u8; 12],
        aad: &[u8],
        buf: &mut [u8],
        tag: &[u8; TAG_LEN],
    ) -> Result<(), TagMismatch> {
        let mut computed = [0u8; TAG_LEN];
        chacha_job(false, &self.key, nonce, aad, buf, &mut computed);
        verify_or_restore(&computed, tag, || {
            let _ = self.seal(nonce, aad, buf);
        })
    }
}

impl Drop for ChachaKey {
    fn drop(&mut self) {
        self.key.zeroize();
    }
}

impl core::fmt::Debug for ChachaKey {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ChachaKey").finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_data_fits() {
        // SAFETY: a pure function of the library.
        let n = unsafe { espgw_imb_gcm_key_bytes() };
        assert!(n <= GCM_KEY_BYTES && n > 500, "{n}");
    }

    /// A failed open leaves the ciphertext it was given (no plaintext),
    /// and the right tag opens it; for both AEADs, empty to multi-block.
    #[test]
    fn a_failed_open_restores_the_ciphertext() {
        let gcm = [GcmKey::new(&[0x42; 16]), GcmKey::new(&[0x43; 32])];
        let chacha = ChachaKey::new(&[0x44; 32]);
        type Seal<'a> = Box<dyn Fn(&mut [u8]) -> [u8; TAG_LEN] + 'a>;
        type Open<'a> = Box<dyn Fn(&mut [u8], &[u8; TAG_LEN]) -> Result<(), TagMismatch> + 'a>;
        let (nonce, aad) = ([7u8; 12], [0x11u8; 8]);
        let mut aeads: Vec<(&str, Seal, Open)> = Vec::new();
        for k in gcm.iter().flatten() {
            aeads.push((
                "gcm",
                Box::new(move |b: &mut [u8]| k.seal(&nonce, &aad, b)),
                Box::new(move |b: &mut [u8], t: &[u8; TAG_LEN]| k.open(&nonce, &aad, b, t)),
            ));
        }
        if let Some(k) = &chacha {
            aeads.push((
                "chacha",
                Box::new(move |b: &mut [u8]| k.seal(&nonce, &aad, b)),
                Box::new(move |b: &mut [u8], t: &[u8; TAG_LEN]| k.open(&nonce, &aad, b, t)),
            ));
        }
        assert_eq!(aeads.len(), 3, "the library runs here (tests need it)");
        for (name, seal, open) in &aeads {
            for len in [0usize, 1, 16, 63, 64, 65, 1420] {
                let pt: Vec<u8> = (0..len).map(|i| (i * 7 + 3) as u8).collect();
                let mut buf = pt.clone();
                let tag = seal(&mut buf);
                let ct = buf.clone();
                assert!(len == 0 || ct != pt, "{name} {len}: not encrypted");
                let mut bad = tag;
                bad[len % TAG_LEN] ^= 0x80;
                assert_eq!(open(&mut buf, &bad), Err(TagMismatch), "{name} {len}");
                assert_eq!(buf, ct, "{name} {len}: ciphertext not restored");
                open(&mut buf, &tag).unwrap_or_else(|_| panic!("{name} {len}: good tag"));
                assert_eq!(buf, pt, "{name} {len}");
            }
        }
    }

    #[test]
    fn a_tag_differing_in_any_one_bit_is_refused_and_restored() {
        let tag: [u8; TAG_LEN] = core::array::from_fn(|i| (i * 37 + 5) as u8);
        assert_eq!(
            verify_or_restore(&tag, &tag, || panic!("restored a good tag")),
            Ok(())
        );
        for byte in 0..TAG_LEN {
            for bit in 0..8 {
                let mut bad = tag;
                bad[byte] ^= 1 << bit;
                let mut restored = false;
                let verdict = verify_or_restore(&tag, &bad, || restored = true);
                assert_eq!(verdict, Err(TagMismatch), "byte {byte} bit {bit}");
                assert!(restored, "byte {byte} bit {bit}: buffer not restored");
            }
        }
    }

    #[test]
    fn wrong_key_lengths_are_refused_and_debug_hides_the_key() {
        for len in [0, 15, 17, 24, 31, 33] {
            assert!(GcmKey::new(&vec![1; len]).is_none(), "{len}");
        }
        let key = GcmKey::new(&[0xab; 32]).expect("library");
        let shown = format!("{key:?}");
        assert_eq!(shown, "GcmKey { key_len: 32 }");
    }
}

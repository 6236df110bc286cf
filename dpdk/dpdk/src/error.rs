//! Errors from DPDK calls: what was attempted plus the errno DPDK reported.

use std::ffi::CStr;
use std::fmt;

use dpdk_sys as sys;

/// A failed DPDK call. `errno` is a positive errno value (or one of DPDK's
/// own `E_RTE_*` codes); [`fmt::Display`] shows DPDK's text for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    context: String,
    errno: i32,
}

/// Result alias of this crate.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// An error with the given context and positive errno.
    pub fn new(context: impl Into<String>, errno: i32) -> Self {
        Error {
            context: context.into(),
            errno: errno.abs(),
        }
    }

    /// Bad input rejected before calling DPDK (EINVAL).
    pub(crate) fn invalid(context: impl Into<String>) -> Self {
        Error::new(context, libc_errno::EINVAL)
    }

    /// An error from the thread's `rte_errno`, for calls that return NULL or -1.
    pub(crate) fn from_rte_errno(context: impl Into<String>) -> Self {
        // SAFETY: reads the calling thread's rte_errno; no preconditions.
        let errno = unsafe { sys::shim_rte_errno() };
        Error::new(context, errno)
    }

    /// Maps a DPDK return value (negative errno on failure) to a result.
    pub(crate) fn check(ret: i32, context: impl FnOnce() -> String) -> Result<i32> {
        if ret < 0 {
            Err(Error::new(context(), -ret))
        } else {
            Ok(ret)
        }
    }

    /// What was attempted.
    pub fn context(&self) -> &str {
        &self.context
    }

    /// The positive errno value.
    pub fn errno(&self) -> i32 {
        self.errno
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // SAFETY: rte_strerror accepts any value and returns a NUL-terminated
        // string (static, or in a per-thread buffer); we copy it out at once.
        let text = unsafe { CStr::from_ptr(sys::rte_strerror(self.errno)) };
        write!(
            f,
            "{}: {} (errno {})",
            self.context,
            text.to_string_lossy(),
            self.errno
        )
    }
}

impl std::error::Error for Error {}

/// The few errno values this crate produces itself (Linux values).
pub(crate) mod libc_errno {
    pub const ENOENT: i32 = 2;
    pub const EIO: i32 = 5;
    pub const ENOMEM: i32 = 12;
    pub const EBUSY: i32 = 16;
    pub const EINVAL: i32 = 22;
    pub const ENOSPC: i32 = 28;
    pub const EALREADY: i32 = 114;
}

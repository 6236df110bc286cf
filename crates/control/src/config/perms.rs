//! Files holding keys must not be readable by anyone but their owner.

use std::path::Path;

use super::reader::Ctx;

/// Warns when a file that holds key material is group/other readable.
pub(crate) fn warn_if_readable(ctx: &mut Ctx, path: &Path) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if let Ok(meta) = std::fs::metadata(path) {
            let mode = meta.permissions().mode() & 0o777;
            if mode & 0o044 != 0 {
                ctx.warn_file(format!(
                    "holds keys and is readable by group/others (mode {mode:04o}); chmod 600 it"
                ));
            }
        }
    }
    #[cfg(not(unix))]
    let _ = (ctx, path);
}

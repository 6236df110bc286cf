//! Config and key files must be safe from other local users: nobody else
//! may change them (they decide keys and what is protected), and files
//! holding keys must not be readable by anyone but their owner.

use std::path::Path;

use super::reader::Ctx;

/// What a checked file holds: key files and configs with inline keys must
/// also be unreadable by others.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Holds {
    Keys,
    SettingsOnly,
}

/// Warns (whole-file warnings on `ctx`) when `path` is writable by group
/// or others, owned by someone other than root or the caller, or, when it
/// holds keys, readable by group or others.
pub(crate) fn warn_if_unsafe(ctx: &mut Ctx, path: &Path, holds: Holds) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let Ok(meta) = std::fs::metadata(path) else {
            return;
        };
        let mode = meta.mode() & 0o777;
        let me = rustix::process::geteuid().as_raw();
        let owner = meta.uid();
        if owner != 0 && owner != me {
            ctx.warn_file(format!(
                "is owned by uid {owner}, not by root or you (uid {me}): its owner can change \
                 the gateway's keys and policy; chown it"
            ));
        }
        if mode & 0o022 != 0 {
            ctx.warn_file(format!(
                "is writable by group/others (mode {mode:04o}): they can change the gateway's \
                 keys and policy; chmod go-w it"
            ));
        }
        if holds == Holds::Keys && mode & 0o044 != 0 {
            ctx.warn_file(format!(
                "holds keys and is readable by group/others (mode {mode:04o}); chmod 600 it"
            ));
        }
    }
    #[cfg(not(unix))]
    let _ = (ctx, path, holds);
}

//! Who may use the control socket, and whether a socket path is safe.
//!
//! The socket changes keys, so three layers keep others out (threat: a
//! local unprivileged user):
//! - the file: mode 0600 (0660 with `[gateway].control_group`), created
//!   inside a private directory so it is never connectable with a wider
//!   mode, in a parent directory nobody else can write ([`check_dir`]);
//! - the peer: every accepted connection's SO_PEERCRED is checked against
//!   [`Access`] (root, our own uid, or a member of the control group);
//! - the client: `espgw ctl` sends keys only to a socket owned by root or
//!   by the caller, served by such a process ([`check_server`]), so a
//!   socket planted by someone else never receives them.

use std::fmt;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::UnixStream;
use std::path::Path;

/// Linux `S_ISVTX`: in a sticky directory only a file's owner may remove
/// or rename it.
const STICKY: u32 = 0o1000;

/// The credentials the kernel recorded for the other end of a Unix socket
/// (at `connect` for a client, at `listen` for a server).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    pub pid: i32,
    pub uid: u32,
    pub gid: u32,
}

impl fmt::Display for Peer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "pid {} uid {} gid {}", self.pid, self.uid, self.gid)
    }
}

/// The peer of a connected Unix stream (SO_PEERCRED).
pub fn peer_of(stream: &UnixStream) -> io::Result<Peer> {
    let cred = rustix::net::sockopt::socket_peercred(stream)?;
    Ok(Peer {
        pid: cred.pid.as_raw_pid(),
        uid: cred.uid.as_raw(),
        gid: cred.gid.as_raw(),
    })
}

/// This process's effective uid.
pub fn my_uid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// Who may talk to the control socket: root, `owner` (the gateway's own
/// uid) and, when set, members of `group`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Access {
    pub owner: u32,
    pub group: Option<u32>,
}

impl Access {
    /// Root and this process's uid, plus `group`'s members when given.
    pub fn for_this_process(group: Option<u32>) -> Access {
        Access {
            owner: my_uid(),
            group,
        }
    }

    /// Whether `peer` may send requests. Group membership counts the
    /// peer's effective gid and its supplementary groups (read from
    /// /proc: SO_PEERCRED carries only the primary gid).
    pub fn allows(&self, peer: &Peer) -> bool {
        self.allows_with_groups(peer, || supplementary_groups(peer.pid))
    }

    fn allows_with_groups(&self, peer: &Peer, groups: impl FnOnce() -> Vec<u32>) -> bool {
        if peer.uid == 0 || peer.uid == self.owner {
            return true;
        }
        match self.group {
            Some(g) => peer.gid == g || groups().contains(&g),
            None => false,
        }
    }
}

/// The supplementary groups of process `pid` (the `Groups:` line of
/// /proc/PID/status), or none when it cannot be read. The peer is still
/// connected (waiting for our answer), so its pid is still its own.
fn supplementary_groups(pid: i32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .map(|s| groups_line(&s))
        .unwrap_or_default()
}

fn groups_line(status: &str) -> Vec<u32> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("Groups:"))
        .map(|g| {
            g.split_whitespace()
                .filter_map(|n| n.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// Refuses a directory for the control socket that someone other than
/// root or `me` could change: owned by another user, or writable by group
/// or others (they could replace the socket with their own). Ancestors
/// are checked the same way, except that sticky world-writable ones such
/// as /tmp are fine (nobody can rename what lies below them).
pub fn check_dir(dir: &Path, me: u32) -> io::Result<()> {
    let dir = dir.canonicalize()?;
    for (i, d) in dir.ancestors().enumerate() {
        let meta = std::fs::metadata(d)?;
        let (uid, mode) = (meta.uid(), meta.mode());
        let refuse = |why: String| {
            Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!(
                    "{} {why}; the control socket's directory and the ones above it must be \
                     owned by root or uid {me} and not writable by group/others",
                    d.display()
                ),
            ))
        };
        if uid != 0 && uid != me {
            return refuse(format!("is owned by uid {uid}"));
        }
        let writable = mode & 0o022 != 0;
        let parent = i == 0;
        if writable && (parent || mode & STICKY == 0) {
            return refuse(format!(
                "is writable by group/others (mode {:04o})",
                mode & 0o7777
            ));
        }
    }
    Ok(())
}

/// Before sending keys: the socket file must be owned by root or `me`,
/// and so must the process that listens on it.
pub fn check_server(path: &Path, stream: &UnixStream, me: u32) -> Result<(), String> {
    let owner = std::fs::symlink_metadata(path)
        .map_err(|e| format!("{}: {e}", path.display()))?
        .uid();
    if owner != 0 && owner != me {
        return Err(format!(
            "{} is owned by uid {owner}, not by root or you (uid {me}); not sending keys to it",
            path.display()
        ));
    }
    let server =
        peer_of(stream).map_err(|e| format!("{}: peer credentials: {e}", path.display()))?;
    if server.uid != 0 && server.uid != me {
        return Err(format!(
            "{} is served by a process of uid {}, not by root or you (uid {me}); not sending keys to it",
            path.display(),
            server.uid
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(uid: u32, gid: u32) -> Peer {
        Peer { pid: 1, uid, gid }
    }

    #[test]
    fn root_owner_and_group_members_only() {
        let a = Access {
            owner: 1000,
            group: None,
        };
        let none = Vec::new;
        assert!(a.allows_with_groups(&peer(0, 0), none));
        assert!(a.allows_with_groups(&peer(1000, 5), none));
        assert!(!a.allows_with_groups(&peer(1001, 5), none));
        let g = Access {
            owner: 1000,
            group: Some(5),
        };
        assert!(g.allows_with_groups(&peer(1001, 5), none));
        assert!(!g.allows_with_groups(&peer(1001, 6), none));
        assert!(g.allows_with_groups(&peer(1001, 6), || vec![4, 5]));
        assert!(!a.allows_with_groups(&peer(1001, 6), || vec![4, 5]));
    }

    #[test]
    fn groups_come_from_the_status_line() {
        let status = "Name:\tcat\nUid:\t1 1 1 1\nGroups:\t4 24 27 \nNgid:\t0\n";
        assert_eq!(groups_line(status), vec![4, 24, 27]);
        assert_eq!(groups_line("Groups:\n"), Vec::<u32>::new());
        assert_eq!(groups_line("nothing"), Vec::<u32>::new());
        // Our own process: the line exists and parses.
        let own = std::fs::read_to_string("/proc/self/status").unwrap();
        assert!(own.contains("Groups:"));
    }
}

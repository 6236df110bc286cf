//! The control socket: a Unix stream socket speaking JSON lines, served by
//! a std thread (plus one short-lived thread per connection, so a client
//! that stalls cannot block the others). Who may connect: [`Access`]
//! (see the access module for the three layers).

use std::fs;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use tracing::{debug, info, warn};
use zeroize::Zeroizing;

use super::access::{check_dir, my_uid, peer_of, Access};
use super::control::ControlBackend;
use super::protocol::{self, Request, MAX_REQUEST_BYTES};

/// A connection idle this long is closed.
const IDLE_TIMEOUT: Duration = Duration::from_secs(30);

/// A running control socket; dropping it stops the server and removes the
/// socket file.
pub struct ControlServer {
    path: PathBuf,
    stop: Arc<AtomicBool>,
    refused: Arc<AtomicU64>,
    thread: Option<JoinHandle<()>>,
}

impl ControlServer {
    /// [`Self::bind_with`] for root and this process's uid only.
    pub fn bind(path: &Path, backend: Arc<dyn ControlBackend>) -> io::Result<ControlServer> {
        Self::bind_with(path, backend, Access::for_this_process(None))
    }

    /// Binds `path` and serves `backend` to the peers `access` allows.
    ///
    /// The parent directory is created (mode 0700, or 0750 with a control
    /// group) if missing, and refused if someone other than root or us
    /// could write it. The socket is bound inside a fresh private
    /// directory, given its final mode (0600, or 0660 and the control
    /// group) there, and only then renamed to `path`: at no instant can
    /// anyone else connect to it. A stale socket nobody listens on is
    /// replaced; anything else at `path` is an error.
    pub fn bind_with(
        path: &Path,
        backend: Arc<dyn ControlBackend>,
        access: Access,
    ) -> io::Result<ControlServer> {
        let dir = match path.parent().filter(|d| !d.as_os_str().is_empty()) {
            Some(d) => d.to_path_buf(),
            None => PathBuf::from("."),
        };
        if !dir.exists() {
            let mode = if access.group.is_some() { 0o750 } else { 0o700 };
            fs::DirBuilder::new()
                .recursive(true)
                .mode(mode)
                .create(&dir)?;
            if let Some(g) = access.group {
                std::os::unix::fs::chown(&dir, None, Some(g))?;
            }
        }
        check_dir(&dir, access.owner)?;
        remove_stale(path)?;
        let listener = bind_privately(path, &dir, access.group)?;
        let stop = Arc::new(AtomicBool::new(false));
        let refused = Arc::new(AtomicU64::new(0));
        let thread = {
            let (stop, refused) = (Arc::clone(&stop), Arc::clone(&refused));
            std::thread::Builder::new()
                .name("espgw-ctl-sock".into())
                .spawn(move || accept_loop(listener, backend, access, stop, refused))?
        };
        info!(path = %path.display(), "control socket listening");
        Ok(ControlServer {
            path: path.to_path_buf(),
            stop,
            refused,
            thread: Some(thread),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Connections refused because of the peer's credentials.
    pub fn refused_peers(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }
}

impl Drop for ControlServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the blocking accept. If the path is gone (someone removed
        // the file or its directory) nothing can wake it: leave the thread
        // blocked rather than hang here.
        let woken = UnixStream::connect(&self.path).is_ok();
        if let Some(t) = self.thread.take().filter(|_| woken) {
            let _ = t.join();
        }
        let _ = fs::remove_file(&self.path);
    }
}

/// Binds the socket as `staging/s` inside a new mode-0700 directory next
/// to `path`, sets its final mode and group, and renames it to `path`.
/// (A umask would do the same for the bind alone, but it is per process
/// and other threads create files meanwhile.)
fn bind_privately(path: &Path, dir: &Path, group: Option<u32>) -> io::Result<UnixListener> {
    static STAGING: AtomicU64 = AtomicU64::new(0);
    let staging = dir.join(format!(
        ".espgw-ctl-{}-{}",
        std::process::id(),
        STAGING.fetch_add(1, Ordering::Relaxed)
    ));
    // Not recursive: it must be new, so nobody else holds it open.
    fs::DirBuilder::new().mode(0o700).create(&staging)?;
    let bound = (|| {
        let inner = staging.join("s");
        let listener = UnixListener::bind(&inner)?;
        let mode = match group {
            Some(g) => {
                std::os::unix::fs::chown(&inner, None, Some(g))?;
                0o660
            }
            None => 0o600,
        };
        fs::set_permissions(&inner, fs::Permissions::from_mode(mode))?;
        fs::rename(&inner, path)?;
        Ok(listener)
    })();
    let _ = fs::remove_file(staging.join("s"));
    let _ = fs::remove_dir(&staging);
    bound
}

/// A socket left behind by a gateway that died is removed; a live one
/// (someone accepts connections) or a non-socket file is an error.
fn remove_stale(path: &Path) -> io::Result<()> {
    let Ok(meta) = fs::symlink_metadata(path) else {
        return Ok(());
    };
    if !meta.file_type().is_socket() {
        return Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!("{} exists and is not a socket", path.display()),
        ));
    }
    if UnixStream::connect(path).is_ok() {
        return Err(io::Error::new(
            io::ErrorKind::AddrInUse,
            format!("{} is in use by a running gateway", path.display()),
        ));
    }
    fs::remove_file(path)
}

fn accept_loop(
    listener: UnixListener,
    backend: Arc<dyn ControlBackend>,
    access: Access,
    stop: Arc<AtomicBool>,
    refused: Arc<AtomicU64>,
) {
    for conn in listener.incoming() {
        if stop.load(Ordering::SeqCst) {
            break;
        }
        let stream = match conn {
            Ok(s) => s,
            Err(e) => {
                warn!(error = %e, "control socket accept failed");
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
        };
        match peer_of(&stream) {
            Ok(peer) if access.allows(&peer) => {}
            Ok(peer) => {
                let n = refused.fetch_add(1, Ordering::Relaxed) + 1;
                warn!(%peer, refused_total = n, "control socket: peer refused (not root, the gateway's uid or the control group)");
                refuse(
                    stream,
                    &format!("uid {} may not use this control socket", peer.uid),
                );
                continue;
            }
            Err(e) => {
                let n = refused.fetch_add(1, Ordering::Relaxed) + 1;
                warn!(error = %e, refused_total = n, "control socket: peer credentials unreadable, refused");
                continue;
            }
        }
        let backend = Arc::clone(&backend);
        let spawned = std::thread::Builder::new()
            .name("espgw-ctl-conn".into())
            .spawn(move || {
                if let Err(e) = serve(stream, backend.as_ref()) {
                    debug!(error = %e, "control connection ended");
                }
            });
        if let Err(e) = spawned {
            warn!(error = %e, "control socket: cannot start a connection thread");
        }
    }
}

/// Tells a refused peer why, without reading what it sent, and closes.
fn refuse(mut stream: UnixStream, why: &str) {
    // Never block the accept loop on a peer that does not read.
    let _ = stream.set_nonblocking(true);
    let _ = write_line(&mut stream, &protocol::error(why));
}

/// Answers requests on one connection until it closes.
pub fn serve(stream: UnixStream, backend: &dyn ControlBackend) -> io::Result<()> {
    stream.set_read_timeout(Some(IDLE_TIMEOUT))?;
    stream.set_write_timeout(Some(IDLE_TIMEOUT))?;
    // Keys go to root and the gateway's own user, never to the control
    // group (which may manage SAs but not read their keys).
    let may_read_keys = peer_of(&stream).is_ok_and(|p| p.uid == 0 || p.uid == my_uid());
    let mut writer = stream.try_clone()?;
    let mut reader = BufReader::new(stream);
    loop {
        // The line may hold keys: zeroized when dropped.
        let mut line = Zeroizing::new(Vec::new());
        let n = (&mut reader)
            .take(MAX_REQUEST_BYTES as u64 + 1)
            .read_until(b'\n', &mut line)?;
        if n == 0 {
            return Ok(());
        }
        let response = if line.len() > MAX_REQUEST_BYTES {
            // The rest of an oversized line cannot be resynchronized.
            let r = protocol::error(format!("request longer than {MAX_REQUEST_BYTES} bytes"));
            write_line(&mut writer, &r)?;
            return Ok(());
        } else {
            match std::str::from_utf8(&line) {
                Err(_) => protocol::error("request is not UTF-8"),
                Ok(text) if text.trim().is_empty() => continue,
                Ok(text) => match Request::parse(text) {
                    Ok(Request::KeysWireshark) if !may_read_keys => protocol::error(
                        "keys_wireshark: only root and the gateway's user may read keys",
                    ),
                    Ok(request) => backend.handle(request),
                    Err(e) => protocol::error(e),
                },
            }
        };
        write_line(&mut writer, &response)?;
    }
}

fn write_line(w: &mut UnixStream, v: &serde_json::Value) -> io::Result<()> {
    let mut text = serde_json::to_string(v).map_err(io::Error::other)?;
    text.push('\n');
    w.write_all(text.as_bytes())?;
    w.flush()
}

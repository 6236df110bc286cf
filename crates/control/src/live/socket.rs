//! The control socket: a Unix stream socket speaking JSON lines, served by
//! a std thread (plus one short-lived thread per connection, so a client
//! that stalls cannot block the others).

use std::fs;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use tracing::{debug, info, warn};
use zeroize::Zeroizing;

use super::control::ControlBackend;
use super::protocol::{self, Request, MAX_REQUEST_BYTES};

/// A connection idle this long is closed.
const IDLE_TIMEOUT: Duration = Duration::from_secs(30);

/// A running control socket; dropping it stops the server and removes the
/// socket file.
pub struct ControlServer {
    path: PathBuf,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl ControlServer {
    /// Binds `path` (creating its parent directory, mode 0700, if missing;
    /// replacing a stale socket nobody listens on; refusing to replace
    /// anything else), makes it mode 0600 and serves `backend`.
    pub fn bind(path: &Path, backend: Arc<dyn ControlBackend>) -> io::Result<ControlServer> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            if !dir.exists() {
                fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o700)
                    .create(dir)?;
            }
        }
        remove_stale(path)?;
        let listener = UnixListener::bind(path)?;
        // Only root (the gateway's user) may talk to it: it changes keys.
        fs::set_permissions(path, fs::Permissions::from_mode(0o600))?;
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let stop = Arc::clone(&stop);
            std::thread::Builder::new()
                .name("espgw-ctl-sock".into())
                .spawn(move || accept_loop(listener, backend, stop))?
        };
        info!(path = %path.display(), "control socket listening");
        Ok(ControlServer {
            path: path.to_path_buf(),
            stop,
            thread: Some(thread),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for ControlServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the blocking accept.
        let _ = UnixStream::connect(&self.path);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let _ = fs::remove_file(&self.path);
    }
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

fn accept_loop(listener: UnixListener, backend: Arc<dyn ControlBackend>, stop: Arc<AtomicBool>) {
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

/// Answers requests on one connection until it closes.
pub fn serve(stream: UnixStream, backend: &dyn ControlBackend) -> io::Result<()> {
    stream.set_read_timeout(Some(IDLE_TIMEOUT))?;
    stream.set_write_timeout(Some(IDLE_TIMEOUT))?;
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

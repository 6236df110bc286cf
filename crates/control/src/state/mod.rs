//! Persisted SA state of manually keyed SAs: outbound sequence-number
//! reservations, inbound high-water marks, and a record of every key this
//! gateway ever used.
//!
//! Why: the ESP IV of the AEAD suites is the sequence number, so an SA whose
//! sequence starts at 1 again under the same key (an `espgw run` restart
//! with keys from the config, or a key given twice) sends the same nonce
//! twice, which gives away the keystream and the GHASH key (RFC 4106
//! section 8, RFC 7634 section 4). With this module:
//!
//! - an outbound SA never uses a number that is not first *reserved on disk*
//!   (written and fsynced): the [`SeqKeeper`] raises the SA's ceiling
//!   ([`OutboundSa::raise_ceiling`]) only after the reservation is durable,
//!   and a restart continues above the last reservation, crash or not;
//! - an inbound SA's highest authenticated number is written at most once a
//!   second and when the gateway stops, and a restart treats every number up
//!   to it as seen, so packets captured before the restart are replays;
//! - every key is recorded as a keyed hash (HMAC-SHA256 under a random
//!   secret kept in the directory, never the key itself) with its SPI and
//!   direction: a restart with the same key for the same SA continues, the
//!   same key for another SA is refused, and live changes refuse any key
//!   already recorded.
//!
//! Layout of the directory (created 0700, files 0600):
//!
//! ```text
//! secret                          32 random bytes: the HMAC key of the key ids
//! out-0000a001-<key id>.seq       "espgw-seq v1 tunnel=NAME value=N": reserved up to N
//! in-0000b001-<key id>.seq        "espgw-seq v1 tunnel=NAME value=N": received up to N
//! ```
//!
//! Records are never deleted: an SA that is gone keeps its key's record, so
//! the key stays refused. Each write goes to a temporary file that is
//! fsynced and renamed over the record, then the directory is fsynced.

use std::collections::HashMap;
use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::{Duration, Instant};

use espgw_esp::{InboundCounters, InboundSa, OutboundSa, Suite};
use ring::hmac;
use ring::rand::{SecureRandom, SystemRandom};
use tracing::{error, info, warn};
use zeroize::Zeroizing;

/// Direction of an SA, as recorded in the state directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SaDir {
    Out,
    In,
}

impl SaDir {
    pub fn name(self) -> &'static str {
        match self {
            SaDir::Out => "out",
            SaDir::In => "in",
        }
    }
}

/// A key's identity: the first 16 bytes of HMAC-SHA256(secret, suite, key,
/// auth key). Tells keys apart without revealing them.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct KeyId([u8; 16]);

impl fmt::Display for KeyId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for KeyId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "KeyId({self})")
    }
}

/// Computes [`KeyId`]s under one secret.
pub struct KeyHasher(hmac::Key);

impl KeyHasher {
    fn new(secret: &[u8]) -> KeyHasher {
        KeyHasher(hmac::Key::new(hmac::HMAC_SHA256, secret))
    }

    /// A hasher with a fresh random secret: ids comparable within this
    /// process only (a gateway without a state directory).
    pub fn ephemeral() -> KeyHasher {
        let mut secret = Zeroizing::new([0u8; 32]);
        // The system RNG does not fail on Linux; a zero secret would still
        // tell keys apart, just not hide them from a dictionary.
        let _ = SystemRandom::new().fill(&mut secret[..]);
        KeyHasher::new(&secret[..])
    }

    /// The id of one SA's keying material. The suite is hashed in so the
    /// same bytes under two suites are two keys; lengths keep the fields
    /// apart.
    pub fn key_id(&self, suite: Suite, key: &[u8], auth_key: &[u8]) -> KeyId {
        let mut ctx = hmac::Context::with_key(&self.0);
        ctx.update(b"espgw key id v1\0");
        ctx.update(suite.name().as_bytes());
        ctx.update(&[0]);
        ctx.update(&(key.len() as u32).to_be_bytes());
        ctx.update(key);
        ctx.update(&(auth_key.len() as u32).to_be_bytes());
        ctx.update(auth_key);
        let tag = ctx.sign();
        let mut id = [0u8; 16];
        id.copy_from_slice(&tag.as_ref()[..16]);
        KeyId(id)
    }
}

/// What the directory says about one key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub dir: SaDir,
    pub spi: u32,
    pub tunnel: String,
    /// Outbound: numbers reserved up to here. Inbound: received up to here.
    pub value: u64,
}

/// Reading or writing the state failed. Names the file and why; never a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateError {
    pub path: PathBuf,
    pub what: String,
}

impl fmt::Display for StateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.what)
    }
}

impl std::error::Error for StateError {}

fn state_err(path: &Path, what: impl fmt::Display) -> StateError {
    StateError {
        path: path.to_path_buf(),
        what: what.to_string(),
    }
}

/// The state directory, opened: its key hasher and every record in it.
pub struct StateDir {
    path: PathBuf,
    hasher: KeyHasher,
    records: HashMap<KeyId, Record>,
}

const SECRET_FILE: &str = "secret";
const RECORD_MAGIC: &str = "espgw-seq v1";

impl StateDir {
    /// Opens `path`, creating it (0700, parents as needed) and its secret
    /// on first use, and reads every record. A directory that others can
    /// write is refused (they could roll a reservation back); one that
    /// others can read is made private with a warning.
    pub fn open(path: &Path) -> Result<StateDir, StateError> {
        if !path.exists() {
            fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(path)
                .map_err(|e| state_err(path, format!("cannot create the state directory: {e}")))?;
        }
        let meta = fs::metadata(path)
            .map_err(|e| state_err(path, format!("cannot read the state directory: {e}")))?;
        if !meta.is_dir() {
            return Err(state_err(path, "not a directory"));
        }
        if meta.mode() & 0o022 != 0 {
            return Err(state_err(
                path,
                format!(
                    "the state directory is writable by group or others (mode {:o}); run chmod 700 on it",
                    meta.mode() & 0o777
                ),
            ));
        }
        if meta.mode() & 0o077 != 0 {
            warn!(dir = %path.display(), mode = format!("{:o}", meta.mode() & 0o777), "state directory readable by others: made 0700");
            fs::set_permissions(path, fs::Permissions::from_mode(0o700))
                .map_err(|e| state_err(path, format!("cannot chmod 700: {e}")))?;
        }
        let secret = load_or_create_secret(path)?;
        let mut dir = StateDir {
            path: path.to_path_buf(),
            hasher: KeyHasher::new(&secret[..]),
            records: HashMap::new(),
        };
        dir.read_records()?;
        Ok(dir)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn hasher(&self) -> &KeyHasher {
        &self.hasher
    }

    /// The record of key `id`, if this gateway ever used it.
    pub fn record(&self, id: &KeyId) -> Option<&Record> {
        self.records.get(id)
    }

    /// Number of keys recorded.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// The file that holds key `id`'s record for `dir`/`spi`.
    pub fn file_of(&self, dir: SaDir, spi: u32, id: &KeyId) -> PathBuf {
        self.path.join(format!("{}-{spi:08x}-{id}.seq", dir.name()))
    }

    /// Writes a record durably (temporary file, fsync, rename, directory
    /// fsync) and remembers it.
    pub fn store(&mut self, id: KeyId, record: Record) -> Result<(), StateError> {
        let file = self.file_of(record.dir, record.spi, &id);
        let tmp = file.with_extension("tmp");
        let text = format!(
            "{RECORD_MAGIC} tunnel={} value={}\n",
            record.tunnel, record.value
        );
        let write = || -> std::io::Result<()> {
            let mut f = OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(&tmp)?;
            f.write_all(text.as_bytes())?;
            f.sync_all()?;
            fs::rename(&tmp, &file)?;
            File::open(&self.path)?.sync_all()
        };
        write().map_err(|e| state_err(&file, format!("cannot write the SA state: {e}")))?;
        self.records.insert(id, record);
        Ok(())
    }

    fn read_records(&mut self) -> Result<(), StateError> {
        let entries = fs::read_dir(&self.path)
            .map_err(|e| state_err(&self.path, format!("cannot list the state directory: {e}")))?;
        for entry in entries {
            let entry = entry.map_err(|e| state_err(&self.path, e))?;
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            let Some(stem) = name.strip_suffix(".seq") else {
                continue;
            };
            let file = entry.path();
            let (id, mut record) = parse_name(stem)
                .ok_or_else(|| state_err(&file, "not a record name (DIR-SPI-KEYID.seq)"))?;
            let mut text = String::new();
            File::open(&file)
                .and_then(|mut f| f.read_to_string(&mut text))
                .map_err(|e| state_err(&file, format!("cannot read: {e}")))?;
            let (tunnel, value) = parse_body(&text).ok_or_else(|| {
                state_err(
                    &file,
                    format!("damaged record (expected \"{RECORD_MAGIC} tunnel=NAME value=N\")"),
                )
            })?;
            record.tunnel = tunnel;
            record.value = value;
            if let Some(other) = self.records.get(&id) {
                // Two records of one key: the key served two SAs (it should
                // never happen). Keep the larger value, refuse nothing here.
                if other.value >= record.value {
                    continue;
                }
            }
            self.records.insert(id, record);
        }
        Ok(())
    }
}

fn load_or_create_secret(dir: &Path) -> Result<Zeroizing<Vec<u8>>, StateError> {
    let path = dir.join(SECRET_FILE);
    let mut secret = Zeroizing::new(Vec::new());
    match File::open(&path) {
        Ok(mut f) => {
            f.read_to_end(&mut secret)
                .map_err(|e| state_err(&path, format!("cannot read: {e}")))?;
            if secret.len() != 32 {
                return Err(state_err(&path, "damaged (expected 32 bytes)"));
            }
            Ok(secret)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            secret.resize(32, 0);
            SystemRandom::new()
                .fill(&mut secret[..])
                .map_err(|_| state_err(&path, "no system randomness"))?;
            let write = || -> std::io::Result<()> {
                let mut f = OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(0o600)
                    .open(&path)?;
                f.write_all(&secret)?;
                f.sync_all()?;
                File::open(dir)?.sync_all()
            };
            write().map_err(|e| state_err(&path, format!("cannot create: {e}")))?;
            Ok(secret)
        }
        Err(e) => Err(state_err(&path, format!("cannot read: {e}"))),
    }
}

fn parse_name(stem: &str) -> Option<(KeyId, Record)> {
    let mut parts = stem.splitn(3, '-');
    let dir = match parts.next()? {
        "out" => SaDir::Out,
        "in" => SaDir::In,
        _ => return None,
    };
    let spi = parts.next()?;
    let id_hex = parts.next()?;
    if spi.len() != 8 || id_hex.len() != 32 {
        return None;
    }
    let spi = u32::from_str_radix(spi, 16).ok()?;
    let mut id = [0u8; 16];
    for (i, b) in id.iter_mut().enumerate() {
        *b = u8::from_str_radix(id_hex.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some((
        KeyId(id),
        Record {
            dir,
            spi,
            tunnel: String::new(),
            value: 0,
        },
    ))
}

fn parse_body(text: &str) -> Option<(String, u64)> {
    let rest = text.strip_suffix('\n')?.strip_prefix(RECORD_MAGIC)?;
    let rest = rest.strip_prefix(" tunnel=")?;
    let (tunnel, value) = rest.rsplit_once(" value=")?;
    Some((tunnel.to_string(), value.parse().ok()?))
}

/// The one rule for a key's record (persisted here, or kept in memory by a
/// gateway without a state directory): no record, a new key, starts at 0;
/// at start-up the same SA (direction and SPI) continues from the
/// record's value; anything else is a key used before.
pub fn admit(
    record: Option<&Record>,
    dir: SaDir,
    spi: u32,
    admission: Admission,
) -> Result<u64, KeyRefused> {
    match record {
        None => Ok(0),
        Some(r) if admission == Admission::Startup && r.dir == dir && r.spi == spi => Ok(r.value),
        Some(r) => Err(KeyRefused::Reused {
            previous: r.clone(),
        }),
    }
}

/// How a new SA's key is judged against the records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// At start-up from the config: the same key for the same SA (direction
    /// and SPI) continues where it stopped; a key recorded for another SA
    /// is refused.
    Startup,
    /// A live change (`sa add`, `sa rekey`): any key already recorded is
    /// refused.
    Live,
}

/// Why a key is not accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyRefused {
    /// The key was recorded before (by this SA or another).
    Reused { previous: Record },
    /// Its state could not be read or written.
    State(StateError),
}

impl fmt::Display for KeyRefused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyRefused::Reused { previous } => write!(
                f,
                "this key was already used by this gateway ({} SA {:#010x} of tunnel {:?}); every SA needs a fresh key",
                previous.dir.name(),
                previous.spi,
                previous.tunnel
            ),
            KeyRefused::State(e) => write!(f, "SA state: {e}"),
        }
    }
}

/// The sizes of outbound reservations. A reservation is one durable write;
/// numbers reserved but not used before a restart are skipped, so blocks
/// start small and double while an SA uses them up in under
/// `fast_refill`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReservationPolicy {
    pub first_block: u64,
    pub max_block: u64,
    pub fast_refill: Duration,
}

impl Default for ReservationPolicy {
    /// 2^20 first (a restart of a quiet SA skips at most ~1 M numbers),
    /// up to 2^24 (~16.8 M: about a second of one SA at 14.88 Mpps, so a
    /// refill every ~0.5 s at line rate; 256 such restarts before a 32-bit
    /// sequence space is used up).
    fn default() -> Self {
        ReservationPolicy {
            first_block: 1 << 20,
            max_block: 1 << 24,
            fast_refill: Duration::from_secs(2),
        }
    }
}

/// How often [`SeqKeeper::spawn`]'s thread polls, and at most how long an
/// inbound high-water mark waits to be written.
pub const KEEPER_POLL: Duration = Duration::from_millis(5);
pub const INBOUND_WRITE_EVERY: Duration = Duration::from_secs(1);

struct WatchedOut {
    sa: Weak<OutboundSa>,
    id: KeyId,
    record: Record,
    block: u64,
    refilled_at: Instant,
}

struct WatchedIn {
    alive: Weak<InboundSa>,
    counters: Arc<InboundCounters>,
    id: KeyId,
    record: Record,
    written_at: Instant,
}

struct KeeperState {
    dir: StateDir,
    policy: ReservationPolicy,
    outbound: Vec<WatchedOut>,
    inbound: Vec<WatchedIn>,
}

/// Keeps the persisted state of every manually keyed SA: admits new SAs
/// (continuing or refusing by their key's record) and, off the workers,
/// extends outbound reservations before they run out and writes inbound
/// high-water marks. See the module documentation.
pub struct SeqKeeper {
    state: Mutex<KeeperState>,
    /// Write failures so far (each one also an error log line).
    failures: AtomicU64,
    /// Records written by [`Self::poll`] so far.
    writes: AtomicU64,
}

fn lock<X>(m: &Mutex<X>) -> MutexGuard<'_, X> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl SeqKeeper {
    pub fn new(dir: StateDir, policy: ReservationPolicy) -> SeqKeeper {
        SeqKeeper {
            state: Mutex::new(KeeperState {
                dir,
                policy,
                outbound: Vec::new(),
                inbound: Vec::new(),
            }),
            failures: AtomicU64::new(0),
            writes: AtomicU64::new(0),
        }
    }

    /// The state directory's path.
    pub fn path(&self) -> PathBuf {
        lock(&self.state).dir.path().to_path_buf()
    }

    /// The id of a key under this directory's secret.
    pub fn key_id(&self, suite: Suite, key: &[u8], auth_key: &[u8]) -> KeyId {
        lock(&self.state).dir.hasher().key_id(suite, key, auth_key)
    }

    /// The record of key `id`, if any.
    pub fn record(&self, id: &KeyId) -> Option<Record> {
        lock(&self.state).dir.record(id).cloned()
    }

    /// Write failures so far.
    pub fn failures(&self) -> u64 {
        self.failures.load(Relaxed)
    }

    /// Records written by the keeper's polls so far (reservations
    /// extended, high-water marks written).
    pub fn writes(&self) -> u64 {
        self.writes.load(Relaxed)
    }

    /// Where an SA with key `id` starts: the recorded value when the same
    /// SA continues, 0 for a new key; refused per `admission`.
    fn start_of(
        st: &KeeperState,
        id: &KeyId,
        dir: SaDir,
        spi: u32,
        admission: Admission,
    ) -> Result<u64, KeyRefused> {
        admit(st.dir.record(id), dir, spi, admission)
    }

    /// Admits an outbound SA: it continues above its key's last
    /// reservation, and its first reservation is on disk before it is
    /// returned. Refused when its key was used by another SA (or, live, at
    /// all), or when the state cannot be written.
    pub fn admit_outbound(
        &self,
        tunnel: &str,
        id: KeyId,
        sa: OutboundSa,
        admission: Admission,
    ) -> Result<Arc<OutboundSa>, KeyRefused> {
        let mut st = lock(&self.state);
        let spi = sa.spi();
        let start = Self::start_of(&st, &id, SaDir::Out, spi, admission)?;
        let sa = sa.starting_after(start);
        let block = st.policy.first_block;
        let reserved = start.saturating_add(block).min(sa.max_sequence());
        let record = Record {
            dir: SaDir::Out,
            spi,
            tunnel: tunnel.to_string(),
            value: reserved,
        };
        st.dir
            .store(id, record.clone())
            .map_err(KeyRefused::State)?;
        let sa = Arc::new(sa.with_ceiling(reserved));
        st.outbound.push(WatchedOut {
            sa: Arc::downgrade(&sa),
            id,
            record,
            block,
            refilled_at: Instant::now(),
        });
        if start != 0 {
            info!(tunnel, dir = "out", spi = %format_args!("{spi:#010x}"), after = start, "SA continues above its persisted sequence reservation");
        }
        Ok(sa)
    }

    /// Admits an inbound SA: it treats every number up to its key's last
    /// recorded high-water mark as seen; its key is recorded before it is
    /// returned.
    pub fn admit_inbound(
        &self,
        tunnel: &str,
        id: KeyId,
        sa: InboundSa,
        admission: Admission,
    ) -> Result<Arc<InboundSa>, KeyRefused> {
        let mut st = lock(&self.state);
        let spi = sa.spi();
        let start = Self::start_of(&st, &id, SaDir::In, spi, admission)?;
        let sa = sa.starting_after(start);
        let record = Record {
            dir: SaDir::In,
            spi,
            tunnel: tunnel.to_string(),
            value: start,
        };
        st.dir
            .store(id, record.clone())
            .map_err(KeyRefused::State)?;
        let counters = sa.counters();
        let sa = Arc::new(sa);
        st.inbound.push(WatchedIn {
            alive: Arc::downgrade(&sa),
            counters,
            id,
            record,
            written_at: Instant::now(),
        });
        if start != 0 {
            info!(tunnel, dir = "in", spi = %format_args!("{spi:#010x}"), up_to = start, "SA restored: sequence numbers up to its persisted high-water mark are replays");
        }
        Ok(sa)
    }

    /// One pass: extends every outbound reservation that is half used,
    /// writes inbound high-water marks that are due (all of them with
    /// `flush`), and forgets SAs that are gone (after a last write).
    /// Returns the number of records written.
    pub fn poll(&self, now: Instant, flush: bool) -> usize {
        let mut st = lock(&self.state);
        let st = &mut *st;
        let mut written = 0;
        let mut failures = 0;
        let policy = st.policy;
        st.outbound.retain_mut(|w| {
            let Some(sa) = w.sa.upgrade() else {
                return false;
            };
            let last = sa.last_sequence();
            let end = sa.max_sequence();
            let left = w.record.value.saturating_sub(last);
            if w.record.value >= end || left > w.block / 2 {
                return true;
            }
            // Used up faster than `fast_refill`: double the block, so the
            // refills keep ahead of the traffic with fewer writes.
            if now.duration_since(w.refilled_at) < policy.fast_refill {
                w.block = (w.block * 2).min(policy.max_block);
            }
            let mut record = w.record.clone();
            record.value = last.saturating_add(w.block).min(end);
            match st.dir.store(w.id, record.clone()) {
                Ok(()) => {
                    sa.raise_ceiling(record.value);
                    w.record = record;
                    w.refilled_at = now;
                    written += 1;
                }
                Err(e) => {
                    failures += 1;
                    error!(tunnel = %w.record.tunnel, dir = "out", spi = %format_args!("{:#010x}", w.record.spi), error = %e, "cannot extend the sequence reservation: the SA stops sending when it reaches the last reserved number (drops counted as seq_not_reserved)");
                }
            }
            true
        });
        st.inbound.retain_mut(|w| {
            let gone = w.alive.strong_count() == 0;
            let highest = w.counters.highest_seen();
            let due = flush || gone || now.duration_since(w.written_at) >= INBOUND_WRITE_EVERY;
            if highest > w.record.value && due {
                let mut record = w.record.clone();
                record.value = highest;
                match st.dir.store(w.id, record.clone()) {
                    Ok(()) => {
                        w.record = record;
                        w.written_at = now;
                        written += 1;
                    }
                    Err(e) => {
                        failures += 1;
                        error!(tunnel = %w.record.tunnel, dir = "in", spi = %format_args!("{:#010x}", w.record.spi), error = %e, "cannot write the inbound high-water mark");
                    }
                }
            }
            !gone
        });
        self.failures.fetch_add(failures, Relaxed);
        self.writes.fetch_add(written as u64, Relaxed);
        written
    }

    /// Runs [`Self::poll`] every [`KEEPER_POLL`] on its own thread until
    /// `stop`, then flushes every inbound high-water mark once more.
    pub fn spawn(
        self: &Arc<Self>,
        stop: Arc<std::sync::atomic::AtomicBool>,
    ) -> std::io::Result<std::thread::JoinHandle<()>> {
        let keeper = Arc::clone(self);
        std::thread::Builder::new()
            .name("espgw-seq-keeper".into())
            .spawn(move || {
                while !stop.load(Relaxed) {
                    keeper.poll(Instant::now(), false);
                    std::thread::sleep(KEEPER_POLL);
                }
                keeper.poll(Instant::now(), true);
            })
    }
}

impl fmt::Debug for SeqKeeper {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let st = lock(&self.state);
        f.debug_struct("SeqKeeper")
            .field("dir", &st.dir.path())
            .field("outbound", &st.outbound.len())
            .field("inbound", &st.inbound.len())
            .field("failures", &self.failures())
            .finish()
    }
}

#[cfg(test)]
mod tests;

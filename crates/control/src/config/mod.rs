//! The gateway config (`gateway.toml`): schema, validation, typed model.
//!
//! [`load`] reads a file and returns either a fully validated [`Config`]
//! (plus warnings) or every diagnostic found, errors and warnings in file
//! order. The reference for every key is docs/config.md.

pub mod connection;
mod diag;
pub mod dn;
mod keys;
mod lints;
mod mbufs;
mod model;
pub mod net;
mod perms;
mod reader;
mod sa;
mod sections;
mod source;
mod spd;
mod summary;
pub mod to_tables;

use std::path::Path;

use toml::de::DeTable;

pub use diag::{Diagnostic, Severity};
pub use espgw_esp::SecretBytes;
pub use lints::{fan_out_jobs, fan_out_reach, FAN_OUT_JOBS_PER_WORKER, WIDE_VECTOR_WORKERS};
pub use mbufs::{is_pci_device, mbufs_needed, MbufNeed, PIPELINE_RING_SLOTS, QUEUE_DESCRIPTORS};
pub use model::*;
pub use sections::dataplane::{
    check_spread_recheck_ms, DEFAULT_BURST, DEFAULT_MBUFS, DEFAULT_MTU,
    DEFAULT_SPREAD_MAX_ROUND_TRIP_NS, DEFAULT_SPREAD_RECHECK_MS, DEFAULT_SPREAD_WAIT_US, MAX_BURST,
    MAX_MBUFS, MAX_MTU, MAX_SPREAD_RECHECK_MS, MAX_SPREAD_WAIT_US, MIN_MBUFS, MIN_MTU_V4,
    MIN_MTU_V6, MIN_SPREAD_RECHECK_MS, MIN_SPREAD_WAIT_US, SPREAD_TRIAL_MS,
};
pub use sections::tunnel::{
    DEFAULT_PRIORITY, DEFAULT_REPLAY_WINDOW, MAX_REPLAY_WINDOW, SOFT_PERCENT,
};
pub use summary::Summary;
pub use to_tables::{
    policy_rule, sad_from_config, spd_from_config, tables_from_config, tunnel_id, tunnel_rule,
    tunnel_selector, SadFromConfigError,
};

use reader::{Ctx, Field, Table};
use sections::network::PortNames;
use sections::{connection as conn_section, dataplane, gateway, network, policy, tunnel, Located};
use source::SourceText;

/// Facts about the machine that some checks depend on.
#[derive(Debug, Clone)]
pub struct HostFacts {
    /// Cores available here (`workers = "all"`, oversubscription warning).
    pub cpus: usize,
    /// Warn about config and key files others can change (or, holding
    /// keys, read).
    pub check_permissions: bool,
    /// The CPUs the kernel keeps other tasks off (`isolcpus=`, read from
    /// /sys/devices/system/cpu/isolated); `None` where not known, and
    /// then nothing is said about it.
    pub isolated_cpus: Option<Vec<u32>>,
    /// The CPUs this process may run on (its affinity mask: `taskset`,
    /// systemd's `CPUAffinity=`, [`process_cpus`]); `None` where not
    /// known, and then `lcores` is checked against the count `cpus`.
    pub allowed_cpus: Option<Vec<u32>>,
    /// An Intel CPU whose AVX-512 the ciphers use: there, 512-bit AES-GCM
    /// on many cores at once was measured slower than 256-bit
    /// ([`lints::WIDE_VECTOR_WORKERS`]); false where not known.
    pub intel_avx512: bool,
}

impl HostFacts {
    /// A host of `cpus` CPUs and nothing else known: no permission
    /// checks, no isolated CPUs, not an Intel AVX-512 CPU. For a config
    /// text that is not this machine's file (a live `sa_add`, a fixture)
    /// and for tests, which change what they look at
    /// (`HostFacts { check_permissions: true, ..HostFacts::assumed(4) }`).
    pub fn assumed(cpus: usize) -> HostFacts {
        HostFacts {
            cpus,
            check_permissions: false,
            isolated_cpus: None,
            allowed_cpus: None,
            intel_avx512: false,
        }
    }

    pub fn this_machine() -> HostFacts {
        HostFacts {
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
            check_permissions: true,
            isolated_cpus: std::fs::read_to_string("/sys/devices/system/cpu/isolated")
                .ok()
                .and_then(|s| parse_cpu_list(&s)),
            allowed_cpus: Some(process_cpus()).filter(|cpus| !cpus.is_empty()),
            intel_avx512: std::fs::read_to_string("/proc/cpuinfo")
                .is_ok_and(|info| cpuinfo_says_intel_avx512(&info)),
        }
    }
}

/// Whether /proc/cpuinfo text describes an Intel CPU with AVX-512F and
/// VAES (what the 512-bit AES-GCM paths need), from its first processor.
pub fn cpuinfo_says_intel_avx512(info: &str) -> bool {
    // "name\t: value" lines; the first processor's come first.
    let field = |name: &str| {
        info.lines()
            .filter_map(|l| l.split_once(':'))
            .find(|(k, _)| k.trim() == name)
            .map_or("", |(_, v)| v.trim())
    };
    let intel = field("vendor_id") == "GenuineIntel";
    let flags = field("flags");
    let has = |f: &str| flags.split_whitespace().any(|x| x == f);
    intel && has("avx512f") && has("vaes")
}

/// A kernel CPU list (`0-3,8,10-11`, empty for none: the format of
/// /sys/devices/system/cpu/isolated and of `lcores`) as CPU numbers; `None`
/// if it is not one.
/// A CPU list as the kernel writes one (`0-3,8,10-11`): ascending runs as
/// `a-b`, joined by commas; repeats ignored; empty for none.
pub fn format_cpu_list(cpus: &[u32]) -> String {
    let mut sorted = cpus.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut runs: Vec<String> = Vec::new();
    let mut i = 0;
    while i < sorted.len() {
        let start = sorted[i];
        while i + 1 < sorted.len() && sorted[i + 1] == sorted[i] + 1 {
            i += 1;
        }
        let end = sorted[i];
        runs.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i += 1;
    }
    runs.join(",")
}

/// The CPUs the calling thread may run on (its affinity mask: `taskset`,
/// systemd's `CPUAffinity=`; before the EAL pins the main thread, the
/// process's), ascending; empty where it cannot be read.
pub fn process_cpus() -> Vec<u32> {
    let mut ids: Vec<u32> = core_affinity::get_core_ids()
        .unwrap_or_default()
        .into_iter()
        .filter_map(|c| u32::try_from(c.id).ok())
        .collect();
    ids.sort_unstable();
    ids
}

pub fn parse_cpu_list(text: &str) -> Option<Vec<u32>> {
    match text.trim() {
        "" => Some(Vec::new()),
        list => net::parse_lcores(list).ok(),
    }
}

/// Diagnostics of a successful load: warnings only.
pub type Warnings = Vec<Diagnostic>;

/// Reads and validates a config file for this machine.
pub fn load(path: &Path) -> Result<(Config, Warnings), Vec<Diagnostic>> {
    load_with(path, &HostFacts::this_machine())
}

/// [`load`] with explicit host facts (for tests and offline checking).
pub fn load_with(path: &Path, host: &HostFacts) -> Result<(Config, Warnings), Vec<Diagnostic>> {
    match std::fs::read_to_string(path) {
        Ok(text) => parse_str(path, text, host),
        Err(e) => Err(vec![Diagnostic {
            severity: Severity::Error,
            file: path.to_path_buf(),
            position: None,
            key: String::new(),
            message: format!("cannot be read: {e}"),
            expected: None,
            offset: 0,
        }]),
    }
}

const ROOT_KEYS: &[&str] = &[
    "default_action",
    "gateway",
    "dataplane",
    "port",
    "neighbor",
    "route",
    "tunnel",
    "policy",
    "connection",
];

/// Validates config text that came from `path` (used for messages and to
/// find key files relative to it). Takes the text by value so it is
/// zeroized after parsing: it may hold keys.
pub fn parse_str(
    path: &Path,
    text: String,
    host: &HostFacts,
) -> Result<(Config, Warnings), Vec<Diagnostic>> {
    let src = SourceText::new(path, text);
    let mut ctx = Ctx::new(&src);
    let (doc, syntax) = DeTable::parse_recoverable(&src.text);
    if !syntax.is_empty() {
        // The tree after a syntax error is a guess; checking it would
        // report errors that are not there.
        for e in &syntax {
            let span = e.span().unwrap_or(0..0);
            // message() only: Display would quote the source line, and that may be a key.
            ctx.error_at(&span, "", format!("TOML syntax: {}", e.message()), None);
        }
        return Err(finish(ctx.diags, path));
    }
    let root = Table::root(&mut ctx, "", &doc, ROOT_KEYS);
    let base_dir = path.parent().unwrap_or(Path::new("."));
    let config = read_document(&mut ctx, &root, host, base_dir);
    root.finish(&mut ctx);
    let mut diags = ctx.diags;
    let (config, key_file_diags, inline_keys) = config;
    diags.extend(key_file_diags);
    if host.check_permissions {
        let mut pctx = Ctx::new(&src);
        let holds = if inline_keys {
            perms::Holds::Keys
        } else {
            perms::Holds::SettingsOnly
        };
        perms::warn_if_unsafe(&mut pctx, path, holds);
        diags.extend(pctx.diags);
    }
    let diags = finish(diags, path);
    if diags.iter().any(Diagnostic::is_error) {
        return Err(diags);
    }
    match config {
        Some(config) => Ok((config, diags)),
        // Unreachable in practice: every dropped item reported an error.
        None => Err(diags),
    }
}

/// Sorts diagnostics: the config file first, then key files, each in file order.
fn finish(mut diags: Vec<Diagnostic>, main: &Path) -> Vec<Diagnostic> {
    diags.sort_by(|a, b| {
        (a.file != main, &a.file, a.offset).cmp(&(b.file != main, &b.file, b.offset))
    });
    diags
}

/// The items of an array of tables (`[[tunnel]]`), each with its keys.
fn tables<'n, 'i>(
    ctx: &mut Ctx,
    root: &Table<'n, 'i>,
    key: &'static str,
    allowed: &'static [&'static str],
) -> Vec<Table<'n, 'i>> {
    let Some(f) = root.get(ctx, key) else {
        return Vec::new();
    };
    let expected = format!("an array of tables ([[{key}]])");
    let items: Vec<Field> = f.array(ctx, &expected).unwrap_or_default();
    items.iter().filter_map(|i| i.table(ctx, allowed)).collect()
}

type Document = (Option<Config>, Vec<Diagnostic>, bool);

fn read_document(ctx: &mut Ctx, root: &Table, host: &HostFacts, base_dir: &Path) -> Document {
    let default_action = root
        .get(ctx, "default_action")
        .map_or(Some(PolicyAction::Discard), |f| {
            f.choice(ctx, policy::ACTIONS)
        });
    let gw_table = root
        .get(ctx, "gateway")
        .and_then(|f| f.table(ctx, gateway::KEYS));
    let gateway = gateway::read(ctx, gw_table);
    let dp_table = root
        .get(ctx, "dataplane")
        .and_then(|f| f.table(ctx, dataplane::KEYS));
    let mut dataplane = dataplane::read(ctx, dp_table, host);

    let mut ports: Vec<Located<Port>> = Vec::new();
    let mut declared = Vec::new();
    let mut any_port_failed = false;
    for t in tables(ctx, root, "port", network::PORT_KEYS) {
        let path = t.path.clone();
        if let Some(name) = t
            .get(ctx, "name")
            .and_then(|f| f.peek_str().map(str::to_string))
        {
            declared.push(name);
        }
        match network::read_port(ctx, t) {
            Some(item) => ports.push(Located { item, path }),
            None => any_port_failed = true,
        }
    }
    network::check_ports(ctx, &ports, any_port_failed);
    let port_items: Vec<Port> = ports.iter().map(|p| p.item.clone()).collect();
    let names = PortNames {
        ids: port_items
            .iter()
            .enumerate()
            .rev()
            .map(|(i, p)| (p.name.clone(), PortId(i)))
            .collect(),
        declared,
    };

    let neighbors: Vec<Neighbor> = tables(ctx, root, "neighbor", network::NEIGHBOR_KEYS)
        .into_iter()
        .filter_map(|t| network::read_neighbor(ctx, t, &port_items, &names))
        .collect();
    let routes: Vec<Route> = tables(ctx, root, "route", network::ROUTE_KEYS)
        .into_iter()
        .filter_map(|t| network::read_route(ctx, t, &port_items, &names))
        .collect();

    let env = tunnel::Env {
        ports: &port_items,
        routes: &routes,
        base_dir,
        host,
    };
    let mut tunnels: Vec<Located<Tunnel>> = Vec::new();
    let mut key_file_diags = Vec::new();
    let mut inline_keys = false;
    for t in tables(ctx, root, "tunnel", tunnel::KEYS) {
        let path = t.path.clone();
        let read = tunnel::read(ctx, t, &env);
        inline_keys |= read.inline_keys;
        key_file_diags.extend(read.key_file_diags);
        if let Some(item) = read.tunnel {
            tunnels.push(Located { item, path });
        }
    }
    tunnel::check_tunnels(ctx, &tunnels);

    let mut policies: Vec<Located<Policy>> = Vec::new();
    for t in tables(ctx, root, "policy", policy::KEYS) {
        let path = t.path.clone();
        if let Some(item) = policy::read(ctx, t) {
            policies.push(Located { item, path });
        }
    }
    let mut connections: Vec<Located<connection::Connection>> = Vec::new();
    for t in tables(ctx, root, "connection", conn_section::KEYS) {
        let path = t.path.clone();
        let read = conn_section::read(ctx, t, &env);
        inline_keys |= read.inline_keys;
        key_file_diags.extend(read.file_diags);
        if let Some(item) = read.connection {
            connections.push(Located { item, path });
        }
    }
    conn_section::check_connections(ctx, &connections, &tunnels, &policies, default_action);
    // per_cpu_sas = "auto": one CHILD_SA per data-plane worker.
    for c in &mut connections {
        for ch in c.item.children.iter_mut().filter(|ch| ch.per_cpu_auto) {
            ch.per_cpu_sas = u32::try_from(dataplane.workers).unwrap_or(u32::MAX).max(1);
        }
    }
    let spd = spd::build(ctx, &tunnels, &policies);
    check_mtu(ctx, &dataplane, &port_items, &tunnels);
    // What the decrypt fan-out may hold counts too (its own share, named).
    mbufs::size_pool(ctx, &mut dataplane, &port_items);
    lints::warn_local_ts_without_own_address(ctx, &port_items, &routes, &tunnels);
    lints::warn_replay_window_under_fan_out(ctx, &dataplane, &tunnels, &connections);
    lints::warn_fan_out_on_shared_cores(ctx, &dataplane, host);
    lints::warn_wide_vectors_on_many_intel_cores(ctx, &dataplane, host);

    let config = default_action.map(|default_action| Config {
        source: ctx.src.path.clone(),
        gateway,
        dataplane,
        ports: port_items,
        neighbors,
        routes,
        tunnels: tunnels.into_iter().map(|t| t.item).collect(),
        policies: policies.into_iter().map(|p| p.item).collect(),
        connections: connections.into_iter().map(|c| c.item).collect(),
        default_action,
        spd,
    });
    (config, key_file_diags, inline_keys)
}

/// IPv6 links need an MTU of at least 1280 (RFC 8200).
fn check_mtu(ctx: &mut Ctx, dp: &Dataplane, ports: &[Port], tunnels: &[Located<Tunnel>]) {
    let v6 = ports
        .iter()
        .flat_map(|p| &p.addresses)
        .any(|a| a.addr.is_ipv6())
        || tunnels.iter().any(|t| t.item.local.is_ipv6());
    if v6 && dp.mtu < MIN_MTU_V6 {
        ctx.error(
            "dataplane.mtu",
            format!("mtu {} is below the IPv6 minimum", dp.mtu),
            Some(&format!("{MIN_MTU_V6}..={MAX_MTU} with IPv6 addresses")),
        );
    }
}

//! Finds the system DPDK with pkg-config, compiles the C shim for DPDK's
//! static-inline functions, and generates Rust bindings with bindgen.

use std::env;
use std::path::PathBuf;
use std::process::Command;

const MISSING_DPDK: &str = "DPDK development files not found: run scripts/setup.sh or \
                            `apt-get install libdpdk-dev`";

fn main() {
    println!("cargo:rerun-if-changed=shim/shim.c");
    println!("cargo:rerun-if-changed=shim/shim.h");
    println!("cargo:rerun-if-changed=shim/wrapper.h");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");

    // Emits the link lines (shared libraries; the EAL loads the PMDs itself).
    let lib = match pkg_config::Config::new().probe("libdpdk") {
        Ok(lib) => lib,
        Err(e) => {
            let detail = e.to_string();
            let first = detail.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
            fail(&format!("{MISSING_DPDK} (pkg-config: {})", first.trim()))
        }
    };
    let cflags = dpdk_cflags();

    compile_shim(&cflags, &lib);
    generate_bindings(&cflags);
}

/// Prints one clear error and stops the build (a panic would bury it in a
/// backtrace). The `cargo:warning` line is what cargo shows on top.
fn fail(msg: &str) -> ! {
    println!("cargo:warning={msg}");
    eprintln!("error: {msg}");
    std::process::exit(1);
}

/// The full compiler flags DPDK asks for: besides include paths they carry
/// `-include rte_config.h` and `-march=...`, which pkg-config's parsed
/// `Library` does not keep.
fn dpdk_cflags() -> Vec<String> {
    let pkg_config = env::var("PKG_CONFIG").unwrap_or_else(|_| "pkg-config".into());
    let out = Command::new(pkg_config)
        .args(["--cflags", "libdpdk"])
        .output()
        .unwrap_or_else(|e| fail(&format!("{MISSING_DPDK}\n(running pkg-config: {e})")));
    if !out.status.success() {
        fail(MISSING_DPDK);
    }
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    // `-include rte_config.h` is two words; keep the pair together.
    let mut flags = Vec::new();
    let mut words = text.split_whitespace();
    while let Some(w) = words.next() {
        if w == "-include" {
            if let Some(file) = words.next() {
                flags.push(format!("-include{file}"));
            }
        } else {
            flags.push(w.to_string());
        }
    }
    flags
}

fn compile_shim(cflags: &[String], lib: &pkg_config::Library) {
    let mut build = cc::Build::new();
    build.file("shim/shim.c").include("shim").opt_level(3);
    for path in &lib.include_paths {
        build.include(path);
    }
    for flag in cflags {
        if !flag.starts_with("-I") {
            build.flag(flag);
        }
    }
    build.compile("espgw_dpdk_shim");
}

fn generate_bindings(cflags: &[String]) {
    let bindings = bindgen::Builder::default()
        .header("shim/wrapper.h")
        .clang_arg("-Ishim")
        .clang_args(cflags)
        .parse_callbacks(Box::new(bindgen::CargoCallbacks::new()))
        // RTE_ETH_RSS_* and friends are written with RTE_BIT64(); let clang evaluate them.
        .clang_macro_fallback()
        .allowlist_function("shim_.*")
        .allowlist_function("rte_eal_.*")
        .allowlist_function("rte_strerror")
        .allowlist_function("rte_socket_id")
        .allowlist_function("rte_lcore_.*")
        .allowlist_function("rte_get_(main|next)_lcore")
        .allowlist_function("rte_thread_(un)?register")
        .allowlist_function("rte_get_tsc_hz")
        .allowlist_function("rte_dev_(probe|remove)")
        .allowlist_function("rte_mempool_.*")
        .allowlist_function("rte_pktmbuf_.*")
        .allowlist_function("rte_ring_.*")
        .allowlist_function("rte_eth_.*")
        // Receive steering of ESP by SPI (dpdk::flow): create, validate,
        // destroy, flush; the item and action structs they take.
        .allowlist_function("rte_flow_(create|validate|destroy|flush)")
        .allowlist_type("rte_flow_(attr|item|action|error)")
        .allowlist_type("rte_flow_item_(esp|udp)")
        .allowlist_type("rte_flow_action_queue")
        .allowlist_type("rte_flow_(item|action)_type")
        .allowlist_type("rte_mbuf")
        .allowlist_type("rte_ether_addr")
        .allowlist_type("rte_eth_.*")
        .allowlist_type("rte_lcore_state_t")
        .allowlist_type("lcore_function_t")
        .allowlist_var("RTE_ETH_.*")
        .allowlist_var("RTE_MBUF_.*")
        .allowlist_var("RTE_PKTMBUF_HEADROOM")
        .allowlist_var("RTE_MAX_LCORE")
        .allowlist_var("RTE_MAX_ETHPORTS")
        .allowlist_var("RTE_ETHER_.*")
        .allowlist_var("RING_F_.*")
        .allowlist_var("SOCKET_ID_ANY")
        .allowlist_var("LCORE_ID_ANY")
        .allowlist_var("RTE_MEMPOOL_.*")
        .blocklist_type("max_align_t")
        .derive_default(true)
        .derive_debug(true)
        .layout_tests(true)
        .generate_comments(false)
        .generate()
        .unwrap_or_else(|e| fail(&format!("bindgen over the DPDK headers failed: {e}")));

    let out = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("bindings.rs");
    bindings
        .write_to_file(&out)
        .unwrap_or_else(|e| fail(&format!("writing {}: {e}", out.display())));
}

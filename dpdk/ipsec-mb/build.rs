//! Compiles the C shim over intel-ipsec-mb's GCM macros and links the
//! system library (Debian's libipsec-mb-dev, 1.3; it ships no pkg-config
//! file, so the header is looked for on the compiler's default path).

const MISSING: &str = "intel-ipsec-mb development files not found: run scripts/setup.sh or \
                       `apt-get install libipsec-mb-dev`";

fn main() {
    println!("cargo:rerun-if-changed=shim/shim.c");
    let header = [
        "/usr/include/intel-ipsec-mb.h",
        "/usr/local/include/intel-ipsec-mb.h",
    ];
    if !header.iter().any(|h| std::path::Path::new(h).exists()) {
        println!("cargo:warning={MISSING}");
        eprintln!("error: {MISSING}");
        std::process::exit(1);
    }
    cc::Build::new()
        .file("shim/shim.c")
        .opt_level(2)
        .warnings(true)
        .compile("espgw_ipsec_mb_shim");
    println!("cargo:rustc-link-lib=dylib=IPSec_MB");
}

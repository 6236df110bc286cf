//! What the numbers were measured on: CPU, cores, kernel, commit.

use std::process::Command;

/// Facts about this machine and checkout, for the JSON report.
#[derive(Debug, Clone, Default)]
pub struct Machine {
    pub cpu_model: String,
    pub logical_cpus: usize,
    /// The CPU features that decide ESP speed (aes, vaes, avx2, ...).
    pub cpu_features: Vec<String>,
    pub kernel: String,
    /// The commit of the checkout the binary was run from.
    pub git_commit: Option<String>,
    /// Uncommitted changes in the checkout the binary was run from.
    pub git_dirty: Option<bool>,
    /// The commit the binary was built from (HEAD at build time; it may
    /// have had uncommitted changes then, which nothing records).
    pub build_commit: Option<String>,
    pub tsc_hz: u64,
    pub hugepages: bool,
    /// With 2 or more workers: a cache line's round trip from the first
    /// worker's CPU to each other worker's (espgw_dataplane::core_probe,
    /// the probe `spread_decrypt = "auto"` runs), measured before the run.
    pub core_round_trips: Vec<espgw_dataplane::core_probe::PairRoundTrip>,
}

/// CPU flags worth reporting next to crypto numbers.
const FEATURES: &[&str] = &[
    "aes",
    "vaes",
    "pclmulqdq",
    "vpclmulqdq",
    "avx2",
    "avx512f",
    "avx512bw",
    "avx512vl",
    "sha_ni",
    "bmi2",
    "adx",
];

/// Picks the model name and interesting flags from /proc/cpuinfo text.
pub fn parse_cpuinfo(text: &str) -> (String, Vec<String>) {
    let mut model = String::new();
    let mut flags = Vec::new();
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        match key.trim() {
            "model name" if model.is_empty() => model = value.trim().to_string(),
            "flags" if flags.is_empty() => {
                let have: Vec<&str> = value.split_whitespace().collect();
                flags = FEATURES
                    .iter()
                    .filter(|f| have.contains(f))
                    .map(|f| f.to_string())
                    .collect();
            }
            _ => {}
        }
    }
    (model, flags)
}

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

impl Machine {
    /// `logical_cpus`: the CPUs the process could run on (taken before the
    /// EAL pinned the main thread).
    pub fn this(tsc_hz: u64, hugepages: bool, logical_cpus: usize) -> Machine {
        let (cpu_model, cpu_features) =
            parse_cpuinfo(&std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default());
        Machine {
            cpu_model,
            logical_cpus,
            cpu_features,
            kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .map(|s| s.trim().to_string())
                .unwrap_or_default(),
            git_commit: git(&["rev-parse", "HEAD"]),
            git_dirty: git(&["status", "--porcelain", "--untracked-files=no"])
                .map(|s| !s.is_empty()),
            build_commit: Some(env!("ESPGW_BUILD_COMMIT").to_string()).filter(|c| !c.is_empty()),
            tsc_hz,
            hugepages,
            core_round_trips: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpuinfo_model_and_features() {
        let text =
            "processor\t: 0\nmodel name\t: AMD EPYC 7B13\nflags\t\t: fpu sse2 aes avx2 vaes\n\
                    processor\t: 1\nmodel name\t: AMD EPYC 7B13\nflags\t\t: fpu\n";
        let (model, flags) = parse_cpuinfo(text);
        assert_eq!(model, "AMD EPYC 7B13");
        assert_eq!(flags, vec!["aes", "vaes", "avx2"]);
    }
}

//! Cold start: each function's init duration under the runtime interface
//! emulator (release build from `sam build`), and the size of each bootstrap
//! for x86_64 and arm64, and for x86_64 without the tracing exporter.

use super::stack::{init_durations_ms, logs_dir};
use lab_probes::stats::median;
use local_stack::template::Template;
use local_stack::{tools, workspace_root};
use std::path::PathBuf;

/// Cold starts per function; the median is reported.
const STARTS: usize = 5;
/// Where `sam build` and `cargo xtask build-arm64` put the bootstraps.
pub const BUILD_DIRS: [(&str, &str); 2] = [
    ("x86_64", local_stack::sam::X86_64_BUILD_DIR),
    ("arm64", local_stack::sam::ARM64_BUILD_DIR),
];

/// One function.
#[derive(Debug, Clone)]
pub struct Row {
    pub function: String,
    pub memory_mb: u32,
    /// Median init duration, ms, and every one measured.
    pub init_ms: f64,
    pub all_ms: Vec<f64>,
    /// Bootstrap size in MiB per architecture, in [`BUILD_DIRS`] order.
    pub sizes_mib: Vec<Option<f64>>,
    /// x86_64 bootstrap size in MiB built without the function's default
    /// feature `traces` (the OpenTelemetry exporter).
    pub without_traces_mib: Option<f64>,
}

/// The bootstrap of `logical_id` in build dir `dir`.
pub fn bootstrap(dir: &str, logical_id: &str) -> PathBuf {
    workspace_root()
        .join(dir)
        .join(logical_id)
        .join("bootstrap")
}

/// Start every function [`STARTS`] times under the emulator, invoking it once
/// each time (the emulator reports init at the first invocation).
pub fn measure(tick: &dyn Fn(&str)) -> Result<Vec<Row>, String> {
    let template = Template::load(&workspace_root().join("template.yaml"))?;
    let rie = tools::emulator()?;
    let logs = logs_dir()?;
    let mut rows = Vec::new();
    for function in template.functions()? {
        tick(&format!("cold start: {}", function.binary));
        let binary = bootstrap(BUILD_DIRS[0].1, &function.logical_id);
        let log = |start| logs.join(format!("{}-{start}.log", function.binary));
        let all_ms = init_durations_ms(&rie, &binary, &function, &[], log, STARTS)?;
        let sizes_mib = BUILD_DIRS
            .iter()
            .map(|(_, dir)| size_mib(&bootstrap(dir, &function.logical_id)))
            .collect();
        rows.push(Row {
            function: function.logical_id,
            memory_mb: function.memory_mb,
            init_ms: median(all_ms.clone()),
            all_ms,
            sizes_mib,
            without_traces_mib: None,
        });
    }
    // After every start: these builds replace cargo's copy of each function
    // (not `sam build`'s, measured above).
    for (row, function) in rows.iter_mut().zip(template.functions()?) {
        tick(&format!("size without traces: {}", function.binary));
        let built =
            local_stack::sam::release_bootstrap(&function.binary, &["--no-default-features"])?;
        row.without_traces_mib = size_mib(&built);
    }
    Ok(rows)
}

/// The size of the file at `path` in MiB, if there is one.
fn size_mib(path: &std::path::Path) -> Option<f64> {
    std::fs::metadata(path)
        .ok()
        .map(|m| m.len() as f64 / f64::from(1 << 20))
}

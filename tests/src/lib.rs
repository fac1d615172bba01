//! Harness for the end-to-end suite: builds the real function binaries and runs
//! them under the Lambda runtime interface emulator, configured from
//! `template.yaml`, on free loopback ports. Everything started is stopped on
//! drop, also when a test fails.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use xtask::emulator::Emulator;
use xtask::template::{Function, Template};
pub use xtask::workspace_root;

/// The binaries of the three functions, as named in `template.yaml`.
pub const FUNCTIONS: [&str; 3] = ["order-processor", "password-hasher", "arrow-worker"];

static BUILD_LOCK: Mutex<()> = Mutex::new(());

/// Build `name` (a debug build: the suite tests behaviour, not speed) and
/// return the binary's path. Cheap when it is up to date.
pub fn binary(name: &str) -> PathBuf {
    let _serial = BUILD_LOCK
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let root = workspace_root();
    let status = std::process::Command::new(env!("CARGO"))
        .current_dir(&root)
        .args(["build", "--quiet", "--package", name, "--bin", name])
        .status()
        .unwrap_or_else(|e| panic!("cargo build {name}: {e}"));
    assert!(status.success(), "cargo build {name}: {status}");
    let target =
        std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), PathBuf::from);
    target.join("debug").join(name)
}

/// The function declared in `template.yaml` with this binary.
pub fn function(name: &str) -> Function {
    Template::load(&workspace_root().join("template.yaml"))
        .and_then(|t| t.function(name))
        .unwrap_or_else(|e| panic!("{e}"))
}

/// Start `name` under the emulator, as the template declares it, with `env` on top.
pub fn start(name: &str, env: &[(&str, &str)]) -> Emulator {
    static RUN: AtomicUsize = AtomicUsize::new(0);
    let rie = xtask::tools::emulator().unwrap_or_else(|e| panic!("{e}"));
    let logs = workspace_root().join("target").join("e2e-logs");
    std::fs::create_dir_all(&logs).unwrap_or_else(|e| panic!("{}: {e}", logs.display()));
    let log = logs.join(format!(
        "{name}-{}-{}.log",
        std::process::id(),
        RUN.fetch_add(1, Ordering::Relaxed)
    ));
    Emulator::start(&rie, &binary(name), &function(name), env, &log)
        .unwrap_or_else(|e| panic!("{e}"))
}

/// The sample events of a function: every file in `events/<name>/`.
pub fn events(name: &str) -> Vec<(PathBuf, String)> {
    let dir = workspace_root().join("events").join(name);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            (path, text)
        })
        .collect()
}

/// The JSON log lines among `logs` (the function's own lines under
/// `AWS_LAMBDA_LOG_FORMAT=JSON`; the emulator's lines are plain text).
pub fn json_lines(logs: &str) -> Vec<serde_json::Value> {
    logs.lines()
        .filter(|line| line.starts_with('{'))
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect()
}

/// The init duration the emulator reported, in ms (`INIT REPORT(durationMs: X)`).
pub fn init_duration_ms(logs: &str) -> Option<f64> {
    logs.lines().find_map(|line| {
        let rest = line.split("INIT REPORT(durationMs: ").nth(1)?;
        rest.split(')').next()?.trim().parse().ok()
    })
}

/// File name of `path`, for messages.
pub fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

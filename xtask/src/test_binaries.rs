//! The suite's `cargo test --workspace`, its test binaries run [`AT_ONCE`] at
//! a time instead of one after another. Most of the end-to-end binaries wait
//! on servers and on functions held to their CPU share (all of them together
//! used 1.5 of 2 cores when run in turn), so a second one fills the gap. Each
//! binary's output goes to a log of its own, printed whole once it ends; every
//! binary runs even after one fails, and the step fails naming each failure.
//! Those of [`RUN_ALONE`] run first, each alone. The doc tests run last, as
//! `cargo test --doc`.

use crate::command::{cargo, describe, program, run, target_dir};
use std::collections::VecDeque;
use std::fs::File;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Test binaries running at once: the suite's machines have 2 cores.
const AT_ONCE: usize = 2;

/// The line of a test file's module docs that asks the suite to run it
/// with nothing beside it, followed by why (the Arrow worker's `fan_out`:
/// DynamoDB Local beside another binary served its scan too slowly).
const RUN_ALONE: &str = "//! The suite runs this file alone:";

/// Whether `binary` is an integration test whose source asks, with
/// [`RUN_ALONE`], to run with nothing beside it.
fn runs_alone(binary: &TestBinary) -> bool {
    let Some((_, target)) = binary.name.split_once(' ') else {
        return false;
    };
    let source = binary.dir.join("tests").join(format!("{target}.rs"));
    std::fs::read_to_string(source)
        .is_ok_and(|text| text.lines().any(|line| line.starts_with(RUN_ALONE)))
}

/// A test binary `cargo test --workspace` builds.
#[derive(Debug, Clone, PartialEq, Eq)]
struct TestBinary {
    /// `package target`, as cargo names it in its `Running` lines.
    name: String,
    /// Where cargo runs it: its package's folder.
    dir: PathBuf,
    executable: PathBuf,
}

/// Build (nothing, after the suite's first step) and list the test binaries,
/// run them [`AT_ONCE`] at a time, then the doc tests.
pub fn run_all() -> Result<(), String> {
    let binaries = list()?;
    let logs = target_dir().join("suite-tests");
    std::fs::create_dir_all(&logs).map_err(|e| format!("{}: {e}", logs.display()))?;
    let (alone, shared): (Vec<_>, Vec<_>) = binaries.into_iter().partition(runs_alone);
    let failed = Mutex::new(Vec::new());
    run_at_once(alone, 1, &logs, &failed);
    run_at_once(shared, AT_ONCE, &logs, &failed);
    let failed = failed.into_inner().unwrap_or_else(|p| p.into_inner());
    let docs = run(cargo().args(["test", "--workspace", "--doc"]));
    match (failed.is_empty(), docs) {
        (true, docs) => docs,
        (false, Ok(())) => Err(format!("failed: {}", failed.join(", "))),
        (false, Err(e)) => Err(format!("failed: {}; {e}", failed.join(", "))),
    }
}

/// Run `binaries`, `at_once` at a time, adding the name of each that fails
/// to `failed`.
fn run_at_once(
    binaries: Vec<TestBinary>,
    at_once: usize,
    logs: &std::path::Path,
    failed: &Mutex<Vec<String>>,
) {
    let queue = Mutex::new(VecDeque::from(binaries));
    std::thread::scope(|scope| {
        for _ in 0..at_once {
            scope.spawn(|| {
                while let Some(binary) = next(&queue) {
                    if let Err(e) = run_one(&binary, logs) {
                        eprintln!("{e}");
                        lock(failed).push(binary.name);
                    }
                }
            });
        }
    });
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn next(queue: &Mutex<VecDeque<TestBinary>>) -> Option<TestBinary> {
    lock(queue).pop_front()
}

/// The test binaries of `cargo test --workspace --no-run`, in its order.
fn list() -> Result<Vec<TestBinary>, String> {
    let mut build = cargo();
    build.args([
        "test",
        "--workspace",
        "--no-run",
        "--message-format=json-render-diagnostics",
    ]);
    let output = build
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("{}: {e}", describe(&build)))?;
    if !output.status.success() {
        return Err(format!("{} failed: {}", describe(&build), output.status));
    }
    let binaries = parse(&String::from_utf8_lossy(&output.stdout));
    if binaries.is_empty() {
        return Err(format!("{} listed no test binary", describe(&build)));
    }
    Ok(binaries)
}

/// The test executables among cargo's JSON messages, sorted by name (as
/// `cargo test` runs them: by package, then target).
fn parse(messages: &str) -> Vec<TestBinary> {
    let mut binaries: Vec<TestBinary> = messages
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|m| m["reason"] == "compiler-artifact" && m["profile"]["test"] == true)
        .filter_map(|m| {
            let executable = PathBuf::from(m["executable"].as_str()?);
            let manifest = PathBuf::from(m["manifest_path"].as_str()?);
            let package = m["package_id"].as_str()?;
            let package = package_name(package);
            Some(TestBinary {
                name: format!("{package} {}", m["target"]["name"].as_str()?),
                dir: manifest.parent()?.to_path_buf(),
                executable,
            })
        })
        .collect();
    binaries.sort_by(|a, b| a.name.cmp(&b.name));
    binaries.dedup();
    binaries
}

/// A package's name from cargo's package id: `path+file:///w/tests#e2e@0.1.0`
/// (a member whose folder is not its name), `path+file:///w/shared#0.1.0`.
fn package_name(id: &str) -> &str {
    let (path, fragment) = id.rsplit_once('#').unwrap_or((id, ""));
    match fragment.split_once('@') {
        Some((name, _)) => name,
        None => path.rsplit('/').next().unwrap_or(path),
    }
}

/// Run one binary, its output to its log, then printed whole.
fn run_one(binary: &TestBinary, logs: &std::path::Path) -> Result<(), String> {
    let log_path = logs.join(format!("{}.log", binary.name.replace(' ', "-")));
    let log = File::create(&log_path).map_err(|e| format!("{}: {e}", log_path.display()))?;
    let err = log
        .try_clone()
        .map_err(|e| format!("{}: {e}", log_path.display()))?;
    let mut command = program(&binary.executable);
    command
        .current_dir(&binary.dir)
        .env("CARGO_MANIFEST_DIR", &binary.dir)
        .stdout(log)
        .stderr(err);
    let started = Instant::now();
    let status = command.status();
    let output = std::fs::read_to_string(&log_path).unwrap_or_default();
    let took = started.elapsed();
    let verdict = match &status {
        Ok(s) if s.success() => "ok".to_owned(),
        Ok(s) => format!("FAILED ({s})"),
        Err(e) => format!("FAILED (not started: {e})"),
    };
    eprintln!(
        "\n==> {} ({}, {verdict})\n{output}",
        binary.name,
        seconds(took)
    );
    match status {
        Ok(s) if s.success() => Ok(()),
        _ => Err(format!("{}: {verdict}", binary.name)),
    }
}

fn seconds(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_that_asks_to_run_alone_does() {
        let root = std::env::temp_dir().join(format!("run-alone-{}", std::process::id()));
        let tests = root.join("tests");
        std::fs::create_dir_all(&tests).expect("scratch");
        let file = |name: &str, docs: &str| {
            std::fs::write(tests.join(format!("{name}.rs")), docs).expect("test file");
        };
        file(
            "slow",
            &format!("{RUN_ALONE} a server beside it is too slow.\n"),
        );
        file("quick", "//! Runs beside others.\n");
        let binary = |name: &str| TestBinary {
            name: name.into(),
            dir: root.clone(),
            executable: "/x".into(),
        };
        let (slow, quick, lib) = (
            runs_alone(&binary("f slow")),
            runs_alone(&binary("f quick")),
            runs_alone(&binary("f")),
        );
        let _ = std::fs::remove_dir_all(&root);
        assert!(slow);
        assert!(!quick && !lib);
    }

    #[test]
    fn test_executables_are_listed_by_name_and_the_rest_left_out() {
        let messages = r#"{"reason":"compiler-artifact","package_id":"path+file:///w/tests#e2e@0.1.0","manifest_path":"/w/tests/Cargo.toml","target":{"name":"fan_out"},"profile":{"test":true},"executable":"/w/target/debug/deps/fan_out-1"}
{"reason":"compiler-artifact","package_id":"path+file:///w/shared#0.1.0","manifest_path":"/w/shared/Cargo.toml","target":{"name":"shared"},"profile":{"test":true},"executable":"/w/target/debug/deps/shared-2"}
{"reason":"compiler-artifact","package_id":"path+file:///w/shared#0.1.0","manifest_path":"/w/shared/Cargo.toml","target":{"name":"shared"},"profile":{"test":false},"executable":null}
{"reason":"compiler-artifact","package_id":"path+file:///w/tools/lab#0.1.0","manifest_path":"/w/tools/lab/Cargo.toml","target":{"name":"lab"},"profile":{"test":false},"executable":"/w/target/debug/lab"}
{"reason":"build-finished","success":true}
not json"#;
        assert_eq!(
            parse(messages),
            [
                TestBinary {
                    name: "e2e fan_out".into(),
                    dir: "/w/tests".into(),
                    executable: "/w/target/debug/deps/fan_out-1".into(),
                },
                TestBinary {
                    name: "shared shared".into(),
                    dir: "/w/shared".into(),
                    executable: "/w/target/debug/deps/shared-2".into(),
                },
            ]
        );
    }
}

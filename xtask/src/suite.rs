//! `cargo xtask test`: the whole suite, step by step, with a timing per step
//! and a closing `suite: N passed, N failed, N skipped` line.

use crate::command::{
    Outcome, cargo, describe, lint_while_building, local_stack, run, sam_local, target_dir,
    workspace_binary, workspace_root,
};
use crate::{init_check, sam, test_binaries, user_changes};
use std::fs::File;
use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

type Step = (&'static str, fn() -> Result<Outcome, String>);

/// The steps, in order: each later one may reuse what an earlier one built.
const STEPS: [Step; 10] = [
    (
        "install pinned tools while the tests build, linted as they compile",
        || passed(install_alongside_build()),
    ),
    (
        "cargo test (unit, integration, end-to-end), two test binaries at a time",
        || passed(while_warming_zig(test_binaries::run_all)),
    ),
    (
        "performance lab, quick (properties only)",
        lab_quick_if_kept,
    ),
    ("sam init from the git repository", || {
        passed(init_check::from_git())
    }),
    ("sam validate --lint", || {
        passed(run(&mut sam(&["validate", "--lint"])?))
    }),
    (
        "a user's changes: a new function, the functions' declared features",
        || passed(user_changes::new_function()),
    ),
    (
        "a user's changes: an allocator without its feature is a clear error",
        || passed(user_changes::allocator_without_feature()),
    ),
    (
        "a user's changes: one allocator per function, built and run",
        || passed(user_changes::mixed_allocators()),
    ),
    // One sample per function: every sample is answered by the sam-built
    // functions in the step before and by the test builds in `emulator`;
    // this step proves the SAM CLI's own container path, on that build.
    (
        "sam local invoke of that build, one sample event per function (podman)",
        || sam_local(true, Some(&user_changes::sam_build_dir()), None),
    ),
    (
        "a user's changes: samples removed, by hand and by remove-function",
        || passed(user_changes::samples_removed()),
    ),
];

/// The pinned tools' install (mostly downloads: the network's time) while
/// `cargo fmt --check` and the tests' build run (the CPU's). The build lints
/// as it compiles (as every build of the suite: [`lint_while_building`],
/// clippy's lints, warnings denied, for every target `cargo test` builds), so
/// `cargo clippy` needs no check build of its own, and the next step only runs
/// the tests. The install is this program's own `tools` command
/// (`pinned_tools`: nothing to build first); its output goes to a log, shown
/// once both are done.
fn install_alongside_build() -> Result<(), String> {
    std::fs::create_dir_all(target_dir())
        .map_err(|e| format!("{}: {e}", target_dir().display()))?;
    let log_path = target_dir().join("suite-install.log");
    let this = std::env::current_exe().map_err(|e| format!("this program's path: {e}"))?;
    let mut install = Command::new(this);
    install.current_dir(workspace_root()).arg("tools");
    let mut child = spawn_logged(&mut install, &log_path)?;
    let built = run(cargo().args(["fmt", "--all", "--check"]))
        .and_then(|()| run(cargo().args(["test", "--workspace", "--no-run"])));
    let installed = child
        .wait()
        .map_err(|e| format!("{}: {e}", describe(&install)));
    eprintln!("\n--- {} (the install's output)", log_path.display());
    eprint!("{}", std::fs::read_to_string(&log_path).unwrap_or_default());
    match installed? {
        status if status.success() => built,
        status => Err(format!("{} failed: {status}", describe(&install))),
    }
}

/// `step` while zig's C++ runtime is built into its cache in the CPU time the
/// step leaves ([`pinned_tools::zig_cxx_warm_up`], at the lowest priority:
/// the tests wait on servers and on functions held to their CPU share, and
/// left 20% of 2 cores idle), so that the user's-changes `sam build` links
/// a function on snmalloc in seconds, not a minute and a half, on a machine
/// that never ran zig. Waited for after the step; its output goes to a log,
/// shown if it fails.
fn while_warming_zig(step: fn() -> Result<(), String>) -> Result<(), String> {
    let dir = target_dir().join("zig-warm-up");
    let mut warm = pinned_tools::zig_cxx_warm_up(&dir)?;
    let log_path = dir.join("warm-up.log");
    let mut child = spawn_logged(&mut warm, &log_path)?;
    let result = step();
    let warmed = child
        .wait()
        .map_err(|e| format!("{}: {e}", describe(&warm)))?;
    result?;
    if warmed.success() {
        Ok(())
    } else {
        Err(format!(
            "{} failed: {warmed}\n{}",
            describe(&warm),
            std::fs::read_to_string(&log_path).unwrap_or_default()
        ))
    }
}

/// Start `command` with its output (both streams) going to `log_path`.
fn spawn_logged(command: &mut Command, log_path: &Path) -> Result<Child, String> {
    let log = File::create(log_path).map_err(|e| format!("{}: {e}", log_path.display()))?;
    let err_log = log
        .try_clone()
        .map_err(|e| format!("{}: {e}", log_path.display()))?;
    command
        .stdout(log)
        .stderr(err_log)
        .spawn()
        .map_err(|e| format!("{}: {e}", describe(command)))
}

/// `lab --quick`, built with the features of the step before (see
/// [`workspace_binary`]): it runs the tests' debug builds anyway.
pub fn lab_quick() -> Result<(), String> {
    run(&mut workspace_binary("lab", &["--quick"])?)
}

/// [`lab_quick`], skipped with a line in a project without the lab (whose
/// user removed it with the samples it measures: README, "Make it yours").
fn lab_quick_if_kept() -> Result<Outcome, String> {
    if workspace_root().join("tools/lab/Cargo.toml").is_file() {
        passed(lab_quick())
    } else {
        Ok(Outcome::Skipped(
            "this project has no tools/lab (removed with the samples it measures)".to_owned(),
        ))
    }
}

fn passed(result: Result<(), String>) -> Result<Outcome, String> {
    result.map(|()| Outcome::Passed)
}

/// `sam build` of the quick kind (cargo's dev profile), as `cargo xtask run`
/// builds; the fat-LTO release build is for `cargo xtask run --release`, the
/// lab and deploying. The suite's own `sam build` is the user's-changes copy's
/// (`user_changes::mixed_allocators`): the same template with every function on
/// another allocator, so one build proves the SAM + cargo-lambda wiring and the
/// Lambda link of all of them.
pub fn sam_build_quick() -> Result<(), String> {
    run(&mut local_stack(&["build"])?)
}

/// The whole suite, step by step; stops at the first failure.
pub fn run_all() -> Result<(), String> {
    lint_while_building();
    let started = Instant::now();
    let mut report: Vec<(&str, Duration, Result<Outcome, String>)> = Vec::new();
    for (name, step) in STEPS {
        eprintln!("\n==> {name}");
        let t = Instant::now();
        let outcome = step();
        let failed = outcome.is_err();
        report.push((name, t.elapsed(), outcome));
        if failed {
            break;
        }
    }
    print_report(&report, started.elapsed());
    report
        .into_iter()
        .find_map(|(name, _, outcome)| outcome.err().map(|e| format!("{name}: {e}")))
        .map_or(Ok(()), Err)
}

/// Each step's time and outcome, then the closing line.
fn print_report(report: &[(&str, Duration, Result<Outcome, String>)], total: Duration) {
    eprintln!("\nsuite steps ({total:.0?} in all):");
    let (mut passed, mut failed, mut skipped) = (0, 0, 0);
    for (name, elapsed, outcome) in report {
        let (mark, why) = match outcome {
            Ok(Outcome::Passed) => ("ok", String::new()),
            Ok(Outcome::Skipped(why)) => ("SKIP", format!(" ({why})")),
            Err(_) => ("FAIL", String::new()),
        };
        match outcome {
            Ok(Outcome::Passed) => passed += 1,
            Ok(Outcome::Skipped(_)) => skipped += 1,
            Err(_) => failed += 1,
        }
        eprintln!("  {mark:<4} {:>7.1}s  {name}{why}", elapsed.as_secs_f64());
    }
    println!("suite: {passed} passed, {failed} failed, {skipped} skipped");
}

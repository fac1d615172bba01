//! Running commands: `cargo` in the workspace root, the local stack's and the
//! lab's binaries through it (or built with the whole workspace), and errors
//! that name the command.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};

/// Set by [`lint_while_building`].
static LINTING: AtomicBool = AtomicBool::new(false);

/// From now on, the cargo commands this program starts, and the workspace
/// binaries it runs (which start cargo themselves: the e2e harness, the lab),
/// compile the workspace's own crates with clippy-driver as their compiler,
/// warnings denied, as `cargo clippy --all-targets -- -D warnings` lints them:
/// the suite's builds lint as they compile, so the lints need no check build
/// of the whole dependency tree of their own. Cargo keeps these artifacts
/// apart from a plain build's (the wrapper is part of their hash): a plain
/// `cargo test` after the suite compiles the workspace's crates again, not
/// their dependencies.
pub fn lint_while_building() {
    LINTING.store(true, Ordering::Relaxed);
}

/// The environment of [`lint_while_building`]: clippy-driver (beside the
/// cargo running this, as `cargo clippy` finds it) as cargo's wrapper for the
/// workspace's crates, and the lint arguments in the form `cargo clippy` hands
/// them to it.
fn lint_env() -> [(&'static str, std::ffi::OsString); 2] {
    let beside = PathBuf::from(pinned_tools::cargo().get_program()).with_file_name("clippy-driver");
    let driver = if beside.is_file() {
        beside.into_os_string()
    } else {
        "clippy-driver".into()
    };
    [
        ("RUSTC_WORKSPACE_WRAPPER", driver),
        (
            "CLIPPY_ARGS",
            "-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__".into(),
        ),
    ]
}

/// A workspace program (a test binary, the local stack, the lab) to run
/// from here: without what `cargo run` set for this one, and linting as this
/// program's cargo commands do (the e2e harness and the lab start cargo
/// themselves, which must build as the suite built).
pub fn program(path: &Path) -> Command {
    let mut command = Command::new(path);
    pinned_tools::without_cargo_run_variables(&mut command);
    linting(command)
}

/// `command` with the environment of [`lint_while_building`], once it was
/// called, and in CI that of [`CI_ENV`].
fn linting(mut command: Command) -> Command {
    if LINTING.load(Ordering::Relaxed) {
        command.envs(lint_env());
        if in_ci() {
            command.envs(CI_ENV);
        }
    }
    command
}

/// How the suite builds in CI, where every build starts from nothing and is
/// thrown away: no incremental compilation (its caches cost the workspace's
/// crates about a fifth more compile time, measured here: 166 s against 131
/// s for all of them, and serve no second build), and C and C++ dependencies
/// without debug information (`sam build` compiles jemalloc in 275
/// CPU-seconds with it, 170 without). Only in CI: on a
/// developer's machine both would make the next plain `cargo` build rebuild
/// what the suite built.
const CI_ENV: [(&str, &str); 3] = [
    ("CARGO_INCREMENTAL", "0"),
    ("CFLAGS", "-g0"),
    ("CXXFLAGS", "-g0"),
];

/// Whether this runs in CI (`CI=true`, as CI services set it).
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// Run a command (an error names it), describe one, the workspace root: as
/// the tools' install does.
pub use pinned_tools::{describe, run, workspace_root};

/// `cargo`, the one running this command if any, in the workspace root
/// (`pinned_tools::cargo`), linting once [`lint_while_building`] was called.
pub fn cargo() -> Command {
    linting(pinned_tools::cargo())
}

/// `cargo run` of a workspace package's binary with `args`: the local stack
/// (`local-stack`) and the lab (`lab`) are crates of their own, so that this
/// one compiles in seconds.
pub fn package(name: &str, args: &[&str]) -> Command {
    let mut command = cargo();
    command
        .args(["run", "--quiet", "--package", name, "--"])
        .args(args);
    command
}

pub use pinned_tools::target_dir;

/// A workspace package's binary, built as part of the whole workspace, with
/// `args`. With the targets `cargo test --workspace` builds (libraries,
/// binaries, tests, examples), `cargo build` resolves features as it does, so
/// after the suite's tests it compiles only the binaries no test needs.
/// `cargo run --package NAME` would resolve features for NAME alone (the
/// lab's differ from the workspace's in tokio, syn, ...) and rebuild most of
/// the dependency tree, the AWS SDK included, for it.
pub fn workspace_binary(name: &str, args: &[&str]) -> Result<Command, String> {
    run(cargo().args([
        "build",
        "--quiet",
        "--workspace",
        "--lib",
        "--bins",
        "--tests",
        "--examples",
    ]))?;
    let mut command = program(&target_dir().join("debug").join(name));
    command.current_dir(workspace_root()).args(args);
    Ok(command)
}

/// The local stack's binary with `args`, built with the whole workspace
/// ([`workspace_binary`]): after the suite's tests it compiles nothing, where
/// `cargo run --package local-stack` would build it with features of its own
/// (about two minutes from the tests' build). `cargo xtask run`, for a user
/// trying the application from nothing, goes through [`package`] instead.
pub fn local_stack(args: &[&str]) -> Result<Command, String> {
    workspace_binary("local-stack", args)
}

/// The exit status by which a command says it could not run here (automake's
/// convention for a skipped test; the local stack's `sam-local` uses it).
const SKIPPED: i32 = 77;

/// Run `command` as [`run`] does, its output passed through; `Some(why)`
/// where it exited with [`SKIPPED`], `why` being its last line that starts
/// with `skipped: `.
pub fn run_or_skip(command: &mut Command) -> Result<Option<String>, String> {
    use std::io::BufRead;
    let mut child = command
        .stdout(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| format!("{}: {e}", describe(command)))?;
    let mut why = None;
    if let Some(stdout) = child.stdout.take() {
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            println!("{line}");
            if let Some(reason) = line.strip_prefix("skipped: ") {
                why = Some(reason.to_owned());
            }
        }
    }
    let status = child
        .wait()
        .map_err(|e| format!("{}: {e}", describe(command)))?;
    match status.code() {
        Some(0) => Ok(None),
        Some(SKIPPED) => Ok(Some(why.unwrap_or_else(|| "no reason given".to_owned()))),
        _ => Err(format!("{} failed: {status}", describe(command))),
    }
}

/// Run `command` as [`run`] does, its standard error passed through; an
/// error if it fails or if a line of its standard error holds `warning`
/// (each such line named).
pub fn run_without_warning(command: &mut Command, warning: &str) -> Result<(), String> {
    use std::io::BufRead;
    let mut child = command
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| format!("{}: {e}", describe(command)))?;
    let mut warned = vec![];
    if let Some(stderr) = child.stderr.take() {
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            eprintln!("{line}");
            if line.contains(warning) {
                warned.push(line);
            }
        }
    }
    let status = child
        .wait()
        .map_err(|e| format!("{}: {e}", describe(command)))?;
    if !status.success() {
        return Err(format!("{} failed: {status}", describe(command)));
    }
    if warned.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{} warned:\n  {}",
            describe(command),
            warned.join("\n  ")
        ))
    }
}

/// Bring `Cargo.lock` of the project at `root` in line with its members (a
/// function added or removed), changing nothing else: `cargo update
/// --workspace` updates only the workspace's own packages, offline.
pub fn update_workspace_lock(root: &Path) -> Result<(), String> {
    let mut command = cargo();
    command
        .current_dir(root)
        .args(["update", "--workspace", "--offline", "--quiet"]);
    let output = command
        .output()
        .map_err(|e| format!("{}: {e}", describe(&command)))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{} failed ({}): {}",
            describe(&command),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ))
    }
}

/// How a step ended, when it did not fail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Passed,
    /// It could not run on this machine; why.
    Skipped(String),
}

/// `sam local invoke` of the sample events (one per function with `quick`)
/// against the build in `build_dir` (the quick build of `sam_build_quick` if
/// `None`), on podman; of the project `project` if given (a scratch copy),
/// else this one. Skipped, with a line saying why, where no container
/// engine can be had, except in CI (`CI=true`), where the step must run.
pub fn sam_local(
    quick: bool,
    build_dir: Option<&Path>,
    project: Option<&Path>,
) -> Result<Outcome, String> {
    let build_dir = build_dir.map(|dir| dir.to_string_lossy().into_owned());
    let mut args = vec!["sam-local"];
    if quick {
        args.push("--quick");
    }
    if let Some(dir) = &build_dir {
        args.extend(["--build-dir", dir]);
    }
    let mut command = local_stack(&args)?;
    if let Some(project) = project {
        command.env(pinned_tools::PROJECT, project);
    }
    match run_or_skip(&mut command)? {
        Some(why) if in_ci() => Err(format!("it must run in CI, but was skipped: {why}")),
        Some(why) => Ok(Outcome::Skipped(why)),
        None => Ok(Outcome::Passed),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A crate of one `main.rs`, built with the environment of
    /// [`lint_while_building`] in a scratch folder: its result and stderr.
    fn build_linted(name: &str, main: &str) -> (bool, String) {
        let dir = std::env::temp_dir().join(format!("xtask-lint-{}-{name}", std::process::id()));
        std::fs::create_dir_all(dir.join("src")).expect("scratch crate");
        let manifest = format!(
            "[package]\nname = \"{name}\"\nversion = \"0.1.0\"\nedition = \"2024\"\n\n[workspace]\n"
        );
        std::fs::write(dir.join("Cargo.toml"), manifest).expect("manifest");
        std::fs::write(dir.join("src/main.rs"), main).expect("main.rs");
        let out = pinned_tools::cargo()
            .current_dir(&dir)
            .args(["build", "--quiet", "--offline"])
            .env("CARGO_TARGET_DIR", dir.join("target"))
            .envs(lint_env())
            .output()
            .expect("run cargo");
        let _ = std::fs::remove_dir_all(&dir);
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    #[test]
    fn a_linted_build_fails_on_a_clippy_warning_and_builds_clean_code() {
        let (built, stderr) = build_linted(
            "len-zero",
            "fn main() {\n    let v = std::env::args().collect::<Vec<_>>();\n    if v.len() == 0 {\n        println!(\"none\");\n    }\n}\n",
        );
        assert!(!built, "a clippy warning must fail the build");
        assert!(
            stderr.contains("clippy::len_zero") || stderr.contains("len-zero"),
            "{stderr}"
        );
        let (built, stderr) = build_linted(
            "is-empty",
            "fn main() {\n    let v = std::env::args().collect::<Vec<_>>();\n    if v.is_empty() {\n        println!(\"none\");\n    }\n}\n",
        );
        assert!(built, "{stderr}");
    }
}

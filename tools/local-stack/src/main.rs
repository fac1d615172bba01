//! `local-stack <command>`: the local AWS's own commands, run by `cargo xtask`.
//!
//! - `tools`  install the pinned tools into `.tools/`
//! - `run [--keep] [--visibility-timeout S] [--concurrency N] [--no-limits]`
//!   `sam build`, then the whole application locally (see [`local_stack::runner`])
//! - `build-arm64`  cross-build the functions for Graviton (zig)
//! - `test-arm64 ARGS…`  `cargo test ARGS` for arm64, run under qemu-aarch64
//! - `release-builds`  build both architectures' release bootstraps from the current code
//! - `sam ARGS…`  the pinned SAM CLI, offline-friendly (no telemetry, a region)
//! - `sam-local --build-dir DIR [--quick]`  `sam local invoke` of every sample
//!   event on podman (see [`local_stack::sam_local`])

use local_stack::cgroup::Limits;
use local_stack::{pool, runner, sam, sam_local, tools, workspace_root};
use std::process::ExitCode;

const USAGE: &str = "usage: local-stack <tools | run [--keep] [--visibility-timeout SECONDS] [--concurrency N] [--no-limits] | build-arm64 | test-arm64 CARGO-TEST-ARGS... | release-builds | sam ARGS... | sam-local --build-dir DIR [--quick]>";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let result = match args.as_slice() {
        ["tools"] => tools::install(),
        ["run", flags @ ..] => run_options(flags).and_then(run),
        ["build-arm64"] => sam::build_arm64(),
        ["test-arm64", args @ ..] => sam::test_arm64(args),
        ["release-builds"] => sam::release_builds(),
        ["sam", sam_args @ ..] => tools::install().and_then(|()| sam::sam(sam_args)),
        ["sam-local", flags @ ..] => sam_local(flags),
        _ => Err(USAGE.to_owned()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Build with `sam build` (the release build Lambda gets), then run the
/// application locally.
fn run(options: runner::Options) -> Result<(), String> {
    tools::install()?;
    sam::sam(&["build"])?;
    let root = workspace_root();
    let summary = runner::run(
        options,
        &root.join(sam::X86_64_BUILD_DIR),
        &root.join("target").join("local-logs"),
    )?;
    if summary.failures.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{} sample(s) failed: {}",
            summary.failures.len(),
            summary.failures.join("; ")
        ))
    }
}

/// The flags of `run`.
fn run_options(flags: &[&str]) -> Result<runner::Options, String> {
    let mut options = runner::Options {
        keep: false,
        visibility_timeout_s: runner::DEFAULT_VISIBILITY_TIMEOUT_S,
        concurrency: pool::size_setting()?,
        limits: Limits::from_env()?,
    };
    let mut flags = flags.iter();
    while let Some(flag) = flags.next() {
        match *flag {
            "--keep" => options.keep = true,
            "--visibility-timeout" => {
                options.visibility_timeout_s = flags
                    .next()
                    .and_then(|s| s.parse().ok())
                    .filter(|s| (1..=43_200).contains(s))
                    .ok_or("--visibility-timeout needs whole seconds from 1 to 43200")?;
            }
            "--concurrency" => {
                options.concurrency = pool::parse_size(flags.next().unwrap_or(&""))
                    .map_err(|e| format!("--concurrency: {e}"))?;
            }
            "--no-limits" => options.limits = Limits::Off,
            other => return Err(format!("unknown flag {other}\n{USAGE}")),
        }
    }
    Ok(options)
}

/// `sam local invoke` of the sample events against the build in `--build-dir`.
fn sam_local(flags: &[&str]) -> Result<(), String> {
    let args: Vec<&str> = std::iter::once("sam-local")
        .chain(flags.iter().copied())
        .collect();
    if let Some(done) = sam_local::in_own_network_namespace(&args) {
        return done;
    }
    let (mut build_dir, mut quick) = (None, false);
    let mut flags = flags.iter();
    while let Some(flag) = flags.next() {
        match *flag {
            "--quick" => quick = true,
            "--build-dir" => build_dir = Some(flags.next().ok_or("--build-dir needs a folder")?),
            other => return Err(format!("unknown flag {other}\n{USAGE}")),
        }
    }
    let build_dir = workspace_root().join(build_dir.ok_or("sam-local needs --build-dir")?);
    let logs = workspace_root().join("target").join("sam-local");
    match sam_local::run(&build_dir, &logs, quick)? {
        sam_local::Outcome::Skipped(reason) => {
            println!("sam local invoke: skipped, no container engine here: {reason}");
            Ok(())
        }
        sam_local::Outcome::Ran {
            invocations,
            failures,
        } if failures.is_empty() => {
            println!("sam local invoke: {invocations} sample events answered as expected");
            Ok(())
        }
        sam_local::Outcome::Ran { failures, .. } => Err(format!(
            "sam local invoke: {} failed: {}",
            failures.len(),
            failures.join("; ")
        )),
    }
}

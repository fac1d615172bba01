//! `local-stack <command>`: the local AWS's own commands, run by `cargo xtask`.
//!
//! - `tools`  install the pinned tools into `.tools/`
//! - `run [--keep] [--visibility-timeout S]`  `sam build`, then the whole
//!   application locally (see [`local_stack::runner`])
//! - `build-arm64`  cross-build the functions for Graviton (zig)
//! - `release-builds`  make sure both architectures' release builds exist
//! - `sam ARGS…`  the pinned SAM CLI, offline-friendly (no telemetry, a region)

use local_stack::{runner, sam, tools, workspace_root};
use std::process::ExitCode;

const USAGE: &str = "usage: local-stack <tools | run [--keep] [--visibility-timeout SECONDS] | build-arm64 | release-builds | sam ARGS...>";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let result = match args.as_slice() {
        ["tools"] => tools::install(),
        ["run", flags @ ..] => run_options(flags).and_then(run),
        ["build-arm64"] => sam::build_arm64(),
        ["release-builds"] => sam::release_builds(),
        ["sam", sam_args @ ..] => tools::install().and_then(|()| sam::sam(sam_args)),
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
            other => return Err(format!("unknown flag {other}\n{USAGE}")),
        }
    }
    Ok(options)
}

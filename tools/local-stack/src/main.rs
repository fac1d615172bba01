//! `local-stack <command>`: the local AWS's own commands, run by `cargo xtask`.
//!
//! - `tools`  install the pinned tools into `.tools/`
//! - `build [--release]`  `sam build`: the quick (dev profile) build, or the
//!   shipped one (see [`sam::Build`])
//! - `run [--release] [--keep] [--visibility-timeout S] [--concurrency N] [--no-limits]
//!   [--managed-instances] [--parameter-overrides KEY=VALUE...]`
//!   `sam build` (quick, or `--release`), then the whole application locally
//!   (see [`local_stack::runner`]), with the template's parameters overridden
//!   as `sam deploy --parameter-overrides` does (`--managed-instances`: every
//!   function on Lambda Managed Instances, see
//!   [`local_stack::managed_instances::LOCAL_PARAMETERS`])
//! - `build-arm64`  cross-build the functions for Graviton (zig)
//! - `test-arm64 ARGS…`  `cargo test ARGS` for arm64, run under qemu-aarch64
//! - `release-builds`  build both architectures' release bootstraps from the current code
//! - `sam ARGS…`  the pinned SAM CLI, offline-friendly (no telemetry, a region)
//! - `sam-local [--build-dir DIR] [--quick]`  `sam local invoke` of every
//!   sample event on podman (see [`local_stack::sam_local`]), against the quick
//!   build unless told another; exits with [`SKIPPED`] where no container
//!   engine can be had

use local_stack::cgroup::Limits;
use local_stack::sam::Build;
use local_stack::{managed_instances, pool, runner, sam, sam_local, tools, workspace_root};
use std::process::ExitCode;

const USAGE: &str = "usage: local-stack <tools | build [--release] | run [--release] [--keep] [--visibility-timeout SECONDS] [--concurrency N] [--no-limits] [--managed-instances] [--parameter-overrides KEY=VALUE...] | build-arm64 | test-arm64 CARGO-TEST-ARGS... | release-builds | sam ARGS... | sam-local [--build-dir DIR] [--quick]>";

/// The exit status of a step that did not run here (automake's convention
/// for a skipped test), so the suite can report it as skipped, not passed.
const SKIPPED: u8 = 77;

/// How a command ended.
enum Done {
    Ran,
    /// It could not run here; why.
    Skipped(String),
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let ran = |result: Result<(), String>| result.map(|()| Done::Ran);
    let result = match args.as_slice() {
        ["tools"] => ran(tools::install()),
        ["build"] => ran(Build::Quick.run().map(drop)),
        ["build", "--release"] => ran(Build::Release.run().map(drop)),
        ["run", flags @ ..] => ran(run_options(flags).and_then(run)),
        ["build-arm64"] => ran(sam::build_arm64()),
        ["test-arm64", args @ ..] => ran(sam::test_arm64(args)),
        ["release-builds"] => ran(sam::release_builds()),
        ["sam", sam_args @ ..] => ran(tools::install().and_then(|()| sam::sam(sam_args))),
        ["sam-local", flags @ ..] => sam_local(flags),
        _ => Err(USAGE.to_owned()),
    };
    match result {
        Ok(Done::Ran) => ExitCode::SUCCESS,
        Ok(Done::Skipped(why)) => {
            println!("skipped: {why}");
            ExitCode::from(SKIPPED)
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// What `run` was asked for: the runner's options, the build to run and the
/// template's parameter values.
struct Run {
    options: runner::Options,
    build: Build,
    parameters: Vec<(String, String)>,
}

/// Build with `sam build` (quick, or the release build Lambda gets with
/// `--release`), then run the application locally.
fn run(run: Run) -> Result<(), String> {
    let built = run.build.run()?;
    let parameters: Vec<(&str, &str)> = run
        .parameters
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let summary = runner::run_with(
        run.options,
        &parameters,
        &built,
        &workspace_root().join("target").join("local-logs"),
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
fn run_options(flags: &[&str]) -> Result<Run, String> {
    let mut build = Build::Quick;
    let mut options = runner::Options {
        keep: false,
        visibility_timeout_s: runner::DEFAULT_VISIBILITY_TIMEOUT_S,
        concurrency: pool::size_setting()?,
        limits: Limits::from_env()?,
    };
    let mut parameters: Vec<(String, String)> = Vec::new();
    let mut set = |key: &str, value: &str| {
        parameters.retain(|(k, _)| k != key);
        parameters.push((key.to_owned(), value.to_owned()));
    };
    let mut flags = flags.iter().peekable();
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
            "--release" => build = Build::Release,
            "--managed-instances" => {
                for (key, value) in managed_instances::LOCAL_PARAMETERS {
                    set(key, value);
                }
            }
            "--parameter-overrides" => {
                let mut given = 0;
                while let Some(pair) = flags.next_if(|next| !next.starts_with("--")) {
                    let (key, value) = pair.split_once('=').ok_or_else(|| {
                        format!("--parameter-overrides takes KEY=VALUE pairs, not {pair:?}")
                    })?;
                    set(key, value);
                    given += 1;
                }
                if given == 0 {
                    return Err("--parameter-overrides needs at least one KEY=VALUE".into());
                }
            }
            other => return Err(format!("unknown flag {other}\n{USAGE}")),
        }
    }
    Ok(Run {
        options,
        build,
        parameters,
    })
}

/// `sam local invoke` of the sample events against the build in `--build-dir`
/// (the quick build by default). Everything it needs from outside (the pinned
/// tools, podman) is installed first: the run itself happens in a network
/// namespace of its own, where nothing but loopback can be reached.
fn sam_local(flags: &[&str]) -> Result<Done, String> {
    let (mut build_dir, mut quick) = (Build::Quick.dir(), false);
    let mut rest = flags.iter();
    while let Some(flag) = rest.next() {
        match *flag {
            "--quick" => quick = true,
            "--build-dir" => build_dir = rest.next().ok_or("--build-dir needs a folder")?,
            other => return Err(format!("unknown flag {other}\n{USAGE}")),
        }
    }
    if !sam_local::in_own_network_namespace_now() {
        tools::install()?;
        if let Err(why) = sam_local::engine_available() {
            return Ok(Done::Skipped(format!(
                "sam local invoke: no container engine here: {why}"
            )));
        }
        let args: Vec<&str> = std::iter::once("sam-local")
            .chain(flags.iter().copied())
            .collect();
        return sam_local::in_own_network_namespace(&args).map(|ran| match ran {
            sam_local::Namespace::Ran => Done::Ran,
            sam_local::Namespace::Impossible(why) => {
                Done::Skipped(format!("sam local invoke: {why}"))
            }
        });
    }
    let build_dir = workspace_root().join(build_dir);
    let logs = workspace_root().join("target").join("sam-local");
    let sam_local::Outcome {
        invocations,
        failures,
    } = sam_local::run(&build_dir, &logs, quick)?;
    if failures.is_empty() {
        println!("sam local invoke: {invocations} sample events answered as expected");
        Ok(Done::Ran)
    } else {
        Err(format!(
            "sam local invoke: {} failed: {}",
            failures.len(),
            failures.join("; ")
        ))
    }
}

//! `cargo xtask <command>`: the project's developer commands.
//!
//! - `tools`  install the pinned tools into `.tools/` (also done by the others)
//! - `test`   the whole suite: fmt, clippy, every test, each allocator, SAM lint and build
//! - `run`    the whole application locally (`local-stack run`): `sam build`,
//!   DynamoDB Local, ElasticMQ, the functions under the runtime interface
//!   emulator, the sample events; `--keep` leaves it running, polled;
//!   `--visibility-timeout S` sets the local queues' (default 2 s)
//! - `build-arm64`  cross-build the three functions for Graviton (zig)
//! - `check-init`  start a project with `sam init` from the template zip
//!   (`scaffold`) and run its unit tests
//! - `lab [--quick]`  the performance lab (the `lab` crate): `BENCHMARKS.md` and
//!   its plots; `--quick` is the suite's small run that checks properties only
//!
//! This crate only dispatches: the local stack (`local-stack/`) and the lab
//! (`lab/`) are crates of their own, run with `cargo run`, so `cargo xtask`
//! compiles no AWS SDK and no plotting library.

mod command;
mod scaffold;

use command::{cargo, describe, package, run, workspace_root};
use std::process::{Command, ExitCode};
use std::time::Instant;

const USAGE: &str = "usage: cargo xtask <tools | test | run [--keep] [--visibility-timeout SECONDS] | build-arm64 | check-init | lab [--quick]>";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let result = match args.as_slice() {
        ["tools"] => run(&mut package("local-stack", &["tools"])),
        ["test"] => test(),
        ["run", flags @ ..] => run(&mut package("local-stack", &[&["run"], flags].concat())),
        ["build-arm64"] => run(&mut package("local-stack", &["build-arm64"])),
        ["lab", flags @ ..] => run(&mut package("lab", flags)),
        ["check-init"] => check_init(),
        ["--help" | "-h" | "help"] => {
            println!("{USAGE}");
            Ok(())
        }
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

/// `sam ARGS` from the pinned venv (through the local stack, which pins it).
fn sam(args: &[&str]) -> Command {
    package("local-stack", &[&["sam"], args].concat())
}

/// Run `command` and require that it fails with `message` in its output.
fn expect_failure(command: &mut Command, message: &str) -> Result<(), String> {
    let output = command
        .output()
        .map_err(|e| format!("{}: {e}", describe(command)))?;
    let text = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() && text.contains(message) {
        Ok(())
    } else {
        Err(format!(
            "{} should fail with {message:?}, but: {}\n{text}",
            describe(command),
            output.status
        ))
    }
}

/// The whole suite, step by step; stops at the first failure.
fn test() -> Result<(), String> {
    type Step = (&'static str, Box<dyn Fn() -> Result<(), String>>);
    let mut steps: Vec<Step> = vec![
        (
            "install pinned tools",
            Box::new(|| run(&mut package("local-stack", &["tools"]))),
        ),
        (
            "cargo fmt --check",
            Box::new(|| run(cargo().args(["fmt", "--all", "--check"]))),
        ),
        (
            "cargo clippy -D warnings",
            Box::new(|| {
                run(cargo().args([
                    "clippy",
                    "--workspace",
                    "--all-targets",
                    "--",
                    "-D",
                    "warnings",
                ]))
            }),
        ),
        (
            "cargo test (unit, integration, end-to-end)",
            Box::new(|| run(cargo().args(["test", "--workspace"]))),
        ),
        (
            "performance lab, quick (properties only)",
            Box::new(|| run(&mut package("lab", &["--quick"]))),
        ),
    ];
    for feature in ["jemalloc", "snmalloc", "system"] {
        steps.push((
            match feature {
                "jemalloc" => "shared crate with jemalloc",
                "snmalloc" => "shared crate with snmalloc",
                _ => "shared crate with the system allocator",
            },
            Box::new(move || {
                run(cargo().args([
                    "test",
                    "--package",
                    "shared",
                    "--no-default-features",
                    "--features",
                    feature,
                ]))
            }),
        ));
    }
    steps.push((
        "two allocators or none: compile errors",
        Box::new(|| {
            expect_failure(
                cargo().args(["check", "--package", "shared", "--features", "system"]),
                "more than one allocator selected",
            )?;
            expect_failure(
                cargo().args(["check", "--package", "shared", "--no-default-features"]),
                "no allocator selected",
            )
        }),
    ));
    steps.push((
        "sam validate --lint",
        Box::new(|| run(&mut sam(&["validate", "--lint"]))),
    ));
    steps.push((
        "sam build (x86_64, quick profile)",
        Box::new(|| {
            // Proves the SAM + cargo-lambda wiring and the Lambda link; the
            // fat-LTO release build is for `sam build` / `cargo xtask run`.
            run(
                sam(&["build", "--build-dir", "target/sam-build-check"]).envs([
                    ("CARGO_PROFILE_RELEASE_LTO", "false"),
                    ("CARGO_PROFILE_RELEASE_CODEGEN_UNITS", "16"),
                    ("CARGO_PROFILE_RELEASE_OPT_LEVEL", "0"),
                ]),
            )
        }),
    ));

    let started = Instant::now();
    let mut report = Vec::new();
    let mut failed = None;
    for (name, step) in &steps {
        eprintln!("\n==> {name}");
        let t = Instant::now();
        let outcome = step();
        report.push((*name, t.elapsed(), outcome.is_ok()));
        if let Err(e) = outcome {
            failed = Some(format!("{name}: {e}"));
            break;
        }
    }
    eprintln!("\nsuite steps ({:.0?} in all):", started.elapsed());
    for (name, elapsed, ok) in &report {
        eprintln!(
            "  {:<4} {:>7.1}s  {name}",
            if *ok { "ok" } else { "FAIL" },
            elapsed.as_secs_f64()
        );
    }
    let passed = report.iter().filter(|(_, _, ok)| *ok).count();
    println!("suite: {passed} passed, {} failed", report.len() - passed);
    failed.map_or(Ok(()), Err)
}

/// Start a project from this repository as a user would: build the template zip
/// (`xtask::scaffold`), `sam init` a project named `demo` from it, check that
/// every file arrived as the zip holds it (only the stack name rendered), and run
/// the new project's unit tests, reusing this workspace's `target/`.
fn check_init() -> Result<(), String> {
    const WORK: &str = "target/sam-init";
    let root = workspace_root();
    let work = root.join(WORK);
    if work.exists() {
        std::fs::remove_dir_all(&work).map_err(|e| format!("{}: {e}", work.display()))?;
    }
    let zip = scaffold::template_zip(&work)?;
    // With `--location`, `--no-interactive` alone still lets cookiecutter prompt
    // for `project_name`; `--no-input` takes the `--name` given.
    run(&mut sam(&[
        "init",
        "--location",
        &format!("{WORK}/{}", scaffold::ZIP_NAME),
        "--name",
        "demo",
        "--no-interactive",
        "--no-input",
        "--output-dir",
        &format!("{WORK}/out"),
    ]))?;

    let demo = work.join("out").join("demo");
    for file in ["template.yaml", "Cargo.toml", "Cargo.lock"] {
        if !demo.join(file).is_file() {
            return Err(format!("sam init made no {}", demo.join(file).display()));
        }
    }
    let placeholder = scaffold::stack_name_line(scaffold::PROJECT_DIR);
    let stack_demo = scaffold::stack_name_line("demo");
    for (file, mut expected) in scaffold::project_entries(&zip)? {
        if file == scaffold::RENDERED_FILE {
            expected = String::from_utf8_lossy(&expected)
                .replace(&placeholder, &stack_demo)
                .into_bytes();
        }
        let path = demo.join(&file);
        let actual = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        if actual != expected {
            return Err(format!("{} differs from the template's", path.display()));
        }
    }
    let samconfig = std::fs::read_to_string(demo.join(scaffold::RENDERED_FILE))
        .map_err(|e| format!("{}: {e}", scaffold::RENDERED_FILE))?;
    if !samconfig.contains(&stack_demo) {
        return Err(format!("the new samconfig.toml lacks `{stack_demo}`"));
    }

    // Cargo names a workspace crate's artifacts after its path inside the
    // workspace, not after where the workspace is: built into this `target/`,
    // the new project's crates would replace this workspace's own, with their
    // `CARGO_MANIFEST_DIR` pointing into `target/sam-init`. A profile setting of
    // no consequence (255 codegen units instead of 256) gives them names of their
    // own; the registry crates are still reused.
    let mut test = cargo();
    test.current_dir(&demo)
        .args(["test", "--workspace", "--lib", "--bins"])
        .env("CARGO_TARGET_DIR", root.join("target"));
    for member in workspace_members(&demo)? {
        test.arg("--config")
            .arg(format!("profile.dev.package.{member}.codegen-units=255"));
    }
    run(&mut test)
}

/// The names of the packages of the workspace in `dir`.
fn workspace_members(dir: &std::path::Path) -> Result<Vec<String>, String> {
    let mut command = cargo();
    command
        .current_dir(dir)
        .args(["metadata", "--no-deps", "--format-version", "1"]);
    let output = command
        .output()
        .map_err(|e| format!("{}: {e}", describe(&command)))?;
    if !output.status.success() {
        return Err(format!("{} failed: {}", describe(&command), output.status));
    }
    let metadata: serde_json::Value =
        serde_json::from_slice(&output.stdout).map_err(|e| format!("cargo metadata: {e}"))?;
    let names: Vec<String> = metadata["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|package| package["name"].as_str().map(str::to_owned))
        .collect();
    if names.is_empty() {
        return Err(format!(
            "cargo metadata lists no package in {}",
            dir.display()
        ));
    }
    Ok(names)
}

//! `cargo xtask test`: the whole suite, step by step, with a timing per step
//! and a closing `suite: N passed, N failed` line.

use crate::command::{cargo, package, run};
use crate::{init_check, sam};
use std::time::Instant;

/// Where [`sam_build_check`] builds.
const SAM_BUILD_CHECK_DIR: &str = "target/sam-build-check";

/// `sam build` with a quick profile: proves the SAM + cargo-lambda wiring and
/// the Lambda link; the fat-LTO release build is for `sam build` /
/// `cargo xtask run`.
pub fn sam_build_check() -> Result<(), String> {
    run(sam(&["build", "--build-dir", SAM_BUILD_CHECK_DIR]).envs([
        ("CARGO_PROFILE_RELEASE_LTO", "false"),
        ("CARGO_PROFILE_RELEASE_CODEGEN_UNITS", "16"),
        ("CARGO_PROFILE_RELEASE_OPT_LEVEL", "0"),
    ]))
}

/// `sam local invoke` of the sample events (one per function with `quick`)
/// against the [`sam_build_check`] build, on podman; skipped, with a line
/// saying why, where no container engine can be had.
pub fn sam_local(quick: bool) -> Result<(), String> {
    let mut args = vec!["sam-local", "--build-dir", SAM_BUILD_CHECK_DIR];
    if quick {
        args.push("--quick");
    }
    run(&mut package("local-stack", &args))
}

/// The whole suite, step by step; stops at the first failure.
pub fn run_all() -> Result<(), String> {
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
    steps.push((
        "password hasher with the bcrypt crate (feature bcrypt-crate)",
        Box::new(|| {
            run(cargo().args([
                "test",
                "--package",
                "password-hasher",
                "--features",
                "bcrypt-crate",
            ]))
        }),
    ));
    steps.push((
        "sam init from the git repository",
        Box::new(init_check::from_git),
    ));
    steps.push((
        "sam validate --lint",
        Box::new(|| run(&mut sam(&["validate", "--lint"]))),
    ));
    steps.push((
        "sam build (x86_64, quick profile)",
        Box::new(sam_build_check),
    ));
    steps.push((
        "sam local invoke, every sample event (podman)",
        Box::new(|| sam_local(false)),
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

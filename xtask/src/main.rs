//! `cargo xtask <command>`: the project's developer commands.
//!
//! - `tools`  install the pinned tools into `.tools/` (also done by the others)
//! - `test`   the whole suite (`suite.rs`): fmt, clippy, every test, SAM lint,
//!   build and local invoke, a user's changes made in a scratch copy
//! - `run`    the whole application locally (`local-stack run`): `sam build`
//!   (the quick dev-profile build; `--release` for the shipped one), DynamoDB
//!   Local, ElasticMQ, the functions under the runtime interface emulator, the
//!   sample events; `--keep` leaves it running, polled; `--visibility-timeout
//!   S` sets the local queues' (default 2 s)
//! - `build-arm64`  cross-build the three functions for Graviton (zig)
//! - `bcrypt-differential [--arm64]`  the hasher's long differential test
//!   (100,000 random passwords against libxcrypt and the `bcrypt` crate, about
//!   10 minutes); `--arm64`: the suite's short one built for arm64 and run under
//!   qemu-aarch64
//! - `sam-local [--quick]`  `sam build` (quick build), then `sam local invoke`
//!   of every sample event (one per function with `--quick`) on podman, as a
//!   suite step does
//! - `check-init`  start a project with `sam init` from this git repository
//!   (also a suite step) and from the template zip (`scaffold`), and run the
//!   zip project's unit tests
//! - `lab [--quick | allocators | power | bcrypt | cold-start | fan-out | first-invocation | concurrency]`  the performance lab (the `lab` crate): `BENCHMARKS.md` and
//!   its plots; `--quick` is the suite's small run that checks properties only;
//!   `power` re-measures only the memory sizes (power tuning) and rewrites their part,
//!   `bcrypt` the same for the bcrypt section, `cold-start` for init and binary
//!   sizes (with and without the tracing exporter), `fan-out` for the Step Functions
//!   fan-out against one function, `first-invocation` for the first invocation
//!   against the steady state
//! - `new-function NAME`  add a working function: the crate `functions/NAME/`,
//!   its function, role, log group, alarm and output in `template.yaml`, a
//!   sample event in `events/NAME/` (see `new_function.rs`)
//! - `remove-function NAME`  the inverse: the crate, its events, and in
//!   `template.yaml` the function and what is its alone; refuses a function
//!   another resource calls or another crate depends on (`remove_function.rs`)
//!
//! - `user-changes`  the suite's steps that make a user's changes in a scratch
//!   copy (`target/user-changes/`): a new function, the hasher on the
//!   `bcrypt` crate, an allocator without its feature, one allocator per
//!   function (see `user_changes.rs`)
//!
//! This crate only dispatches: the local stack (`tools/local-stack/`) and the lab
//! (`tools/lab/`) are crates of their own, run with `cargo run` (the lab's quick
//! run built with the whole workspace, `command::workspace_binary`), so `cargo
//! xtask` compiles no AWS SDK and no plotting library.

mod command;
mod init_check;
mod new_function;
mod remove_function;
mod scaffold;
mod suite;
mod template_text;
mod test_binaries;
mod user_changes;

use command::{package, run};
use std::process::{Command, ExitCode};

const USAGE: &str = "usage: cargo xtask <tools | test | run [--release] [--keep] [--visibility-timeout SECONDS] | build-arm64 | bcrypt-differential [--arm64] | sam-local [--quick] | check-init | lab [--quick | allocators | power | bcrypt | cold-start | fan-out | first-invocation | concurrency] | new-function NAME | remove-function NAME | user-changes>";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let result = match args.as_slice() {
        ["tools"] => pinned_tools::install(),
        ["test"] => suite::run_all(),
        ["run", flags @ ..] => run(&mut package("local-stack", &[&["run"], flags].concat())),
        ["build-arm64"] => run(&mut package("local-stack", &["build-arm64"])),
        ["bcrypt-differential", flags @ ..] => bcrypt_differential(flags),
        ["sam-local"] => sam_local(false),
        ["sam-local", "--quick"] => sam_local(true),
        ["lab", "--quick"] => suite::lab_quick(),
        ["lab", flags @ ..] => run(&mut package("lab", flags)),
        ["check-init"] => init_check::from_git().and_then(|()| init_check::from_zip()),
        ["new-function", name] => add_function(name),
        ["remove-function", name] => remove_function::remove(&command::workspace_root(), name)
            .map(|report| print!("{report}")),
        ["user-changes"] => {
            command::lint_while_building();
            user_changes::new_function()
                .and_then(|()| user_changes::allocator_without_feature())
                .and_then(|()| user_changes::mixed_allocators())
        }
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

/// The password hasher's differential tests: the long run here, or the short
/// one on arm64 under qemu (`--arm64`).
fn bcrypt_differential(flags: &[&str]) -> Result<(), String> {
    const TEST: [&str; 4] = ["--package", "password-hasher", "--test", "differential"];
    match flags {
        [] => run(command::cargo()
            .args(["test", "--release"])
            .args(TEST)
            .args(["--", "--ignored"])),
        ["--arm64"] => run(&mut package(
            "local-stack",
            &[
                &["test-arm64"][..],
                &TEST,
                &["--no-default-features", "--features", "system"],
            ]
            .concat(),
        )),
        _ => Err(USAGE.to_owned()),
    }
}

/// `sam build` (quick), then `sam local invoke` of the sample events (one per
/// function with `quick`); a line says so where it cannot run here.
fn sam_local(quick: bool) -> Result<(), String> {
    suite::sam_build_quick()?;
    match suite::sam_local(quick, None)? {
        suite::Outcome::Passed => Ok(()),
        suite::Outcome::Skipped(why) => {
            println!("sam local invoke skipped: {why}");
            Ok(())
        }
    }
}

/// Add function `name` to this workspace and say what was written.
fn add_function(name: &str) -> Result<(), String> {
    let root = command::workspace_root();
    let written = new_function::create(&root, name)?;
    println!("added function `{name}`:");
    for path in written {
        println!("  {}", path.strip_prefix(&root).unwrap_or(&path).display());
    }
    println!(
        "next: `cargo test -p {name}`, then make it yours (handler.rs, its role in template.yaml)"
    );
    Ok(())
}

/// `sam ARGS` from the pinned venv (through the local stack, which pins it).
pub fn sam(args: &[&str]) -> Result<Command, String> {
    command::local_stack(&[&["sam"], args].concat())
}

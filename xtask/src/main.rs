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
//! - `test-arm64 CARGO-TEST-ARGS...`  `cargo test` with those arguments,
//!   built for arm64 and run under qemu-aarch64 (such as the hasher's
//!   differential test: see its README)
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
//!   `template.yaml` the function and what is its alone, then the root
//!   `Cargo.toml`'s profile entries of crates gone (`profiles.rs`); refuses a
//!   function another resource calls or another crate depends on
//!   (`remove_function.rs`)
//!
//! - `user-changes`  the suite's steps that make a user's changes in a scratch
//!   copy (`target/user-changes/`): a new function, the default features
//!   functions declare for it (the hasher on the `bcrypt` crate), an
//!   allocator without its feature, one allocator per function, the samples
//!   removed (see `user_changes.rs`)
//!
//! The arguments are parsed in `cli.rs`, whose test parses every `cargo
//! xtask` command the docs show. It holds the suite's steps and the commands that edit a project (new-function, remove-function); the local stack (`tools/local-stack/`) and the lab
//! (`tools/lab/`) are crates of their own, run with `cargo run` (the lab's quick
//! run built with the whole workspace, `command::workspace_binary`), so `cargo
//! xtask` compiles no AWS SDK and no plotting library.

mod cli;
mod command;
mod init_check;
mod new_function;
mod profiles;
mod remove_function;
mod scaffold;
mod suite;
mod template_text;
mod test_binaries;
mod user_changes;

use cli::Command;
use command::{package, run};
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    match cli::parse(&args).and_then(execute) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Run `command`.
fn execute(command: Command) -> Result<(), String> {
    match command {
        Command::Tools => pinned_tools::install(),
        Command::Test => suite::run_all(),
        Command::Run(flags) => run(&mut package_with("local-stack", "run", &flags)),
        Command::BuildArm64 => run(&mut package("local-stack", &["build-arm64"])),
        Command::TestArm64(args) => run(&mut package_with("local-stack", "test-arm64", &args)),
        Command::SamLocal { quick } => sam_local(quick),
        Command::LabQuick => suite::lab_quick(),
        Command::Lab(flags) => {
            let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
            run(&mut package("lab", &flags))
        }
        Command::CheckInit => init_check::from_git().and_then(|()| init_check::from_zip()),
        Command::NewFunction(name) => add_function(&name),
        Command::RemoveFunction(name) => remove_function::remove(&command::workspace_root(), &name)
            .map(|report| print!("{report}")),
        Command::UserChanges => {
            command::lint_while_building();
            user_changes::new_function()
                .and_then(|()| user_changes::allocator_without_feature())
                .and_then(|()| user_changes::mixed_allocators())
                .and_then(|()| user_changes::samples_removed())
        }
        Command::Help => {
            println!("{}", cli::USAGE);
            Ok(())
        }
    }
}

/// `package`'s program run with `first` then `rest`.
fn package_with(name: &str, first: &str, rest: &[String]) -> std::process::Command {
    let mut args = vec![first];
    args.extend(rest.iter().map(String::as_str));
    package(name, &args)
}

/// `sam build` (quick), then `sam local invoke` of the sample events (one per
/// function with `quick`); a line says so where it cannot run here.
fn sam_local(quick: bool) -> Result<(), String> {
    suite::sam_build_quick()?;
    match command::sam_local(quick, None, None)? {
        command::Outcome::Passed => Ok(()),
        command::Outcome::Skipped(why) => {
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
pub fn sam(args: &[&str]) -> Result<std::process::Command, String> {
    command::local_stack(&[&["sam"], args].concat())
}

//! Running commands: `cargo` in the workspace root, the local stack's and the
//! lab's binaries through it, and errors that name the command.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The workspace root (where `template.yaml` lives).
pub fn workspace_root() -> PathBuf {
    let manifest_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest_dir
        .parent()
        .map_or(manifest_dir.clone(), PathBuf::from)
}

/// `cargo`, the one running this command if any, in the workspace root.
pub fn cargo() -> Command {
    let mut command = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    // Set by `cargo run` for this program: ring's build script watches it,
    // so a cargo started with it would rebuild ring and all that depends on
    // it (the AWS SDK, the functions) whenever it differs from the last build.
    command
        .current_dir(workspace_root())
        .env_remove("CARGO_MANIFEST_DIR");
    command
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

/// Run `command`, turning a failure into an error naming it.
pub fn run(command: &mut Command) -> Result<(), String> {
    let status = command
        .status()
        .map_err(|e| format!("{}: {e}", describe(command)))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{} failed: {status}", describe(command)))
    }
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

/// `program arg arg…` for messages.
pub fn describe(command: &Command) -> String {
    std::iter::once(command.get_program())
        .chain(command.get_args())
        .map(|s| Path::new(s).display().to_string())
        .collect::<Vec<_>>()
        .join(" ")
}

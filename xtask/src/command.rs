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
    command.current_dir(workspace_root());
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

/// `program arg arg…` for messages.
pub fn describe(command: &Command) -> String {
    std::iter::once(command.get_program())
        .chain(command.get_args())
        .map(|s| Path::new(s).display().to_string())
        .collect::<Vec<_>>()
        .join(" ")
}

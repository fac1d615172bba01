//! Developer tooling shared by `cargo xtask` and the end-to-end tests: pinned
//! tool versions and their installation, and the local stand-ins for AWS
//! (the Lambda runtime interface emulator) started on loopback ports.

pub mod checkov;
pub mod dynamodb_local;
pub mod elasticmq;
pub mod emulator;
pub mod event_source;
pub mod lab;
pub mod least_privilege;
pub mod local_aws;
pub mod process;
pub mod runner;
pub mod sam;
pub mod scaffold;
pub mod template;
pub mod tools;

use std::path::PathBuf;

/// The sample events of `function`: every `events/<function>/*.json`, sorted,
/// with its text.
pub fn sample_events(function: &str) -> Result<Vec<(PathBuf, String)>, String> {
    let dir = workspace_root().join("events").join(function);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|path| {
            let text =
                std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            Ok((path, text))
        })
        .collect()
}

/// `cargo`, the one running this command if any, in the workspace root.
pub fn cargo() -> std::process::Command {
    let mut command =
        std::process::Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    command.current_dir(workspace_root());
    command
}

/// The workspace root (where `template.yaml` lives).
pub fn workspace_root() -> PathBuf {
    let manifest_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest_dir
        .parent()
        .map_or(manifest_dir.clone(), PathBuf::from)
}

//! Developer tooling shared by `cargo xtask` and the end-to-end tests: pinned
//! tool versions and their installation, and the local stand-ins for AWS
//! (the Lambda runtime interface emulator) started on loopback ports.

pub mod dynamodb_local;
pub mod elasticmq;
pub mod emulator;
pub mod event_source;
pub mod process;
pub mod runner;
pub mod scaffold;
pub mod template;
pub mod tools;

use std::path::PathBuf;

/// The workspace root (where `template.yaml` lives).
pub fn workspace_root() -> PathBuf {
    let manifest_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest_dir
        .parent()
        .map_or(manifest_dir.clone(), PathBuf::from)
}

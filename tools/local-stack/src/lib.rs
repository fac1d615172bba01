//! The Docker-free local AWS the end-to-end suite, `cargo xtask run` and the
//! lab run the application on: `template.yaml` read as AWS would read it, the
//! functions under the Lambda runtime interface emulator (on demand, or on
//! Lambda Managed Instances), DynamoDB Local, ElasticMQ, moto (Step Functions
//! and S3), the SQS event source mapping, the pinned tools that provide them,
//! and the process groups and loopback ports they run on.

pub mod async_invoke;
pub mod cgroup;
pub mod checkov;
pub mod dynamodb_local;
pub mod elasticmq;
pub mod emulator;
pub mod event_source;
pub mod events;
pub mod expectations;
pub mod function_url;
pub mod lambda_api;
pub mod lambda_rules;
pub mod least_privilege;
pub mod local_aws;
pub mod managed_instances;
pub mod moto;
pub mod pool;
pub mod process;
pub mod runner;
pub mod sam;
pub mod sam_local;
pub mod schedule;
pub mod step_functions;
pub mod task_root;
pub mod template;
pub mod tls_front;
pub mod tools;
pub mod trace_header;
pub mod xray_daemon;
pub mod zipkin;

use std::path::PathBuf;

/// `cargo`, the one running this command if any, in the workspace root,
/// without the variables of [`without_cargo_run_variables`].
pub fn cargo() -> std::process::Command {
    let mut command =
        std::process::Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    command.current_dir(workspace_root());
    without_cargo_run_variables(&mut command);
    command
}

/// Remove from `command`'s environment what `cargo run` and `cargo test` set
/// for the program they start (`CARGO_PKG_NAME`, `CARGO_MANIFEST_DIR`, ...).
/// Build scripts watch some of them (ring's: `CARGO_MANIFEST_DIR`,
/// `CARGO_PKG_NAME`, ...), so a build started from such a program with them
/// would rebuild ring and everything on it (the AWS SDK, the functions)
/// whenever they differ from the last build's. Every build this project
/// starts goes without them (xtask's `command.rs` does the same).
pub fn without_cargo_run_variables(command: &mut std::process::Command) {
    const SET_BY_CARGO: [&str; 7] = [
        "CARGO_PKG_",
        "CARGO_MANIFEST_",
        "CARGO_CRATE_",
        "CARGO_BIN_",
        "CARGO_PRIMARY_PACKAGE",
        "CARGO_TARGET_TMPDIR",
        "OUT_DIR",
    ];
    for (name, _) in std::env::vars_os() {
        let text = name.to_string_lossy();
        if SET_BY_CARGO.iter().any(|prefix| text.starts_with(prefix)) {
            command.env_remove(&name);
        }
    }
}

/// The workspace root (where `template.yaml` lives): this crate is
/// `tools/local-stack/` in it.
pub fn workspace_root() -> PathBuf {
    let manifest_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest_dir
        .ancestors()
        .nth(2)
        .map_or(manifest_dir.clone(), PathBuf::from)
}

//! What the lab's measurements of the functions' bootstraps run against: the
//! log folder, DynamoDB Local with the template's tables (what a request
//! reads written by its function's `prepare` probe), and cold starts under
//! the emulator.

use local_stack::dynamodb_local::{self, DynamoDbLocal};
use local_stack::emulator::Emulator;
use local_stack::jvm::Compiler;
use local_stack::template::{Function, Template};
use local_stack::workspace_root;
use std::path::{Path, PathBuf};

/// `target/lab-logs`, where every server and emulator of the lab logs.
pub fn logs_dir() -> Result<PathBuf, String> {
    let logs = workspace_root().join("target").join("lab-logs");
    std::fs::create_dir_all(&logs).map_err(|e| format!("{}: {e}", logs.display()))?;
    Ok(logs)
}

/// DynamoDB Local holding the template's tables. Dropping it stops the server.
pub struct Tables {
    dynamodb: DynamoDbLocal,
}

impl Tables {
    /// Start DynamoDB Local (logging to `log`) and create `template`'s tables.
    pub fn start(template: &Template, log: &Path) -> Result<Self, String> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        let dynamodb = DynamoDbLocal::start(log, Compiler::Peak)?;
        runtime.block_on(dynamodb_local::create_tables(template, &dynamodb.client()))?;
        Ok(Self { dynamodb })
    }

    /// The plain HTTP endpoint.
    pub fn endpoint(&self) -> String {
        self.dynamodb.endpoint()
    }

    /// Its port on 127.0.0.1 (for a TLS front).
    pub fn port(&self) -> u16 {
        self.dynamodb.port()
    }
}

/// The init durations (ms) of `starts` cold starts of `binary` as `spec`
/// with `env`, each invoked once with `{}` (any answer will do, an error too:
/// init has happened by then); start `n` logs to `log(n)`.
pub fn init_durations_ms(
    rie: &Path,
    binary: &Path,
    spec: &Function,
    env: &[(&str, &str)],
    log: impl Fn(usize) -> PathBuf,
    starts: usize,
) -> Result<Vec<f64>, String> {
    (0..starts)
        .map(|n| {
            let log = log(n);
            let emulator = Emulator::start(rie, binary, spec, env, &log)?;
            emulator.invoke("{}")?;
            let init = emulator.init_duration_ms();
            emulator.stop();
            init.ok_or_else(|| format!("{}: no init duration in {}", spec.binary, log.display()))
        })
        .collect()
}

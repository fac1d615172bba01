//! DynamoDB Local on a free 127.0.0.1 port, its tables created from
//! `template.yaml`, stopped on drop.

use crate::jvm::{self, Compiler};
use crate::process::{Guard, free_port, wait_for_port, wait_until_ready};
use crate::template::Template;
use crate::tools;
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, GlobalSecondaryIndex, KeySchemaElement, KeyType, Projection,
    ProjectionType, ScalarAttributeType,
};
use serde_norway::Value;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

/// A running DynamoDB Local.
#[derive(Debug)]
pub struct DynamoDbLocal {
    guard: Guard,
    port: u16,
    db_path: Option<PathBuf>,
    log: PathBuf,
}

/// What the launcher prints once its server listens (`LoopbackDynamoDbLocal.java`).
const LISTENING: &str = "DynamoDB Local listening on";

/// Wait until the DynamoDB Local of `guard` says it listens on `port` (in
/// `log`) and accepts a connection there: a connection alone can be accepted
/// by something else while the JVM starts (seen once: the tables' creation
/// was then refused). `Err` with the end of the log if it exits first.
fn ready(guard: &mut Guard, port: u16, log: &Path) -> Result<(), String> {
    wait_until_ready(
        guard,
        "DynamoDB Local",
        log,
        Duration::from_secs(60),
        || std::fs::read_to_string(log).is_ok_and(|logs| logs.contains(LISTENING)),
    )?;
    wait_for_port(port, Duration::from_secs(5))
        .map_err(|e| format!("DynamoDB Local: {e}; see {}", log.display()))
}

impl DynamoDbLocal {
    /// Start an in-memory DynamoDB Local on a free port.
    pub fn start(log: &Path, compiler: Compiler) -> Result<Self, String> {
        Self::start_on(free_port().map_err(|e| e.to_string())?, None, log, compiler)
    }

    /// Start DynamoDB Local on `port`, keeping its data in `db_path` if given
    /// (so a restart finds it again).
    pub fn start_on(
        port: u16,
        db_path: Option<&Path>,
        log: &Path,
        compiler: Compiler,
    ) -> Result<Self, String> {
        tools::require(&tools::dynamodb_local_lib(), "DynamoDB Local")?;
        tools::require(
            &tools::dynamodb_local_launcher(),
            "DynamoDB Local's launcher",
        )?;
        let out = std::fs::File::create(log).map_err(|e| format!("{}: {e}", log.display()))?;
        let err = out.try_clone().map_err(|e| e.to_string())?;
        let classpath = format!(
            "{}/*:{}",
            tools::dynamodb_local_lib().display(),
            tools::dynamodb_local_launcher().display()
        );
        let mut command = jvm::command("1g", compiler);
        command
            .args([
                "-cp",
                &classpath,
                "LoopbackDynamoDbLocal",
                &port.to_string(),
            ])
            .args(db_path)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err);
        let mut guard = Guard::spawn("DynamoDB Local", &mut command)?;
        ready(&mut guard, port, log)?;
        Ok(Self {
            guard,
            port,
            db_path: db_path.map(Path::to_path_buf),
            log: log.to_path_buf(),
        })
    }

    /// `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Kill it at once (SIGKILL after a short grace), as a crash would.
    pub fn kill(mut self) -> (u16, Option<PathBuf>, PathBuf) {
        self.guard.stop(Duration::from_millis(200));
        (self.port, self.db_path.take(), self.log.clone())
    }

    /// A client for this server: static local credentials, no SDK retries.
    pub fn client(&self) -> Client {
        client(&self.endpoint())
    }
}

/// A DynamoDB client for a local endpoint.
pub fn client(endpoint: &str) -> Client {
    Client::new(&crate::local_aws::sdk_config(endpoint))
}

/// A `GlobalSecondaryIndexes` entry of table `table`, as the SDK takes it.
fn global_index(table: &str, index: &Value) -> Result<GlobalSecondaryIndex, String> {
    let text = |v: &Value, key: &str| {
        v.get(key)
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| format!("{table}: index {key} missing"))
    };
    let mut builder = GlobalSecondaryIndex::builder().index_name(text(index, "IndexName")?);
    for key in index
        .get("KeySchema")
        .and_then(Value::as_sequence)
        .into_iter()
        .flatten()
    {
        builder = builder.key_schema(
            KeySchemaElement::builder()
                .attribute_name(text(key, "AttributeName")?)
                .key_type(KeyType::from(text(key, "KeyType")?.as_str()))
                .build()
                .map_err(|e| e.to_string())?,
        );
    }
    let projection = index
        .get("Projection")
        .ok_or_else(|| format!("{table}: index Projection missing"))?;
    let attributes = projection
        .get("NonKeyAttributes")
        .and_then(Value::as_sequence)
        .map(|names| {
            names
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        });
    builder
        .projection(
            Projection::builder()
                .projection_type(ProjectionType::from(
                    text(projection, "ProjectionType")?.as_str(),
                ))
                .set_non_key_attributes(attributes)
                .build(),
        )
        .build()
        .map_err(|e| format!("{table}: {e}"))
}

/// Create every `AWS::DynamoDB::Table` of the template (and its global
/// secondary indexes), named by logical id.
pub async fn create_tables(template: &Template, client: &Client) -> Result<Vec<String>, String> {
    let mut created = Vec::new();
    for (name, resource) in template.resources("AWS::DynamoDB::Table") {
        let props = resource
            .get("Properties")
            .ok_or_else(|| format!("{name}: no Properties"))?;
        let list = |key: &str| {
            props
                .get(key)
                .and_then(Value::as_sequence)
                .cloned()
                .unwrap_or_default()
        };
        let text = |v: &Value, key: &str| {
            v.get(key)
                .and_then(Value::as_str)
                .map(str::to_owned)
                .ok_or_else(|| format!("{name}: {key} missing"))
        };
        let mut request = client
            .create_table()
            .table_name(&name)
            .billing_mode(BillingMode::PayPerRequest);
        for def in list("AttributeDefinitions") {
            request = request.attribute_definitions(
                AttributeDefinition::builder()
                    .attribute_name(text(&def, "AttributeName")?)
                    .attribute_type(ScalarAttributeType::from(
                        text(&def, "AttributeType")?.as_str(),
                    ))
                    .build()
                    .map_err(|e| e.to_string())?,
            );
        }
        for key in list("KeySchema") {
            request = request.key_schema(
                KeySchemaElement::builder()
                    .attribute_name(text(&key, "AttributeName")?)
                    .key_type(KeyType::from(text(&key, "KeyType")?.as_str()))
                    .build()
                    .map_err(|e| e.to_string())?,
            );
        }
        for index in list("GlobalSecondaryIndexes") {
            request = request.global_secondary_indexes(global_index(&name, &index)?);
        }
        request.send().await.map_err(|e| {
            format!(
                "create table {name}: {}",
                aws_sdk_dynamodb::error::DisplayErrorContext(e)
            )
        })?;
        created.push(name);
    }
    Ok(created)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    /// A stand-in for the launcher: `script` run by `sh`, its output in `log`.
    fn stand_in(script: &str, log: &Path) -> Guard {
        let out = std::fs::File::create(log).expect("log");
        let err = out.try_clone().expect("log");
        let mut command = Command::new("sh");
        command.args(["-c", script]).stdout(out).stderr(err);
        Guard::spawn("stand-in", &mut command).expect("spawn")
    }

    #[test]
    fn ready_means_it_said_so_and_accepts() {
        let log = std::env::temp_dir().join(format!("dynamodb-ready-{}.log", std::process::id()));
        // Something else accepts on the port, the server never says it listens
        // and then exits: not ready. The port is the one bound here (a port
        // from `free_port` could be taken by another test before the bind).
        let taken = std::net::TcpListener::bind(("127.0.0.1", 0)).expect("bind");
        let port = taken.local_addr().expect("bound address").port();
        let mut silent = stand_in("sleep 0.5; echo 'bind failed'; exit 1", &log);
        let refused = ready(&mut silent, port, &log);
        assert!(
            refused
                .as_ref()
                .is_err_and(|e| e.contains("exited") && e.contains("bind failed")),
            "{refused:?}"
        );
        drop(taken);
        let script = format!(
            "exec python3 -c 'import socket,time; s=socket.socket(); s.bind((\"127.0.0.1\", {port})); s.listen(); print(\"{LISTENING} 127.0.0.1:{port}\", flush=True); time.sleep(60)'"
        );
        let mut listening = stand_in(&script, &log);
        assert_eq!(ready(&mut listening, port, &log), Ok(()));
        let _ = std::fs::remove_file(&log);
    }
}

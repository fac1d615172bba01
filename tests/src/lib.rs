//! Harness for the end-to-end suite: builds the real function binaries and runs
//! them under the Lambda runtime interface emulator, configured from
//! `template.yaml`, on free loopback ports. Everything started is stopped on
//! drop, also when a test fails.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use xtask::emulator::Emulator;
pub use xtask::emulator::init_duration_ms;
use xtask::template::{Function, Template};
pub use xtask::workspace_root;

/// The binaries of the three functions, as named in `template.yaml`.
pub const FUNCTIONS: [&str; 3] = ["order-processor", "password-hasher", "arrow-worker"];

/// The debug build of function `name` (the suite tests behaviour, not speed).
///
/// Built once per test process by `cargo test --workspace --no-run`: the very
/// command of the suite, so the binaries come with the same features as every
/// other test target and nothing is compiled twice (a `cargo build -p NAME`
/// would resolve features for NAME alone and rebuild much of the dependency
/// tree). Cheap when everything is up to date; after `cargo test -p e2e` alone,
/// the first call compiles the rest of the workspace's tests once.
pub fn binary(name: &str) -> PathBuf {
    static BUILT: OnceLock<()> = OnceLock::new();
    let root = workspace_root();
    BUILT.get_or_init(|| {
        let status = std::process::Command::new(env!("CARGO"))
            .current_dir(&root)
            .args(["test", "--workspace", "--no-run", "--quiet"])
            .status()
            .unwrap_or_else(|e| panic!("cargo test --no-run: {e}"));
        assert!(
            status.success(),
            "cargo test --workspace --no-run: {status}"
        );
    });
    let target =
        std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), PathBuf::from);
    let path = target.join("debug").join(name);
    assert!(path.is_file(), "no binary {}", path.display());
    path
}

/// The function declared in `template.yaml` with this binary.
pub fn function(name: &str) -> Function {
    Template::load(&workspace_root().join("template.yaml"))
        .and_then(|t| t.function(name))
        .unwrap_or_else(|e| panic!("{e}"))
}

/// Start `name` under the emulator, as the template declares it, with `env` on top.
pub fn start(name: &str, env: &[(&str, &str)]) -> Emulator {
    static RUN: AtomicUsize = AtomicUsize::new(0);
    let rie = xtask::tools::emulator().unwrap_or_else(|e| panic!("{e}"));
    let logs = workspace_root().join("target").join("e2e-logs");
    std::fs::create_dir_all(&logs).unwrap_or_else(|e| panic!("{}: {e}", logs.display()));
    let log = logs.join(format!(
        "{name}-{}-{}.log",
        std::process::id(),
        RUN.fetch_add(1, Ordering::Relaxed)
    ));
    Emulator::start(&rie, &binary(name), &function(name), env, &log)
        .unwrap_or_else(|e| panic!("{e}"))
}

/// The sample events of a function: every file in `events/<name>/`.
pub fn events(name: &str) -> Vec<(PathBuf, String)> {
    xtask::sample_events(name).unwrap_or_else(|e| panic!("{e}"))
}

/// The JSON log lines among `logs` (the function's own lines under
/// `AWS_LAMBDA_LOG_FORMAT=JSON`; the emulator's lines are plain text).
pub fn json_lines(logs: &str) -> Vec<serde_json::Value> {
    logs.lines()
        .filter(|line| line.starts_with('{'))
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect()
}

/// A fresh path under `target/e2e-logs/` for a log or data folder named `what`.
pub fn scratch(what: &str) -> PathBuf {
    static RUN: AtomicUsize = AtomicUsize::new(0);
    let dir = workspace_root().join("target").join("e2e-logs");
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    dir.join(format!(
        "{what}-{}-{}",
        std::process::id(),
        RUN.fetch_add(1, Ordering::Relaxed)
    ))
}

/// File name of `path`, for messages.
pub fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// SQS records (standard queue) carrying the sample orders `range`, message
/// ids `msg-N`.
pub fn sample_records(range: std::ops::Range<u64>) -> Vec<aws_lambda_events::sqs::SqsMessage> {
    order_processor::sample::records(range, order_processor::sample::body)
}

/// Every item of a local table as `order_id -> content_hash`, by paginated scan.
pub async fn stored_hashes(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
) -> std::collections::BTreeMap<String, String> {
    use aws_sdk_dynamodb::types::AttributeValue;
    let mut items = std::collections::BTreeMap::new();
    let mut pages = client
        .scan()
        .table_name(table)
        .consistent_read(true)
        .into_paginator()
        .items()
        .send();
    while let Some(item) = pages.next().await {
        let item = item.unwrap_or_else(|e| panic!("scan {table}: {e}"));
        let text = |key: &str| match item.get(key) {
            Some(AttributeValue::S(s)) => s.clone(),
            other => panic!("{key} is {other:?}"),
        };
        let previous = items.insert(text("order_id"), text("content_hash"));
        assert!(previous.is_none(), "a scan returned an order twice");
    }
    items
}

/// What the table must hold after the sample orders `range` were processed.
pub fn expected_hashes(range: std::ops::Range<u64>) -> std::collections::BTreeMap<String, String> {
    range
        .map(|n| {
            let valid = order_processor::order::validate(order_processor::sample::order(n))
                .unwrap_or_else(|e| panic!("sample {n}: {e}"));
            (valid.order.order_id.clone(), valid.hash_hex())
        })
        .collect()
}

/// DynamoDB Local with the template's tables, and the environment that points a
/// function at it (as `sam local invoke` users do with `AWS_ENDPOINT_URL_*`).
pub struct LocalDynamoDb {
    /// The server (stopped on drop).
    pub server: xtask::dynamodb_local::DynamoDbLocal,
    env: Vec<(&'static str, String)>,
}

impl LocalDynamoDb {
    /// Start DynamoDB Local and create the template's tables.
    pub async fn start() -> Self {
        let server =
            xtask::dynamodb_local::DynamoDbLocal::start(&scratch("dynamodb").with_extension("log"))
                .unwrap_or_else(|e| panic!("{e}"));
        let template = Template::load(&workspace_root().join("template.yaml"))
            .unwrap_or_else(|e| panic!("{e}"));
        xtask::dynamodb_local::create_tables(&template, &server.client())
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let env = vec![
            ("AWS_ENDPOINT_URL_DYNAMODB", server.endpoint()),
            ("AWS_ACCESS_KEY_ID", xtask::local_aws::ACCESS_KEY.to_owned()),
            (
                "AWS_SECRET_ACCESS_KEY",
                xtask::local_aws::ACCESS_KEY.to_owned(),
            ),
        ];
        Self { server, env }
    }

    /// Environment variables for a function using this server.
    pub fn env(&self) -> Vec<(&str, &str)> {
        self.env.iter().map(|(k, v)| (*k, v.as_str())).collect()
    }
}

/// ElasticMQ with the template's queues (redrive policies included), every
/// visibility timeout shortened to `visibility_timeout_s` so that retries and
/// dead-lettering happen in seconds.
pub struct LocalQueues {
    /// The server (stopped on drop).
    pub server: xtask::elasticmq::ElasticMq,
    /// A client for it.
    pub client: aws_sdk_sqs::Client,
    /// The queues, dead-letter queues first.
    pub queues: Vec<xtask::elasticmq::LocalQueue>,
}

impl LocalQueues {
    /// Start ElasticMQ and create the template's queues.
    pub async fn start(visibility_timeout_s: u32) -> Self {
        let server =
            xtask::elasticmq::ElasticMq::start(&scratch("elasticmq").with_extension("log"))
                .unwrap_or_else(|e| panic!("{e}"));
        let template = Template::load(&workspace_root().join("template.yaml"))
            .unwrap_or_else(|e| panic!("{e}"));
        let client = server.client();
        let queues =
            xtask::elasticmq::create_queues(&template, &client, Some(visibility_timeout_s))
                .await
                .unwrap_or_else(|e| panic!("{e}"));
        Self {
            server,
            client,
            queues,
        }
    }

    /// The queue with this logical id.
    pub fn queue(&self, logical_id: &str) -> &xtask::elasticmq::LocalQueue {
        self.queues
            .iter()
            .find(|q| q.spec.logical_id == logical_id)
            .unwrap_or_else(|| panic!("no queue {logical_id}"))
    }
}

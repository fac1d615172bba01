//! The local AWS services a test starts, with the template's tables, queues,
//! buckets and state machines, and the environment that points a function at
//! them over HTTPS.

use crate::functions::template;
use crate::scratch::scratch;
use local_stack::elasticmq::{LocalQueue, send};
use local_stack::jvm::Compiler;
use local_stack::template::{SqsSource, Template};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// DynamoDB Local with the template's tables, and the environment that points a
/// function at it (as `sam local invoke` users do with `AWS_ENDPOINT_URL_*`):
/// over HTTPS, through a TLS front with a certificate authority made for the
/// test, as functions reach DynamoDB on AWS (the test's own client uses the
/// plain port).
pub struct LocalDynamoDb {
    /// The server (stopped on drop).
    pub server: local_stack::dynamodb_local::DynamoDbLocal,
    front: local_stack::tls_front::TlsFront,
    endpoint: String,
}

/// The certificate authority of this test process, and its certificate's file.
fn authority() -> &'static (local_stack::tls_front::Authority, String) {
    static AUTHORITY: OnceLock<(local_stack::tls_front::Authority, String)> = OnceLock::new();
    AUTHORITY.get_or_init(|| {
        let file = scratch("certificate-authority").with_extension("pem");
        let authority =
            local_stack::tls_front::Authority::new(&file).unwrap_or_else(|e| panic!("{e}"));
        (authority, file.to_string_lossy().into_owned())
    })
}

/// The file functions find this process's certificate authority in (`SSL_CERT_FILE`).
pub fn ca_file() -> &'static str {
    &authority().1
}

/// HTTPS on a free loopback port in front of the plain server on `port`.
pub fn tls_front(port: u16) -> local_stack::tls_front::TlsFront {
    local_stack::tls_front::TlsFront::start(&authority().0, port).unwrap_or_else(|e| panic!("{e}"))
}

impl LocalDynamoDb {
    /// Start an in-memory DynamoDB Local for one test (the quick compiler,
    /// [`Compiler::Quick`]) and create the template's tables.
    pub async fn start() -> Self {
        let server = local_stack::dynamodb_local::DynamoDbLocal::start(
            &scratch("dynamodb").with_extension("log"),
            Compiler::Quick,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        Self::with_tables(server).await
    }

    /// Start DynamoDB Local on a free port with its database in the folder
    /// `db_path` (created if missing), so that a server killed and started
    /// again on the same port and path finds every item written before.
    pub async fn start_persistent(db_path: &Path, compiler: Compiler) -> Self {
        std::fs::create_dir_all(db_path).unwrap_or_else(|e| panic!("{}: {e}", db_path.display()));
        let port = local_stack::process::free_port().unwrap_or_else(|e| panic!("free port: {e}"));
        let server = local_stack::dynamodb_local::DynamoDbLocal::start_on(
            port,
            Some(db_path),
            &scratch("dynamodb").with_extension("log"),
            compiler,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        Self::with_tables(server).await
    }

    /// Create the template's tables on `server`.
    async fn with_tables(server: local_stack::dynamodb_local::DynamoDbLocal) -> Self {
        local_stack::dynamodb_local::create_tables(&template(), &server.client())
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let front = tls_front(server.port());
        Self {
            server,
            endpoint: front.endpoint(),
            front,
        }
    }

    /// Connections functions opened to this server (TLS handshakes).
    pub fn tls_handshakes(&self) -> usize {
        self.front.handshakes()
    }

    /// Environment variables for a function using this server (over TLS).
    pub fn env(&self) -> Vec<(&str, &str)> {
        local_stack::local_aws::function_env(&[
            ("AWS_ENDPOINT_URL_DYNAMODB", &self.endpoint),
            (local_stack::tls_front::CA_FILE_VARIABLE, ca_file()),
        ])
    }
}

/// ElasticMQ with the template's queues (redrive policies included), every
/// visibility timeout shortened to `visibility_timeout_s` so that retries and
/// dead-lettering happen in seconds.
pub struct LocalQueues {
    /// The server (stopped on drop).
    pub server: local_stack::elasticmq::ElasticMq,
    /// A client for it.
    pub client: aws_sdk_sqs::Client,
    /// The queues, dead-letter queues first.
    pub queues: Vec<local_stack::elasticmq::LocalQueue>,
    /// HTTPS in front of the server, for functions (see [`LocalDynamoDb`]).
    _front: local_stack::tls_front::TlsFront,
    endpoint: String,
}

impl LocalQueues {
    /// Start ElasticMQ and create the queues of `template.yaml`.
    pub async fn start(visibility_timeout_s: u32) -> Self {
        Self::start_from(&template(), visibility_timeout_s).await
    }

    /// Start ElasticMQ and create the queues of `template` (e.g. with other
    /// parameter values).
    pub async fn start_from(template: &Template, visibility_timeout_s: u32) -> Self {
        let server = local_stack::elasticmq::ElasticMq::start(
            &scratch("elasticmq").with_extension("log"),
            Compiler::Quick,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let client = server.client();
        let queues =
            local_stack::elasticmq::create_queues(template, &client, Some(visibility_timeout_s))
                .await
                .unwrap_or_else(|e| panic!("{e}"));
        let front = tls_front(server.port());
        Self {
            endpoint: front.endpoint(),
            server,
            client,
            queues,
            _front: front,
        }
    }

    /// Environment variables for a function using this server (with
    /// [`start_from`], its queue references then name these queues).
    pub fn env(&self) -> Vec<(&str, &str)> {
        vec![
            ("AWS_ENDPOINT_URL_SQS", &self.endpoint),
            (local_stack::tls_front::CA_FILE_VARIABLE, ca_file()),
        ]
    }

    /// The queue with this logical id.
    pub fn queue(&self, logical_id: &str) -> &LocalQueue {
        self.queues
            .iter()
            .find(|q| q.spec.logical_id == logical_id)
            .unwrap_or_else(|| panic!("no queue {logical_id}"))
    }

    /// The queue `source` reads, its dead-letter queue and `maxReceiveCount`.
    pub fn with_dead_letters(&self, source: &SqsSource) -> (&LocalQueue, &LocalQueue, usize) {
        let queue = self.queue(&source.queue);
        let redrive = queue.spec.redrive.clone().expect("a redrive policy");
        let receives = usize::try_from(redrive.max_receive_count).expect("maxReceiveCount");
        (queue, self.queue(&redrive.dead_letter_queue), receives)
    }

    /// Send `bodies` to `queue`, a quarter of them on each of four connections.
    pub async fn send_all(&self, queue: &LocalQueue, bodies: &[String]) {
        let quarter = bodies.len().div_ceil(4).max(1);
        futures::future::try_join_all(
            bodies
                .chunks(quarter)
                .map(|part| send(&self.client, queue, part, "orders")),
        )
        .await
        .expect("send");
    }
}

/// Every item of `table`, by consistent, paginated scans.
pub async fn scan(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
) -> Vec<std::collections::HashMap<String, aws_sdk_dynamodb::types::AttributeValue>> {
    let mut pages = client
        .scan()
        .table_name(table)
        .consistent_read(true)
        .into_paginator()
        .items()
        .send();
    let mut items = Vec::new();
    while let Some(item) = pages.next().await {
        items.push(item.unwrap_or_else(|e| panic!("scan {table}: {e}")));
    }
    items
}

/// DynamoDB Local (its database in the folder `db_path`, else in memory) with
/// the template's tables, and ElasticMQ with the queues of `template`
/// (visibility timeout `visibility_timeout_s`), started side by side.
pub async fn servers(
    template: &Template,
    db_path: Option<PathBuf>,
    visibility_timeout_s: u32,
) -> (LocalDynamoDb, LocalQueues) {
    let dynamodb = tokio::spawn(async move {
        match db_path {
            Some(path) => LocalDynamoDb::start_persistent(&path, Compiler::Quick).await,
            None => LocalDynamoDb::start().await,
        }
    });
    let template = template.clone();
    let queues =
        tokio::spawn(async move { LocalQueues::start_from(&template, visibility_timeout_s).await });
    let (dynamodb, queues) = tokio::join!(dynamodb, queues);
    (
        dynamodb.expect("DynamoDB Local"),
        queues.expect("ElasticMQ"),
    )
}

/// The environment of a function using both servers.
pub fn servers_env<'a>(
    dynamodb: &'a LocalDynamoDb,
    queues: &'a LocalQueues,
) -> Vec<(&'a str, &'a str)> {
    let mut env = dynamodb.env();
    env.extend(queues.env());
    env
}

/// moto as Step Functions and S3, with the template's buckets and state
/// machines, their Lambda tasks sent to a local Lambda Invoke API; functions
/// reach its S3 over HTTPS (see [`LocalDynamoDb`]). Made in two steps, as the
/// functions' environment names the server before it can start: [`new`]
/// chooses its port and starts the TLS front ([`env`] is then complete),
/// [`start`] starts moto once the Invoke API is up.
///
/// [`new`]: LocalAnalytics::new
/// [`env`]: LocalAnalytics::env
/// [`start`]: LocalAnalytics::start
pub struct LocalAnalytics {
    port: u16,
    front: local_stack::tls_front::TlsFront,
    s3_endpoint: String,
    running: Option<RunningAnalytics>,
}

struct RunningAnalytics {
    server: local_stack::moto::Moto,
    client: local_stack::step_functions::Client,
    buckets: Vec<String>,
    state_machines: Vec<local_stack::step_functions::LocalStateMachine>,
}

impl LocalAnalytics {
    /// A free port for moto and HTTPS in front of it (nothing listens
    /// behind the front until [`LocalAnalytics::start`]).
    pub fn new() -> Self {
        let port = local_stack::process::free_port().unwrap_or_else(|e| panic!("free port: {e}"));
        let front = tls_front(port);
        Self {
            port,
            s3_endpoint: front.endpoint(),
            front,
            running: None,
        }
    }

    /// Start moto, its Lambda tasks calling the Invoke API at
    /// `lambda_endpoint`, and create the template's buckets and state machines.
    pub fn start(&mut self, lambda_endpoint: &str) {
        let server = local_stack::moto::Moto::start_on(
            self.port,
            lambda_endpoint,
            &scratch("moto").with_extension("log"),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let template = template();
        let buckets = local_stack::moto::create_buckets(&template, &server.endpoint())
            .unwrap_or_else(|e| panic!("{e}"));
        let client = local_stack::step_functions::Client::new(&server.endpoint());
        let state_machines = local_stack::step_functions::create_state_machines(&template, &client)
            .unwrap_or_else(|e| panic!("{e}"));
        self.running = Some(RunningAnalytics {
            server,
            client,
            buckets,
            state_machines,
        });
    }

    fn running(&self) -> &RunningAnalytics {
        self.running
            .as_ref()
            .unwrap_or_else(|| panic!("LocalAnalytics::start was not called"))
    }

    /// The S3 endpoint functions use (HTTPS).
    pub fn s3_endpoint(&self) -> &str {
        &self.s3_endpoint
    }

    /// Connections functions opened to S3 (TLS handshakes).
    pub fn tls_handshakes(&self) -> usize {
        self.front.handshakes()
    }

    /// Environment variables for a function using this S3 and Step
    /// Functions (over TLS).
    pub fn env(&self) -> Vec<(&str, &str)> {
        vec![
            ("AWS_ENDPOINT_URL_S3", &self.s3_endpoint),
            ("AWS_ENDPOINT_URL_SFN", &self.s3_endpoint),
            (local_stack::tls_front::CA_FILE_VARIABLE, ca_file()),
        ]
    }

    /// The server (plain HTTP on loopback, for the test's own requests).
    pub fn server(&self) -> &local_stack::moto::Moto {
        &self.running().server
    }

    /// A Step Functions client for the server.
    pub fn client(&self) -> &local_stack::step_functions::Client {
        &self.running().client
    }

    /// The buckets created.
    pub fn buckets(&self) -> &[String] {
        &self.running().buckets
    }

    /// The ARN of the template's state machine `logical_id`.
    pub fn state_machine_arn(&self, logical_id: &str) -> &str {
        self.running()
            .state_machines
            .iter()
            .find(|m| m.logical_id == logical_id)
            .map(|m| m.arn.as_str())
            .unwrap_or_else(|| panic!("no state machine {logical_id}"))
    }

    /// Run the template's state machine `logical_id` with `input` to its
    /// end (at most five minutes): how it ended.
    pub fn run(
        &self,
        logical_id: &str,
        input: &serde_json::Value,
    ) -> local_stack::step_functions::Execution {
        self.run_machine(self.state_machine_arn(logical_id), input)
    }

    /// Run the template's state machine `logical_id` with `input` to its end
    /// as the execution `name`.
    pub fn run_named(
        &self,
        logical_id: &str,
        input: &serde_json::Value,
        name: &str,
    ) -> local_stack::step_functions::Execution {
        self.run_as(self.state_machine_arn(logical_id), input, Some(name))
    }

    /// Run the state machine `arn` with `input` to its end (at most five minutes).
    pub fn run_machine(
        &self,
        arn: &str,
        input: &serde_json::Value,
    ) -> local_stack::step_functions::Execution {
        self.run_as(arn, input, None)
    }

    fn run_as(
        &self,
        arn: &str,
        input: &serde_json::Value,
        name: Option<&str>,
    ) -> local_stack::step_functions::Execution {
        let client = self.client();
        let execution = client
            .start_execution(arn, input, name)
            .unwrap_or_else(|e| panic!("{e}"));
        client
            .wait(&execution, std::time::Duration::from_secs(300))
            .unwrap_or_else(|e| panic!("{e}\n{}", self.server().logs()))
    }
}

impl Default for LocalAnalytics {
    fn default() -> Self {
        Self::new()
    }
}

//! The local stack the demonstration runs on, started from the template and
//! announced as each part comes up: DynamoDB Local, ElasticMQ, their HTTPS
//! fronts, Zipkin and the X-Ray daemon; the functions (see
//! [`super::functions`]) behind the Lambda Invoke API and their Function
//! URLs; moto as Step Functions and S3.

use super::functions::{start_function_urls, start_functions};
use super::{Options, relative};
use crate::async_invoke;
use crate::dynamodb_local::{self, DynamoDbLocal};
use crate::elasticmq::{self, ElasticMq, LocalQueue};
use crate::function_url::FunctionUrl;
use crate::jvm::Compiler;
use crate::lambda_api::{LambdaApi, Served};
use crate::moto::{self, Moto};
use crate::pool::Pool;
use crate::process;
use crate::step_functions::{self, LocalStateMachine};
use crate::template::Template;
use crate::tls_front::{Authority, CA_FILE_VARIABLE, TlsFront};
use crate::tools;
use crate::xray_daemon::Daemon;
use crate::zipkin::Zipkin;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The running local stack.
pub(super) struct Stack {
    pub dynamodb: DynamoDbLocal,
    pub elasticmq: ElasticMq,
    pub queues: Vec<LocalQueue>,
    /// Each function's pool, by binary, in the template's order.
    pub functions: Vec<(String, Arc<Pool>)>,
    pub lambda: LambdaApi,
    /// Each Function URL of the template, by binary.
    pub function_urls: Vec<(String, FunctionUrl)>,
    /// Step Functions and S3.
    pub moto: Moto,
    pub buckets: Vec<String>,
    pub state_machines: Vec<LocalStateMachine>,
    /// The template's tables, created in DynamoDB Local (named by logical id).
    pub tables: Vec<String>,
    /// HTTPS in front of DynamoDB Local, ElasticMQ and moto, for the functions.
    _fronts: [TlsFront; 3],
    /// The trace store and the daemon the functions send their spans to.
    zipkin: Zipkin,
    daemon: Daemon,
    pub logs: PathBuf,
}

impl Stack {
    pub fn function(&self, binary: &str) -> Result<&Pool, String> {
        self.functions
            .iter()
            .find(|(name, _)| name == binary)
            .map(|(_, pool)| pool.as_ref())
            .ok_or_else(|| format!("no function {binary} is running"))
    }

    pub fn state_machine(&self, logical_id: &str) -> Result<&LocalStateMachine, String> {
        self.state_machines
            .iter()
            .find(|m| m.logical_id == logical_id)
            .ok_or_else(|| format!("no state machine {logical_id} in template.yaml"))
    }

    pub fn queue(&self, logical_id: &str) -> Result<&LocalQueue, String> {
        self.queues
            .iter()
            .find(|q| q.spec.logical_id == logical_id)
            .ok_or_else(|| format!("no queue {logical_id}"))
    }

    /// The Function URL of the function `binary`, if it has one.
    pub fn function_url(&self, binary: &str) -> Option<&FunctionUrl> {
        self.function_urls
            .iter()
            .find(|(name, _)| name == binary)
            .map(|(_, url)| url)
    }

    /// Where Zipkin shows the trace of the last span the daemon received that
    /// `wanted` picks, once it has one (within 2 s).
    pub fn trace_of(&self, wanted: impl Fn(&Value) -> bool) -> Option<String> {
        let deadline = Instant::now() + Duration::from_secs(2);
        loop {
            let spans = self.daemon.spans();
            let found = spans.iter().rev().find(|span| wanted(span));
            if let Some(trace_id) = found.and_then(|span| span["traceId"].as_str()) {
                return Some(self.zipkin.trace_url(trace_id));
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Every function's output so far, one after the other.
    pub fn all_logs(&self) -> String {
        self.functions.iter().map(|(_, pool)| pool.logs()).collect()
    }
}

/// Start the local stack for `template`, announcing each part as it comes up.
pub(super) fn start(
    template: &Template,
    options: Options,
    build_dir: &Path,
    logs: &Path,
    runtime: &tokio::runtime::Runtime,
) -> Result<Stack, String> {
    std::fs::create_dir_all(logs).map_err(|e| format!("{}: {e}", logs.display()))?;
    let rie = tools::emulator()?;
    let servers = start_servers(template, options, logs, runtime)?;
    let functions = start_functions(template, options, build_dir, logs, &rie, &servers)?;
    let sqs = servers.elasticmq.client();
    let mut served = Vec::new();
    for (id, binary, pool) in &functions {
        served.push((
            Served {
                names: vec![id.clone(), binary.clone()],
                pool: Arc::clone(pool),
            },
            event_invoke(template, id, &sqs, &servers.queues)?,
        ));
    }
    let lambda = LambdaApi::start_with(served)?;
    println!(
        "  Lambda Invoke API  {}  (aws lambda invoke --endpoint-url ..., function names: logical id or binary)",
        lambda.endpoint()
    );
    let function_urls = start_function_urls(template, &functions)?;
    let (moto, buckets, state_machines) = start_moto(template, &servers, &lambda, logs)?;
    let functions = functions
        .into_iter()
        .map(|(_, binary, pool)| (binary, pool))
        .collect();
    let Servers {
        dynamodb,
        elasticmq,
        queues,
        tables,
        fronts,
        zipkin,
        daemon,
        ..
    } = servers;
    Ok(Stack {
        dynamodb,
        elasticmq,
        queues,
        functions,
        lambda,
        function_urls,
        moto,
        buckets,
        state_machines,
        tables,
        _fronts: fronts,
        zipkin,
        daemon,
        logs: logs.to_path_buf(),
    })
}

/// What Lambda does with the asynchronous events of the function
/// `logical_id`: its `EventInvokeConfig` retries and its `DeadLetterQueue`,
/// one of the local `queues` (retries wait [`async_invoke::LOCAL_RETRY_DELAY`]
/// multiples instead of minutes).
fn event_invoke(
    template: &Template,
    logical_id: &str,
    sqs: &aws_sdk_sqs::Client,
    queues: &[LocalQueue],
) -> Result<async_invoke::Config, String> {
    let function = template
        .functions()?
        .into_iter()
        .find(|f| f.logical_id == logical_id)
        .ok_or_else(|| format!("no function {logical_id} in the template"))?;
    let (retries, dead_letter_queue) = template.event_invoke(&function)?;
    let dead_letter = match dead_letter_queue {
        None => None,
        Some(queue) => Some(async_invoke::DeadLetter {
            sqs: sqs.clone(),
            queue_url: queues
                .iter()
                .find(|q| q.spec.logical_id == queue)
                .ok_or_else(|| format!("{logical_id}: no local queue {queue}"))?
                .url
                .clone(),
        }),
    };
    Ok(async_invoke::Config {
        retries,
        dead_letter,
        delay: async_invoke::LOCAL_RETRY_DELAY,
    })
}

/// The servers the functions call, up before them.
pub(super) struct Servers {
    dynamodb: DynamoDbLocal,
    elasticmq: ElasticMq,
    pub queues: Vec<LocalQueue>,
    /// The template's tables, created.
    tables: Vec<String>,
    /// HTTPS in front of DynamoDB Local, ElasticMQ and moto, in that order.
    pub fronts: [TlsFront; 3],
    /// Where moto is to listen: it starts after the functions.
    moto_port: u16,
    /// The certificate authority of the fronts, for the functions.
    pub ca_file: PathBuf,
    zipkin: Zipkin,
    pub daemon: Daemon,
}

/// DynamoDB Local and ElasticMQ with the template's tables and queues, and the
/// HTTPS fronts the functions reach them (and moto) through; announced.
fn start_servers(
    template: &Template,
    options: Options,
    logs: &Path,
    runtime: &tokio::runtime::Runtime,
) -> Result<Servers, String> {
    let zipkin = Zipkin::start(&logs.join("zipkin.log"), Compiler::Peak)?;
    let daemon = Daemon::start(Some(zipkin.endpoint()))?;
    let dynamodb = DynamoDbLocal::start(&logs.join("dynamodb-local.log"), Compiler::Peak)?;
    let elasticmq = ElasticMq::start(&logs.join("elasticmq.log"), Compiler::Peak)?;
    let tables = runtime.block_on(dynamodb_local::create_tables(template, &dynamodb.client()))?;
    let queues = runtime.block_on(elasticmq::create_queues(
        template,
        &elasticmq.client(),
        Some(options.visibility_timeout_s),
    ))?;
    // moto starts last (it needs the Lambda API, which needs the functions'
    // environment, which names moto's TLS front): its port is chosen now.
    let moto_port = process::free_port().map_err(|e| format!("a port for moto: {e}"))?;
    // Functions reach the servers over HTTPS, as on AWS (see `tls_front`).
    let ca_file = logs.join("certificate-authority.pem");
    let authority = Authority::new(&ca_file)?;
    let fronts = [
        TlsFront::start(&authority, dynamodb.port())?,
        TlsFront::start(&authority, elasticmq.port())?,
        TlsFront::start(&authority, moto_port)?,
    ];
    println!("Local stack, all on 127.0.0.1, stopped on exit or Ctrl-C:");
    println!(
        "  DynamoDB Local  {} (functions: {})  tables: {}",
        dynamodb.endpoint(),
        fronts[0].endpoint(),
        listed(&tables)
    );
    let names: Vec<String> = queues.iter().map(|q| q.spec.name()).collect();
    let names = listed(&names);
    println!(
        "  ElasticMQ       {} (functions: {})  queues: {} (visibility timeout {} s here; the template's in AWS)",
        elasticmq.endpoint(),
        fronts[1].endpoint(),
        names,
        options.visibility_timeout_s
    );
    println!(
        "  TLS: a certificate authority made for this run, given to the functions in {CA_FILE_VARIABLE}={}",
        relative(&ca_file)
    );
    println!(
        "  Zipkin (traces) {}/zipkin/  (the functions' X-Ray daemon: {})",
        zipkin.endpoint(),
        daemon.address()
    );
    Ok(Servers {
        dynamodb,
        elasticmq,
        queues,
        tables,
        fronts,
        moto_port,
        ca_file,
        zipkin,
        daemon,
    })
}

/// moto on the port `servers` chose, its Lambda tasks calling `lambda`, with
/// the template's buckets and state machines, announced.
fn start_moto(
    template: &Template,
    servers: &Servers,
    lambda: &LambdaApi,
    logs: &Path,
) -> Result<(Moto, Vec<String>, Vec<LocalStateMachine>), String> {
    let moto = Moto::start_on(
        servers.moto_port,
        &lambda.endpoint(),
        &logs.join("moto.log"),
    )?;
    let buckets = moto::create_buckets(template, &moto.endpoint())?;
    let state_machines = step_functions::create_state_machines(
        template,
        &step_functions::Client::new(&moto.endpoint()),
    )?;
    let machine_names: Vec<String> = state_machines
        .iter()
        .map(|m| m.logical_id.clone())
        .collect();
    println!(
        "  moto (Step Functions, S3)  {} (functions: {})  buckets: {}  state machines: {} (Lambda tasks call the Lambda Invoke API)",
        moto.endpoint(),
        servers.fronts[2].endpoint(),
        listed(&buckets),
        listed(&machine_names)
    );
    Ok((moto, buckets, state_machines))
}

/// `names` separated by commas, or `none`.
fn listed(names: &[String]) -> String {
    if names.is_empty() {
        "none".to_owned()
    } else {
        names.join(", ")
    }
}

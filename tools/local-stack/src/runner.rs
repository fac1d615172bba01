//! `cargo xtask run`: the whole application on this machine, without Docker.
//!
//! DynamoDB Local and ElasticMQ on free loopback ports, with the tables and
//! queues `template.yaml` declares; each function's `sam build` output under
//! the runtime interface emulator with the memory, timeout and environment the
//! template declares (only the AWS endpoints, and queue URLs, point at the
//! local servers); the
//! local event source mapping between the order queue and the order processor;
//! moto as Step Functions and S3, with the template's buckets and state
//! machines, whose Lambda tasks call the local Lambda Invoke API.
//! Then the demonstration: the sample orders go through the queue, every
//! other function of the template gets its sample events, each answer checked
//! against the expectation beside it (the Arrow worker's reports cover what
//! was stored), each schedule of the template fires once, and the report state
//! machine fans a report out over the worker. Everything started is stopped on return, error or Ctrl-C.

use crate::cgroup::{self, Limits};
use crate::dynamodb_local::{self, DynamoDbLocal};
use crate::elasticmq::{self, ElasticMq, LocalQueue};
use crate::event_source::{self, EventSource};
use crate::expectations::{self, Context};
use crate::function_url::FunctionUrl;
use crate::jvm::Compiler;
use crate::lambda_api::{LambdaApi, Served};
use crate::local_aws::function_env;
use crate::managed_instances::ManagedInstances;
use crate::moto::{self, Moto};
use crate::pool::{Pool, Size};
use crate::step_functions::{self, LocalStateMachine};
use crate::template::{Function, Redrive, SqsSource, Template};
use crate::tls_front::{Authority, CA_FILE_VARIABLE, TlsFront};
use crate::xray_daemon::Daemon;
use crate::zipkin::Zipkin;
use crate::{async_invoke, events, process, schedule, tools};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What `cargo xtask run` was asked for.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// Leave everything running (and the queue polled) until Ctrl-C.
    pub keep: bool,
    /// Visibility timeout of every local queue, in seconds: short, so that a
    /// failed message comes back, and reaches the dead-letter queue, within
    /// the demonstration instead of after the template's minutes.
    pub visibility_timeout_s: u32,
    /// Most environments (emulator processes) per function without reserved
    /// concurrency (see [`crate::pool`]).
    pub concurrency: usize,
    /// Whether functions run under Lambda's CPU share and memory limit.
    pub limits: Limits,
}

/// Default [`Options::visibility_timeout_s`]: above a cold debug build's
/// first batch under the order processor's CPU share (about 1.3 s here:
/// init and invocation), so that no batch outlives its messages' visibility.
pub const DEFAULT_VISIBILITY_TIMEOUT_S: u32 = 5;

/// What the demonstration saw.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    /// Order messages sent to the queue.
    pub orders_sent: usize,
    /// Orders in the orders table afterwards.
    pub orders_stored: u64,
    /// Messages in the dead-letter queue afterwards.
    pub dead_lettered: u64,
    /// Sample events, schedules and the fan-out report that did not end as expected.
    pub failures: Vec<String>,
}

/// The running local stack.
struct Stack {
    dynamodb: DynamoDbLocal,
    elasticmq: ElasticMq,
    queues: Vec<LocalQueue>,
    functions: Vec<(String, Arc<Pool>)>,
    lambda: LambdaApi,
    /// Each Function URL of the template, by binary.
    function_urls: Vec<(String, FunctionUrl)>,
    /// Step Functions and S3.
    moto: Moto,
    buckets: Vec<String>,
    state_machines: Vec<LocalStateMachine>,
    /// HTTPS in front of DynamoDB Local, ElasticMQ and moto, for the functions.
    _fronts: [TlsFront; 3],
    /// The trace store and the daemon the functions send their spans to.
    zipkin: Zipkin,
    daemon: Daemon,
    logs: PathBuf,
}

impl Stack {
    fn function(&self, binary: &str) -> Result<&Pool, String> {
        self.functions
            .iter()
            .find(|(name, _)| name == binary)
            .map(|(_, pool)| pool.as_ref())
            .ok_or_else(|| format!("no function {binary} is running"))
    }

    fn state_machine(&self, logical_id: &str) -> Result<&LocalStateMachine, String> {
        self.state_machines
            .iter()
            .find(|m| m.logical_id == logical_id)
            .ok_or_else(|| format!("no state machine {logical_id}"))
    }

    fn queue(&self, logical_id: &str) -> Result<&LocalQueue, String> {
        self.queues
            .iter()
            .find(|q| q.spec.logical_id == logical_id)
            .ok_or_else(|| format!("no queue {logical_id}"))
    }
}

/// Run the application from the function binaries in `build_dir`
/// (`<LogicalId>/bootstrap`, the layout of `sam build`), every server's and
/// function's output in `logs`, with the template's parameter defaults.
pub fn run(options: Options, build_dir: &Path, logs: &Path) -> Result<Summary, String> {
    run_with(options, &[], build_dir, logs)
}

/// [`run`] with `parameters` instead of the template's defaults (`sam deploy
/// --parameter-overrides`; e.g. [`crate::managed_instances::LOCAL_PARAMETERS`]
/// puts every function on Lambda Managed Instances), checked as
/// CloudFormation checks them, `Rules` included.
pub fn run_with(
    options: Options,
    parameters: &[(&str, &str)],
    build_dir: &Path,
    logs: &Path,
) -> Result<Summary, String> {
    process::stop_all_on_interrupt()?;
    let root = crate::workspace_root();
    let template = Template::load(&root.join("template.yaml"))?.with_parameters(parameters)?;
    template.check_rules()?;
    if !parameters.is_empty() {
        let given: Vec<String> = parameters.iter().map(|(k, v)| format!("{k}={v}")).collect();
        println!("Parameters: {}", given.join(" "));
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let stack = start(&template, options, build_dir, logs, &runtime)?;
    let mut summary = Summary::default();
    let source = template
        .sqs_sources()?
        .into_iter()
        .next()
        .ok_or("template.yaml has no SQS event")?;
    orders(&stack, &source, options, &runtime, &mut summary)?;
    // Every other function, in the template's order, with its samples.
    let others: Vec<Function> = template
        .functions()?
        .into_iter()
        .filter(|f| f.binary != source.function)
        .collect();
    let stored = usize::try_from(summary.orders_stored).unwrap_or(usize::MAX);
    let mut step = 1;
    for function in &others {
        step += 1;
        invoke_samples(&stack, function, step, stored, &mut summary.failures)?;
    }
    fire_schedules(&stack, &template, &runtime, step + 1, &mut summary.failures)?;
    fan_out_report(&stack, step + 2, &mut summary.failures)?;

    println!("\nCold starts (init duration under the emulator, one per environment):");
    for (name, pool) in &stack.functions {
        let starts: Vec<String> = pool
            .cold_starts()
            .iter()
            .map(|ms| ms.map_or_else(|| "not reported".to_owned(), |ms| format!("{ms:.1} ms")))
            .collect();
        println!("  {name}: {}", starts.join(", "));
    }
    println!("Logs: {}", relative(&stack.logs));
    if options.keep {
        keep_running(&stack, &source, &others, &runtime)?;
    }
    if summary.failures.is_empty() {
        println!("\nAll sample events answered as expected; stopping everything.");
    }
    Ok(summary)
}

/// Start the local stack for `template`, announcing each part as it comes up.
fn start(
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
struct Servers {
    dynamodb: DynamoDbLocal,
    elasticmq: ElasticMq,
    queues: Vec<LocalQueue>,
    /// HTTPS in front of DynamoDB Local, ElasticMQ and moto, in that order.
    fronts: [TlsFront; 3],
    /// Where moto is to listen: it starts after the functions.
    moto_port: u16,
    /// The certificate authority of the fronts, for the functions.
    ca_file: PathBuf,
    zipkin: Zipkin,
    daemon: Daemon,
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
        tables.join(", ")
    );
    let names: Vec<String> = queues.iter().map(|q| q.spec.name()).collect();
    println!(
        "  ElasticMQ       {} (functions: {})  queues: {} (visibility timeout {} s here; the template's in AWS)",
        elasticmq.endpoint(),
        fronts[1].endpoint(),
        names.join(", "),
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
        fronts,
        moto_port,
        ca_file,
        zipkin,
        daemon,
    })
}

/// A pool of emulators for each function of the template, its AWS endpoints
/// and queue URLs those of `servers`, announced: (logical id, binary, pool).
fn start_functions(
    template: &Template,
    options: Options,
    build_dir: &Path,
    logs: &Path,
    rie: &Path,
    servers: &Servers,
) -> Result<Vec<(String, String, Arc<Pool>)>, String> {
    let (dynamodb_url, sqs_url, s3_url) = (
        servers.fronts[0].endpoint(),
        servers.fronts[1].endpoint(),
        servers.fronts[2].endpoint(),
    );
    let ca_path = servers.ca_file.to_string_lossy().into_owned();
    let daemon = servers.daemon.address().to_string();
    let env = function_env(&[
        ("AWS_XRAY_DAEMON_ADDRESS", daemon.as_str()),
        ("AWS_ENDPOINT_URL_DYNAMODB", dynamodb_url.as_str()),
        ("AWS_ENDPOINT_URL_SQS", sqs_url.as_str()),
        ("AWS_ENDPOINT_URL_S3", s3_url.as_str()),
        // moto serves Step Functions on the same port as S3.
        ("AWS_ENDPOINT_URL_SFN", s3_url.as_str()),
        (CA_FILE_VARIABLE, ca_path.as_str()),
    ]);
    let specs: Vec<_> = servers.queues.iter().map(|q| q.spec.clone()).collect();
    let limited = announce_limits(options.limits).is_ok();
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let mut functions = Vec::new();
    for (mut function, managed) in template.functions_with_capacity()? {
        function.env = elasticmq::with_queue_urls(&function.env, &specs, &sqs_url);
        let bootstrap = build_dir.join(&function.logical_id).join("bootstrap");
        let log = logs.join(format!("{}.log", function.binary));
        let pool = match managed {
            None => Pool::of_emulators(
                rie,
                &bootstrap,
                &function,
                &env,
                &log,
                Size::of(&function, options.concurrency),
                options.limits,
            ),
            Some(managed) => {
                let pool = Pool::of_managed_instances(
                    rie,
                    &bootstrap,
                    &function,
                    managed,
                    &env,
                    &log,
                    options.limits,
                );
                // Started now, as Lambda starts them when it publishes the
                // version: no cold start on an invocation's path.
                pool.provision()
                    .map_err(|e| format!("{}: {e}", function.logical_id))?;
                pool
            }
        };
        println!(
            "    {}",
            describe_function(&function, managed, pool.size(), limited, cores)
        );
        functions.push((function.logical_id, function.binary, Arc::new(pool)));
    }
    Ok(functions)
}

/// A Function URL for each function of `template` that has one (`FunctionUrlConfig`),
/// served by its pool, announced: (binary, URL).
fn start_function_urls(
    template: &Template,
    functions: &[(String, String, Arc<Pool>)],
) -> Result<Vec<(String, FunctionUrl)>, String> {
    let mut urls = Vec::new();
    for function in template.functions()? {
        let Some(config) = template.function_url(&function)? else {
            continue;
        };
        let Some((_, _, pool)) = functions.iter().find(|(id, ..)| *id == function.logical_id)
        else {
            continue;
        };
        let url = FunctionUrl::start(&function, &config, Arc::clone(pool))?;
        let auth = match config.auth_type {
            crate::template::AuthType::AwsIam => format!(
                "AWS_IAM: sign with SigV4, service lambda, region {}, access key {} and secret {}",
                crate::local_aws::REGION,
                crate::function_url::ACCESS_KEY_ID,
                crate::function_url::SECRET_ACCESS_KEY
            ),
            crate::template::AuthType::None => "NONE: anyone on this machine".to_owned(),
        };
        println!(
            "  Function URL       {}  ({}, {auth})",
            url.url(),
            function.logical_id
        );
        urls.push((function.binary, url));
    }
    Ok(urls)
}

/// Whether functions run under Lambda's CPU share and memory limit (`Err`:
/// why not), announced.
fn announce_limits(limits: Limits) -> Result<(), String> {
    let limits = match limits {
        Limits::Off => Err("turned off (--no-limits)".to_owned()),
        Limits::Enforced => cgroup::enforced_with(Limits::Enforced),
    };
    println!(
        "  Functions under the runtime interface emulator, on demand one process per invocation in flight, on Managed Instances one process serving several{}:",
        match &limits {
            Ok(()) => ", each in a cgroup with Lambda's CPU share and memory limit",
            Err(_) => "",
        }
    );
    if let Err(why) = &limits {
        println!("  CPU and memory limits are not enforced: {why}");
    }
    limits
}

/// One line about a function of `size` environments, on Lambda Managed
/// Instances (`managed`) or on demand: its memory, timeout, mode, limits (if
/// `limited`, on a machine of `cores` cores) and concurrency.
fn describe_function(
    function: &Function,
    managed: Option<ManagedInstances>,
    size: Size,
    limited: bool,
    cores: usize,
) -> String {
    let mode = match managed {
        None => "on-demand".to_owned(),
        Some(managed) => format!(
            "managed instances: {managed}, {} vCPUs",
            managed.vcpus(function.memory_mb)
        ),
    };
    let enforced = if limited {
        let quota = cgroup::function_quota(function.memory_mb, managed, cores);
        format!(
            "CPU {:.3} vCPU{}, memory limit {} MB",
            quota.quota_us as f64 / cgroup::PERIOD_US as f64,
            if quota.capped {
                format!(" (capped at this machine's {cores} cores)")
            } else {
                String::new()
            },
            function.memory_mb
        )
    } else {
        "no CPU or memory limit".to_owned()
    };
    let concurrency = match managed {
        Some(managed) => format!(
            "one environment, {} invocations at once, then invocations wait",
            managed.max_concurrency
        ),
        None => format!(
            "up to {} environment(s){}",
            size.environments,
            match size.overflow {
                crate::pool::Overflow::Wait => ", then invocations wait",
                crate::pool::Overflow::Throttle => ", then throttled (reserved concurrency)",
            }
        ),
    };
    format!(
        "{} ({} MB, {} s), {mode}: {enforced}; {concurrency}",
        function.logical_id, function.memory_mb, function.timeout_s,
    )
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
    let machine_names: Vec<&str> = state_machines
        .iter()
        .map(|m| m.logical_id.as_str())
        .collect();
    println!(
        "  moto (Step Functions, S3)  {} (functions: {})  buckets: {}  state machines: {} (Lambda tasks call the Lambda Invoke API)",
        moto.endpoint(),
        servers.fronts[2].endpoint(),
        buckets.join(", "),
        machine_names.join(", ")
    );
    Ok((moto, buckets, state_machines))
}

/// Every order body of `events/order-processor/` through the queue and the
/// local event source mapping; where each ended up.
fn orders(
    stack: &Stack,
    source: &SqsSource,
    options: Options,
    runtime: &tokio::runtime::Runtime,
    summary: &mut Summary,
) -> Result<(), String> {
    let bodies = order_bodies(&source.function)?;
    let queue = stack.queue(&source.queue)?;
    let sqs = stack.elasticmq.client();
    println!(
        "\n1. Orders: {} message bodies from events/{}/ sent to {}",
        bodies.len(),
        source.function,
        queue.spec.name()
    );
    runtime.block_on(elasticmq::send(&sqs, queue, &bodies, "orders"))?;
    summary.orders_sent = bodies.len();
    let pool = stack.function(&source.function)?;
    let redrive = queue.spec.redrive.clone();
    let receives = redrive.as_ref().map_or(1, |r| r.max_receive_count);
    // Every failing message is received maxReceiveCount times, one
    // visibility timeout apart.
    let bound = Duration::from_secs(
        60 + u64::from(receives + 1) * u64::from(options.visibility_timeout_s + 1),
    );
    let pollers = event_source::pollers(source, pool.capacity());
    let endpoint = stack.elasticmq.endpoint();
    let totals = event_source::drain_concurrently(
        &endpoint,
        queue,
        source,
        pollers,
        Instant::now() + bound,
        &|event| pool.invoke(event),
    )?;
    println!(
        "   local event source mapping (batch size {}, window {} s, {pollers} pollers): {} invocations, {} deliveries, {} deleted, {} left for retry",
        source.batch_size,
        source.batching_window_s,
        totals.invocations,
        totals.delivered,
        totals.deleted,
        totals.returned
    );
    if let Some(url) = order_trace(stack, &bodies) {
        println!("   the trace of the first order: {url}");
    }
    check_stored_orders(stack, source, runtime, summary)?;
    if let Some(redrive) = redrive {
        report_dead_letters(stack, &redrive, &sqs, pool, runtime, summary)?;
    }
    if totals.whole_batch_failures > 0 {
        summary.failures.push(format!(
            "{} order batches failed as a whole",
            totals.whole_batch_failures
        ));
    }
    Ok(())
}

/// Where Zipkin shows the trace that stored the first of `bodies` (the
/// invocation whose record span names its order id).
fn order_trace(stack: &Stack, bodies: &[String]) -> Option<String> {
    let first: Value = serde_json::from_str(bodies.first()?).ok()?;
    let order_id = first.get("order_id")?.as_str()?.to_owned();
    trace_of(stack, |span| {
        span["name"] == "record" && span["tags"]["order_id"].as_str() == Some(&order_id)
    })
}

/// Where Zipkin shows the trace of the last span the daemon received that
/// `wanted` picks, once it has one (within 2 s).
fn trace_of(stack: &Stack, wanted: impl Fn(&Value) -> bool) -> Option<String> {
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let spans = stack.daemon.spans();
        let found = spans.iter().rev().find(|span| wanted(span));
        if let Some(trace_id) = found.and_then(|span| span["traceId"].as_str()) {
            return Some(stack.zipkin.trace_url(trace_id));
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The message bodies of the records of `function`'s sample events.
fn order_bodies(function: &str) -> Result<Vec<String>, String> {
    let mut bodies = Vec::new();
    for sample in events::samples(function)? {
        let records = sample.event["Records"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        bodies.extend(
            records
                .iter()
                .filter_map(|r| r["body"].as_str().map(str::to_owned)),
        );
    }
    Ok(bodies)
}

/// The orders in `OrdersTable`, announced, into `summary`; a failure if they
/// are not as many as the expectations of `source`'s function's events say.
fn check_stored_orders(
    stack: &Stack,
    source: &SqsSource,
    runtime: &tokio::runtime::Runtime,
    summary: &mut Summary,
) -> Result<(), String> {
    let stored = runtime.block_on(count_items(&stack.dynamodb.client(), "OrdersTable"))?;
    println!("   OrdersTable holds {stored} orders");
    summary.orders_stored = stored;
    // The function reaches its dead-letter queue here: every record not
    // invalid is stored, whatever its FIFO group.
    let expected = events::stored_orders_through_queue(&source.function)?;
    if usize::try_from(stored).ok() != Some(expected.len()) {
        summary.failures.push(format!(
            "OrdersTable holds {stored} orders, the expectations of events/{}/ {}",
            source.function,
            expected.len()
        ));
    }
    Ok(())
}

/// The messages in the dead-letter queue of `redrive`, into `summary`, and
/// why they are there, from the log of the order processor's `pool`.
fn report_dead_letters(
    stack: &Stack,
    redrive: &Redrive,
    sqs: &aws_sdk_sqs::Client,
    pool: &Pool,
    runtime: &tokio::runtime::Runtime,
    summary: &mut Summary,
) -> Result<(), String> {
    let dlq = stack.queue(&redrive.dead_letter_queue)?;
    let dead = runtime.block_on(elasticmq::depth(sqs, &dlq.url))?;
    summary.dead_lettered = dead;
    println!(
        "   {} holds {dead} messages (moved by the function, each with its reason in \
         message attributes, or by SQS after {} failed deliveries); why, from the function's log:",
        dlq.spec.name(),
        redrive.max_receive_count
    );
    for (class, reason) in failure_reasons(&pool.logs()) {
        println!("     {class}: {reason}");
    }
    Ok(())
}

/// The distinct (class, reason) pairs of the order processor's
/// `record dead-lettered` and `record failed` log lines (they never carry the
/// body).
fn failure_reasons(logs: &str) -> Vec<(String, String)> {
    let mut reasons: Vec<(String, String)> = logs
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|line| {
            line["message"] == "record dead-lettered" || line["message"] == "record failed"
        })
        .map(|line| {
            let field = |key: &str| line[key].as_str().unwrap_or("?").to_owned();
            (field("class"), field("reason"))
        })
        .collect();
    reasons.sort();
    reasons.dedup();
    reasons
}

/// Invoke `function` with each of its sample events (step `step` of the
/// demonstration), print what came back and check it against the sample's
/// expectation, `stored_orders` orders being stored.
fn invoke_samples(
    stack: &Stack,
    function: &Function,
    step: usize,
    stored_orders: usize,
    failures: &mut Vec<String>,
) -> Result<(), String> {
    let pool = stack.function(&function.binary)?;
    println!(
        "\n{step}. {}: events/{}/",
        function.logical_id, function.binary
    );
    let url = stack
        .function_urls
        .iter()
        .find(|(binary, _)| *binary == function.binary)
        .map(|(_, url)| url);
    for sample in events::samples(&function.binary)? {
        let file = sample.file_name();
        // A Function URL event goes through the URL itself, signed as a
        // caller signs: its HTTP answer is what the function's answer became.
        let through_url = url.zip(
            sample.event["rawPath"]
                .as_str()
                .and(sample.event["body"].as_str()),
        );
        let body = match through_url {
            Some((url, request)) => {
                let (status, text) = url.post(request)?;
                serde_json::json!({"statusCode": status, "body": text})
            }
            None => pool.invoke(&sample.text)?.json().unwrap_or(Value::Null),
        };
        let output = pool.logs();
        let context = Context {
            stored_orders,
            dead_letter_queue: true,
            output: &output,
        };
        let checked = expectations::check(&sample.expect, &sample.event, &body, &context);
        // A Function URL answer wraps the JSON in an HTTP response.
        let inner = expectations::answer_json(&sample.expect, &body).unwrap_or(body);
        let summary = match inner.get("errorType") {
            Some(kind) => format!("ERROR {kind}: {}", inner["errorMessage"]),
            None => summarize(&inner),
        };
        println!("   {file}: {summary}");
        if let Err(e) = checked {
            println!("   {file}: NOT AS EXPECTED: {e}");
            failures.push(format!("{} {file}: {e}", function.binary));
        }
    }
    Ok(())
}

/// Fire each `ScheduleV2` event of the template once, now, as EventBridge
/// Scheduler would at its time (see [`crate::schedule`]; retries wait
/// [`schedule::LOCAL_RETRY_DELAY`] multiples instead of minutes).
fn fire_schedules(
    stack: &Stack,
    template: &Template,
    runtime: &tokio::runtime::Runtime,
    step: usize,
    failures: &mut Vec<String>,
) -> Result<(), String> {
    println!("\n{step}. Schedules, fired once now (asynchronous invocations, Lambda's retries):");
    let sqs = stack.elasticmq.client();
    for schedule in template.schedules()? {
        let pool = stack.function(&schedule.function)?;
        let firing = runtime.block_on(schedule::fire(
            &schedule,
            time::OffsetDateTime::now_utc(),
            &|payload| pool.invoke(payload),
            &sqs,
            &stack.queues,
            schedule::LOCAL_RETRY_DELAY,
        ))?;
        println!(
            "   {} {} {} -> {} {}: {firing}",
            schedule.name,
            schedule.expression,
            schedule.timezone,
            schedule.function,
            firing.payload
        );
        if firing.outcome != schedule::Outcome::Succeeded {
            failures.push(format!("schedule {}: {firing}", schedule.name));
        }
    }
    Ok(())
}

/// The input of the demonstration's fan-out report.
fn report_input() -> Value {
    serde_json::json!({"query": {"group_by": "customer"}, "total_segments": 4})
}

/// One execution of `OrdersReportStateMachine`: the worker fanned out over
/// four scan segments, then the merge; its status and a summary of its output.
fn fan_out_report(stack: &Stack, step: usize, failures: &mut Vec<String>) -> Result<(), String> {
    const MACHINE: &str = "OrdersReportStateMachine";
    let machine = stack.state_machine(MACHINE)?;
    let input = report_input();
    println!("\n{step}. State machine {MACHINE} (Step Functions on moto), input {input}:");
    let client = step_functions::Client::new(&stack.moto.endpoint());
    let started = Instant::now();
    let execution_arn = client.start_execution(&machine.arn, &input, None)?;
    let execution = client.wait(&execution_arn, Duration::from_secs(300))?;
    let seconds = started.elapsed().as_secs_f64();
    let line = match (&execution.output, &execution.error) {
        (Some(output), None) if execution.succeeded() => summarize(output),
        _ => format!(
            "{}: {}",
            execution.error.as_deref().unwrap_or("no error name"),
            execution
                .cause
                .as_deref()
                .unwrap_or("no cause")
                .chars()
                .take(300)
                .collect::<String>()
        ),
    };
    println!("   {} in {seconds:.1} s: {line}", execution.status);
    if let Some(url) = trace_of(stack, |span| span["name"] == "merge") {
        println!("   the run's trace: {url}");
    }
    if !execution.succeeded() {
        failures.push(format!("{MACHINE}: {} {line}", execution.status));
    }
    Ok(())
}

/// One line about an answer: its hashes, verdicts, rows, groups, report,
/// workers and duration, whichever it has; else its first 200 characters.
fn summarize(answer: &Value) -> String {
    let mut parts = Vec::new();
    if let Some(hashes) = answer["hashes"].as_array() {
        parts.push(format!("bcrypt hashes: {}", hashes.len()));
    }
    if let Some(results) = answer["results"].as_array() {
        let verdicts: Vec<String> = results.iter().map(verdict).collect();
        parts.push(format!("verified: {}", verdicts.join(", ")));
    }
    if let Some(rows) = answer.get("rows") {
        parts.extend(describe_rows(rows));
    }
    if let Some(groups) = answer["groups"].as_array() {
        parts.push(format!("groups: {}", describe_groups(groups)));
    }
    if let Some(id) = answer["report_id"].as_str() {
        parts.push(format!("stored as {id}"));
    }
    if let Some(workers) = answer.get("workers") {
        parts.push(format!("{workers} workers"));
    }
    let duration = answer
        .get("duration_ms")
        .or_else(|| answer.get("run").and_then(|r| r.get("duration_ms")));
    if let Some(ms) = duration.and_then(Value::as_f64) {
        parts.push(format!("{ms:.1} ms"));
    }
    if parts.is_empty() {
        answer.to_string().chars().take(200).collect()
    } else {
        parts.join(", ")
    }
}

/// One result of a verification: `valid`, `invalid` or its error; else as it is.
fn verdict(result: &Value) -> String {
    match (&result["valid"], &result["error"]) {
        (Value::Bool(true), _) => "valid".to_owned(),
        (Value::Bool(false), _) => "invalid".to_owned(),
        (_, Value::String(e)) => format!("error ({e})"),
        _ => result.to_string(),
    }
}

/// The parts about a query's `rows`: how many matched, and the malformed
/// items skipped, if any.
fn describe_rows(rows: &Value) -> Vec<String> {
    let mut parts = vec![format!(
        "{} of {} orders matched",
        rows["matched"], rows["scanned"]
    )];
    let skipped: u64 = rows["skipped"]
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(_, n)| n.as_u64())
        .sum();
    if skipped > 0 {
        parts.push(format!(
            "{skipped} malformed items skipped ({})",
            rows["skipped"]
        ));
    }
    parts
}

/// The first four `groups` of a report (key, count, totals per currency),
/// and how many more there are.
fn describe_groups(groups: &[Value]) -> String {
    let shown: Vec<String> = groups
        .iter()
        .take(4)
        .map(|g| {
            let money: Vec<String> = g["money"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|m| {
                    let currency = m["currency"].as_str().unwrap_or("?");
                    format!("{} {currency} cents", m["total_cents"]["sum"])
                })
                .collect();
            format!(
                "{} {}x {}",
                g["key"].as_str().unwrap_or("?"),
                g["count"],
                money.join(", ")
            )
        })
        .collect();
    let more = groups.len().saturating_sub(shown.len());
    let tail = if more > 0 {
        format!(" and {more} more")
    } else {
        String::new()
    };
    format!("{}{tail}", shown.join("; "))
}

/// Keep everything up, the queue polled, until Ctrl-C; `others` are the
/// functions invoked directly.
fn keep_running(
    stack: &Stack,
    source: &SqsSource,
    others: &[Function],
    runtime: &tokio::runtime::Runtime,
) -> Result<(), String> {
    let queue = stack.queue(&source.queue)?;
    let sqs = stack.elasticmq.client();
    let pool = stack.function(&source.function)?;
    println!("\nEverything keeps running; the order queue is polled. Try:");
    for function in others {
        if let Some(sample) = events::samples(&function.binary)?.first() {
            println!(
                "  curl -s -d @{} {}",
                relative(&sample.path),
                stack.lambda.invoke_url(&function.binary)
            );
        }
    }
    for (binary, url) in &stack.function_urls {
        // The body of the function's Function URL sample, if it has one.
        let body = events::samples(binary)?
            .iter()
            .filter_map(|sample| std::fs::read_to_string(&sample.path).ok())
            .filter_map(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
            .find_map(|event| event["body"].as_str().map(str::to_owned));
        if let Some(body) = body {
            println!("  {}", url.curl_command(&body));
        }
    }
    println!(
        "  aws --endpoint-url {} sqs send-message --queue-url {} --message-body file://order.json",
        stack.elasticmq.endpoint(),
        queue.url
    );
    println!(
        "  aws --endpoint-url {} dynamodb scan --table-name OrdersTable",
        stack.dynamodb.endpoint()
    );
    let moto = stack.moto.endpoint();
    let input = report_input().to_string();
    for machine in &stack.state_machines {
        println!(
            "  aws --endpoint-url {moto} stepfunctions start-execution --state-machine-arn {} --input '{input}'",
            machine.arn
        );
        let request = serde_json::json!({"stateMachineArn": machine.arn, "input": input});
        println!(
            "  curl -s --aws-sigv4 aws:amz:{}:states --user local:local -H 'X-Amz-Target: AWSStepFunctions.StartExecution' -H 'Content-Type: application/x-amz-json-1.0' -d '{request}' {moto}",
            crate::local_aws::REGION
        );
    }
    println!(
        "  aws --endpoint-url {moto} stepfunctions describe-execution --execution-arn ARN  (the executionArn started above)"
    );
    for bucket in &stack.buckets {
        println!("  aws --endpoint-url {moto} s3 ls s3://{bucket} --recursive");
    }
    println!("(any access key works locally) Press Ctrl-C to stop everything.");
    let mapping = EventSource::new(&sqs, queue, source);
    loop {
        let delivery = runtime
            .block_on(mapping.poll_once(Duration::from_secs(5), &|event| pool.invoke(event)))?;
        if delivery.received > 0 {
            println!(
                "  {}: {} received, {} deleted, {} left for retry",
                queue.spec.name(),
                delivery.received,
                delivery.deleted,
                delivery.returned
            );
        }
    }
}

/// Items in a local table.
async fn count_items(client: &aws_sdk_dynamodb::Client, table: &str) -> Result<u64, String> {
    let mut total = 0;
    let mut pages = client
        .scan()
        .table_name(table)
        .select(aws_sdk_dynamodb::types::Select::Count)
        .into_paginator()
        .send();
    while let Some(page) = pages.next().await {
        let count = page
            .map_err(|e| format!("scan {table}: {}", elasticmq::error_text(&e)))?
            .count();
        total += u64::try_from(count).unwrap_or(0);
    }
    Ok(total)
}

fn relative(path: &Path) -> String {
    let root = crate::workspace_root();
    path.strip_prefix(&root)
        .unwrap_or(path)
        .display()
        .to_string()
}

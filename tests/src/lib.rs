//! Harness for the end-to-end suite: builds the real function binaries and runs
//! them under the Lambda runtime interface emulator, configured from
//! `template.yaml`, on free loopback ports. Everything started is stopped on
//! drop, also when a test fails.

use local_stack::elasticmq::{LocalQueue, depth, send, take_all, with_queue_urls};
use local_stack::emulator::Emulator;
pub use local_stack::emulator::init_duration_ms;
use local_stack::jvm::Compiler;
use local_stack::local_aws::NO_SERVER;
use local_stack::template::{Function, SqsSource, Template};
pub use local_stack::workspace_root;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};

pub mod throttling_proxy;

/// `template.yaml`, read.
pub fn template() -> Template {
    Template::load(&workspace_root().join("template.yaml")).unwrap_or_else(|e| panic!("{e}"))
}

/// The binaries of the template's functions, in the template's order.
pub fn functions() -> Vec<String> {
    template()
        .functions()
        .unwrap_or_else(|e| panic!("{e}"))
        .into_iter()
        .map(|f| f.binary)
        .collect()
}

/// The variable naming a `sam build` folder whose bootstraps [`binary`] uses.
pub const BOOTSTRAPS: &str = "E2E_BOOTSTRAPS";

/// The debug build of function `name` (the suite tests behaviour, not speed).
///
/// Built once per test process by `cargo test --workspace --no-run`: the very
/// command of the suite, so the binaries come with the same features as every
/// other test target and nothing is compiled twice (a `cargo build -p NAME`
/// would resolve features for NAME alone and rebuild much of the dependency
/// tree). Cheap when everything is up to date; after `cargo test -p e2e` alone,
/// the first call compiles the rest of the workspace's tests once.
///
/// With `E2E_BOOTSTRAPS` set to a `sam build` folder, a function of the
/// template is that build's `bootstrap` instead (the suite runs the sam-built
/// functions of a scratch copy this way).
pub fn binary(name: &str) -> PathBuf {
    static BUILT: OnceLock<()> = OnceLock::new();
    if let Some(built) = std::env::var_os(BOOTSTRAPS)
        && let Ok(function) = template().function(name)
    {
        let path = PathBuf::from(built)
            .join(&function.logical_id)
            .join("bootstrap");
        assert!(path.is_file(), "no bootstrap {}", path.display());
        return path;
    }
    let root = workspace_root();
    BUILT.get_or_init(|| {
        let mut build = std::process::Command::new(env!("CARGO"));
        local_stack::without_cargo_run_variables(&mut build);
        let status = build
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

/// The function declared in `template.yaml` with this binary. Its queue
/// references (`!Ref` of a queue) are URLs of queues where nothing listens.
pub fn function(name: &str) -> Function {
    declared(&template(), name, NO_SERVER)
}

/// The function declared in `template` with this binary, its queue
/// references the URLs of those queues on the ElasticMQ at `sqs`.
fn declared(template: &Template, name: &str, sqs: &str) -> Function {
    let mut function = template.function(name).unwrap_or_else(|e| panic!("{e}"));
    let queues = template.queues().unwrap_or_else(|e| panic!("{e}"));
    function.env = with_queue_urls(&function.env, &queues, sqs);
    function
}

/// Start `name` under the emulator, as the template declares it, with `env` on top.
pub fn start(name: &str, env: &[(&str, &str)]) -> Emulator {
    start_from(&template(), name, env)
}

/// Start `name` under the emulator, as `template` declares it, with `env` on
/// top. Its queue references name the queues of the ElasticMQ at `env`'s
/// `AWS_ENDPOINT_URL_SQS` (see [`LocalQueues::env`]); without one, queues
/// where nothing listens, so that a send fails at once.
pub fn start_from(template: &Template, name: &str, env: &[(&str, &str)]) -> Emulator {
    start_as(template, name, &binary(name), env)
}

/// Start `bootstrap` under the emulator as if it were the function `name`
/// of `template` (its memory, timeout and environment, queues as in
/// [`start_from`]), with `env` on top: a test-only build of a function.
pub fn start_as(
    template: &Template,
    name: &str,
    bootstrap: &Path,
    env: &[(&str, &str)],
) -> Emulator {
    let (rie, spec, log) = launch(template, name, bootstrap, env);
    Emulator::start(&rie, bootstrap, &spec, env, &log).unwrap_or_else(|e| panic!("{e}"))
}

/// The Arrow worker (two environments, waiting past them) with `env`, behind
/// a Lambda Invoke API, as the local state machine calls it: the pool and
/// the API (stopped on drop).
pub fn worker_behind_invoke_api(
    env: &[(&str, &str)],
) -> (
    std::sync::Arc<local_stack::pool::Pool>,
    local_stack::lambda_api::LambdaApi,
) {
    use local_stack::lambda_api::{LambdaApi, Served};
    use local_stack::pool::{Overflow, Size};
    let size = Size {
        environments: 2,
        overflow: Overflow::Wait,
    };
    let pool = std::sync::Arc::new(pool(&template(), "arrow-worker", env, size));
    let api = LambdaApi::start(vec![Served {
        names: vec!["ArrowWorkerFunction".into(), "arrow-worker".into()],
        pool: std::sync::Arc::clone(&pool),
    }])
    .unwrap_or_else(|e| panic!("{e}"));
    (pool, api)
}

/// A pool of `size` environments of the function `name` of `template` (as
/// [`start_from`] starts one), throttled past the size if `overflow` says so.
pub fn pool(
    template: &Template,
    name: &str,
    env: &[(&str, &str)],
    size: local_stack::pool::Size,
) -> local_stack::pool::Pool {
    let bootstrap = binary(name);
    let (rie, spec, log) = launch(template, name, &bootstrap, env);
    let limits = local_stack::cgroup::Limits::from_env().unwrap_or_else(|e| panic!("{e}"));
    local_stack::pool::Pool::of_emulators(&rie, &bootstrap, &spec, env, &log, size, limits)
}

/// The emulator, the spec of `name` in `template` with its queues on the
/// ElasticMQ of `env` (see [`start_from`]), and a fresh log path for `bootstrap`.
fn launch(
    template: &Template,
    name: &str,
    bootstrap: &Path,
    env: &[(&str, &str)],
) -> (PathBuf, Function, PathBuf) {
    static RUN: AtomicUsize = AtomicUsize::new(0);
    let rie = local_stack::tools::emulator().unwrap_or_else(|e| panic!("{e}"));
    let logs = workspace_root().join("target").join("e2e-logs");
    std::fs::create_dir_all(&logs).unwrap_or_else(|e| panic!("{}: {e}", logs.display()));
    let log = logs.join(format!(
        "{}-{}-{}.log",
        file_name(bootstrap),
        std::process::id(),
        RUN.fetch_add(1, Ordering::Relaxed)
    ));
    let sqs = env
        .iter()
        .find(|(key, _)| *key == "AWS_ENDPOINT_URL_SQS")
        .map_or(NO_SERVER, |(_, url)| *url);
    (rie, declared(template, name, sqs), log)
}

/// Whether CPU and memory limits are enforced here; if not, one line says
/// the test is skipped.
pub fn limits_enforced() -> bool {
    local_stack::cgroup::enforced()
        .inspect_err(|why| eprintln!("skipped: limits are not enforced: {why}"))
        .is_ok()
}

/// Assert that the function behind `emulator` has stayed within its memory
/// limit so far: no out-of-memory kill in its cgroup, and the cgroup's peak
/// (emulator and function) below the limit; both figures are printed, named
/// `what`. Where limits are not enforced, one line says the check is skipped.
pub fn assert_within_memory_limit(emulator: &Emulator, what: &str) {
    assert_memory_within_limit(
        what,
        emulator.memory_limit_bytes(),
        emulator.peak_memory_bytes(),
        emulator.oom_kills(),
    );
}

/// [`assert_within_memory_limit`] for the environments of `pool` (none
/// serving).
pub fn assert_pool_within_memory_limit(pool: &local_stack::pool::Pool, what: &str) {
    assert_memory_within_limit(
        what,
        pool.memory_limit_bytes(),
        pool.peak_memory_bytes(),
        pool.oom_kills(),
    );
}

/// The check of [`assert_within_memory_limit`] on a cgroup's figures: its
/// memory `limit`, its `peak` and its out-of-memory `kills`.
fn assert_memory_within_limit(
    what: &str,
    limit: Option<u64>,
    peak: Option<u64>,
    kills: Option<u64>,
) {
    if let Err(why) = local_stack::cgroup::enforced() {
        eprintln!("{what}: memory check skipped: limits are not enforced: {why}");
        return;
    }
    let limit = limit.unwrap_or_else(|| panic!("{what}: limits are enforced, yet no memory limit"));
    let peak = peak.unwrap_or_else(|| panic!("{what}: the kernel keeps no peak memory figure"));
    eprintln!(
        "{what}: peak memory {:.1} MiB of its {:.1} MiB limit; out-of-memory kills: {}",
        mib(peak),
        mib(limit),
        kills.map_or_else(
            || "not counted by this kernel".to_owned(),
            |k| k.to_string()
        )
    );
    assert_eq!(kills.unwrap_or(0), 0, "{what}: killed for memory");
    assert!(
        peak < limit,
        "{what}: peak memory {peak} bytes reached the limit {limit}"
    );
}

/// `mutex` locked, also after a panic of another thread that held it (a
/// failed test still reports what it saw).
pub fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// `bytes` in MiB, for messages.
pub fn mib(bytes: u64) -> f64 {
    bytes as f64 / f64::from(1 << 20)
}

/// The sample events of a function: every event in `events/<name>/` (each
/// with its expectation beside it, see `local_stack::events::samples`).
pub fn events(name: &str) -> Vec<(PathBuf, String)> {
    local_stack::events::of(name).unwrap_or_else(|e| panic!("{e}"))
}

/// The JSON log lines among `logs` (the function's own lines under
/// `AWS_LAMBDA_LOG_FORMAT=JSON`; the emulator's lines are plain text).
pub fn json_lines(logs: &str) -> Vec<serde_json::Value> {
    logs.lines()
        .filter(|line| line.starts_with('{'))
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect()
}

/// The UDP sockets the processes below `pid` hold (their open files that are
/// sockets listed in `/proc/net/udp` or `udp6`).
pub fn udp_sockets_of_descendants(pid: u32) -> usize {
    let inodes = |table: &str| -> Vec<String> {
        std::fs::read_to_string(format!("/proc/{pid}/net/{table}"))
            .unwrap_or_default()
            .lines()
            .skip(1)
            .filter_map(|line| line.split_whitespace().nth(9).map(str::to_owned))
            .collect()
    };
    let udp: Vec<String> = [inodes("udp"), inodes("udp6")].concat();
    local_stack::process::descendants(pid)
        .into_iter()
        .filter_map(|child| std::fs::read_dir(format!("/proc/{child}/fd")).ok())
        .flatten()
        .filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok())
        .filter_map(|link| {
            let link = link.to_string_lossy().into_owned();
            Some(link.strip_prefix("socket:[")?.strip_suffix(']')?.to_owned())
        })
        .filter(|inode| udp.contains(inode))
        .count()
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

/// A folder for DynamoDB Local's database ([`LocalDynamoDb::start_persistent`]),
/// removed on drop. In `/dev/shm` where there is one: memory, so no disk sync
/// per write (on disk, a 5,000-message drain took about a third longer), and
/// still there when the server is killed; else under `target/e2e-logs/`.
pub struct DataDir(PathBuf);

impl DataDir {
    /// A fresh folder named after `what` (created by the server).
    pub fn new(what: &str) -> Self {
        let scratch = scratch(what);
        let shm = Path::new("/dev/shm");
        match scratch.file_name() {
            Some(name) if shm.is_dir() => Self(shm.join(name)),
            _ => Self(scratch),
        }
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for DataDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
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
    testkit::orders::records(range, testkit::orders::body)
}

/// Every item of a local table as `order_id -> content_hash`, by paginated
/// scan; each item's hash must be of the current `hash_version`.
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
        let version = order_processor::order::content_hash::HASH_VERSION.to_string();
        assert_eq!(
            item.get("hash_version"),
            Some(&AttributeValue::N(version)),
            "{}",
            text("order_id")
        );
        let previous = items.insert(text("order_id"), text("content_hash"));
        assert!(previous.is_none(), "a scan returned an order twice");
    }
    items
}

/// What the table must hold after the sample orders `range` were processed.
pub fn expected_hashes(range: std::ops::Range<u64>) -> std::collections::BTreeMap<String, String> {
    range
        .map(|n| {
            let valid = order_processor::order::validate(testkit::orders::order(n))
                .unwrap_or_else(|e| panic!("sample {n}: {e}"));
            (valid.order.order_id.clone(), valid.hash_hex())
        })
        .collect()
}

/// Bodies the order processor must refuse, six per round, each for another
/// reason (a wrong total, an unknown currency, an unknown field, no items,
/// truncated JSON, a body over the 64 KiB limit), all distinct (at most 100
/// rounds).
pub fn invalid_bodies(rounds: u64) -> Vec<String> {
    use serde_json::Value;
    assert!(
        rounds <= 100,
        "at most 100 rounds of distinct invalid bodies"
    );
    let tampered = |n: u64, change: &dyn Fn(&mut Value)| {
        let mut order: Value = serde_json::from_str(&testkit::orders::body(n))
            .unwrap_or_else(|e| panic!("sample {n}: {e}"));
        change(&mut order);
        order.to_string()
    };
    let mut bodies = Vec::new();
    for n in 0..rounds {
        let id = 10_000 + n;
        bodies.push(tampered(id, &|o| o["total_cents"] = Value::from(1)));
        bodies.push(tampered(id + 100, &|o| o["currency"] = Value::from("euro")));
        bodies.push(tampered(id + 200, &|o| o["surprise"] = Value::from(true)));
        bodies.push(tampered(id + 300, &|o| {
            o["items"] = Value::from(Vec::<Value>::new())
        }));
        bodies.push(format!("{{\"order_id\": \"ord-{id}\", "));
        bodies.push(format!("{} {}", " ".repeat(70 * 1024), n));
    }
    for body in &bodies {
        assert!(
            order_processor::order::parse(body).is_err(),
            "meant to be invalid: {}",
            &body[..body.len().min(80)]
        );
    }
    bodies
}

/// `valid` in a fixed shuffle (a stride coprime to its length), with the
/// `invalid` bodies spread over the first `within` positions.
pub fn mixed(valid: Vec<String>, invalid: &[String], within: usize) -> Vec<String> {
    let n = valid.len();
    let gcd = |mut a: usize, mut b: usize| {
        while b != 0 {
            (a, b) = (b, a % b);
        }
        a
    };
    let stride = [7, 11, 13, 17]
        .into_iter()
        .find(|s| gcd(*s, n) == 1)
        .expect("a coprime stride");
    let mut bodies: Vec<String> = (0..n).map(|i| valid[i * stride % n].clone()).collect();
    let step = (within / invalid.len().max(1)).max(1);
    for (i, bad) in invalid.iter().enumerate() {
        bodies.insert((i * step).min(bodies.len()), bad.clone());
    }
    bodies
}

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

/// The order processor's SQS event (the event source mapping SAM creates).
pub fn order_source(template: &Template) -> SqsSource {
    template
        .sqs_sources()
        .expect("SQS events")
        .into_iter()
        .find(|s| s.function == "order-processor")
        .expect("the order processor has an SQS event")
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

/// The end every run of orders through the queue must reach: each valid order
/// stored exactly once with the content sent, exactly the invalid bodies
/// dead-lettered (so no valid order there), each with its failure class, the
/// order queue empty.
pub async fn assert_reconciled(
    table: &aws_sdk_dynamodb::Client,
    queues: &LocalQueues,
    orders: &LocalQueue,
    dead_letters: &LocalQueue,
    valid: std::ops::Range<u64>,
    invalid: &[String],
) {
    const TABLE: &str = "OrdersTable";
    let stored = stored_hashes(table, TABLE).await;
    let expected = expected_hashes(valid);
    let missing = expected.keys().filter(|k| !stored.contains_key(*k)).count();
    let unexpected = stored.keys().filter(|k| !expected.contains_key(*k)).count();
    assert!(
        stored == expected,
        "{TABLE}: {} items, {missing} orders missing, {unexpected} unexpected, {} with other content",
        stored.len(),
        expected
            .iter()
            .filter(|(k, v)| stored.get(*k).is_some_and(|s| s != *v))
            .count()
    );
    let letters = take_all(&queues.client, &dead_letters.url)
        .await
        .expect("dead letters");
    let class = order_processor::dead_letter::attr::FAILURE_CLASS;
    for letter in &letters {
        let body = letter.body().unwrap_or_default();
        let expected = order_processor::order::parse(body).err().map(|e| e.class());
        assert_eq!(
            letter
                .message_attributes()
                .and_then(|a| a.get(class))
                .and_then(|v| v.string_value()),
            expected,
            "the class of a dead letter: {body:.80}"
        );
    }
    let mut dead: Vec<String> = letters
        .into_iter()
        .map(|m| m.body.unwrap_or_default())
        .collect();
    let mut expected_dead = invalid.to_vec();
    dead.sort();
    expected_dead.sort();
    assert!(
        dead == expected_dead,
        "dead-letter queue: {} messages, {} of them valid orders, {} invalid bodies expected",
        dead.len(),
        dead.iter()
            .filter(|b| order_processor::order::parse(b).is_ok())
            .count(),
        invalid.len()
    );
    assert_eq!(
        depth(&queues.client, &orders.url).await.expect("depth"),
        0,
        "order queue empty"
    );
}

/// Write `count` sample orders, their customers spread over `customers`, into
/// the orders table, 25 per `BatchWriteItem`, 16 requests at a time.
pub async fn write_orders(dynamodb: &LocalDynamoDb, count: u64, customers: u64) {
    use aws_sdk_dynamodb::types::{PutRequest, WriteRequest};
    use futures::StreamExt;
    let client = dynamodb.server.client();
    let batches: Vec<Vec<WriteRequest>> = (0..count)
        .map(|n| {
            let mut order = testkit::orders::order(n);
            order.customer_id = format!("cust-{:06}", n % customers);
            let valid = order_processor::order::validate(order).expect("a valid order");
            let put = PutRequest::builder()
                .set_item(Some(order_processor::dynamodb::item(&valid)))
                .build()
                .expect("put request");
            WriteRequest::builder().put_request(put).build()
        })
        .collect::<Vec<_>>()
        .chunks(25)
        .map(<[WriteRequest]>::to_vec)
        .collect();
    futures::stream::iter(batches)
        .for_each_concurrent(16, |mut batch| {
            let client = client.clone();
            async move {
                while !batch.is_empty() {
                    let output = client
                        .batch_write_item()
                        .request_items("OrdersTable", batch)
                        .send()
                        .await
                        .expect("BatchWriteItem");
                    batch = output
                        .unprocessed_items
                        .and_then(|mut tables| tables.remove("OrdersTable"))
                        .unwrap_or_default();
                }
            }
        })
        .await;
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
    /// The state machine [`LocalAnalytics::run`] runs.
    pub const REPORT: &str = "OrdersReportStateMachine";

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

    /// Run [`LocalAnalytics::REPORT`] with `input` to its end (at most five
    /// minutes): how it ended.
    pub fn run(&self, input: &serde_json::Value) -> local_stack::step_functions::Execution {
        self.run_machine(self.state_machine_arn(Self::REPORT), input)
    }

    /// Run [`LocalAnalytics::REPORT`] with `input` to its end as the
    /// execution `name`.
    pub fn run_named(
        &self,
        input: &serde_json::Value,
        name: &str,
    ) -> local_stack::step_functions::Execution {
        self.run_as(self.state_machine_arn(Self::REPORT), input, Some(name))
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

/// `calls` (each an event and its options) sent to `pool` at once (released
/// together by a barrier), each answered (HTTP 200, a function error
/// included); the answers, in order.
pub fn send_at_once(
    pool: &local_stack::pool::Pool,
    calls: Vec<(String, local_stack::pool::Options)>,
) -> Vec<serde_json::Value> {
    let start = std::sync::Barrier::new(calls.len());
    std::thread::scope(|s| {
        let calls: Vec<_> = calls
            .into_iter()
            .map(|(event, options)| {
                let start = &start;
                s.spawn(move || {
                    start.wait();
                    pool.invoke_with(event.as_bytes(), &options)
                })
            })
            .collect();
        calls
            .into_iter()
            .map(|call| {
                let answer = call
                    .join()
                    .expect("thread")
                    .unwrap_or_else(|e| panic!("{e}\n{}", pool.logs()))
                    .invocation;
                assert_eq!(answer.status, 200, "{}", answer.body);
                answer.json().expect("JSON")
            })
            .collect()
    })
}

/// The Lambda Managed Instances environment of the function `name` of
/// `template`, as `cargo xtask run` starts it: a pool of one emulator serving
/// up to the function's `PerExecutionEnvironmentMaxConcurrency` at once, with
/// `env` on top (queues as in [`start_from`]); `memory_mb`, if given, instead
/// of the template's `MemorySize`. Panics if `template` runs it on demand.
pub fn managed_pool(
    template: &Template,
    name: &str,
    env: &[(&str, &str)],
    memory_mb: Option<u32>,
) -> local_stack::pool::Pool {
    let bootstrap = binary(name);
    let (rie, mut spec, log) = launch(template, name, &bootstrap, env);
    let managed = template
        .managed_instances(&spec)
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|| panic!("{name} runs on demand in this template"));
    if let Some(memory_mb) = memory_mb {
        spec.memory_mb = memory_mb;
    }
    let limits = local_stack::cgroup::Limits::from_env().unwrap_or_else(|e| panic!("{e}"));
    local_stack::pool::Pool::of_managed_instances(
        &rie, &bootstrap, &spec, managed, env, &log, limits,
    )
}

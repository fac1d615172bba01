//! Faults injected into the order path with real pieces: messages in
//! ElasticMQ, the local event source mapping, the order-processor binary under
//! the runtime interface emulator, DynamoDB Local. Queues, redrive policy,
//! batch size, the mapping's concurrency and the function's settings come from
//! `template.yaml`.
//!
//! - DynamoDB Local killed and restarted (same port, same database folder,
//!   so nothing written before the kill is lost) in the middle of 5,000
//!   messages;
//! - a DynamoDB endpoint that accepts connections and never answers, with a
//!   function timeout of two seconds;
//! - bursts of DynamoDB throttling errors from a loopback proxy.
//!
//! Through the 5,000 messages, drained by as many batches at once as the
//! template's mapping runs (its `MaximumConcurrency`, each batch in an
//! environment of its own, as on Lambda), every environment of the function
//! also stays within its memory limit (the template's `MemorySize`, where the
//! local stack enforces it).
//!
//! A panic in one record is not injected here: nothing a client can send
//! makes the real binary panic, and the binary has (deliberately) no test
//! hook to make it. The handler's `catch_unwind` is covered by the unit tests
//! `mixed_batch_acknowledges_exactly_the_stored_orders` and
//! `fifo_panic_blocks_its_group` in `functions/order-processor/src/handler.rs`,
//! whose store fake panics on a chosen order; the event source mapping's
//! handling of `batchItemFailures` by those in `tools/local-stack/src/event_source.rs`.

mod support;

use local_stack::dynamodb_local::DynamoDbLocal;
use local_stack::elasticmq::{LocalQueue, depth, take_all};
use local_stack::emulator::{Emulator, Invocation};
use local_stack::event_source::{EventSource, Totals, drain_concurrently, pollers};
use local_stack::jvm::Compiler;
use local_stack::local_aws::function_env;
use local_stack::process;
use local_stack::template::SqsSource;
use order_processor_testkit::orders::body;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::{Ipv4Addr, TcpListener};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use support::throttling_proxy::{BURST_EVERY, BURST_LENGTH, ThrottlingProxy};
use support::{
    DataDir, LocalQueues, assert_reconciled, assert_within_memory_limit, invalid_bodies,
    json_lines, lock, mixed, order_source, servers, servers_env, start, template,
};

// ------------------------------------------------------------------ scenarios

/// Distinct valid orders, duplicates of some of them, invalid bodies: 5,000.
const RUN_VALID: u64 = 4_700;
const RUN_DUPLICATES: u64 = 240;
const RUN_INVALID_ROUNDS: u64 = 10;
/// DynamoDB Local is killed after this many invocations (about 1,500 messages).
const KILL_AFTER_INVOCATIONS: usize = 150;
/// How long it stays down before it is started again (plus the JVM's start).
const DOWN_FOR: Duration = Duration::from_secs(3);
/// The local visibility timeout. A valid message fails only while DynamoDB is
/// down, and two deliveries of one message are at least this far apart (it
/// stays invisible that long after each receive), so the template's
/// `maxReceiveCount` (5) failed deliveries would need an outage of about
/// 4 x 5 s, less one invocation's retries (at most 3.2 s): 17 s, against the
/// 3 s here plus DynamoDB Local's restart. The figures are printed.
const RUN_VISIBILITY_S: u32 = 5;

/// 5,000 messages through the queue while DynamoDB Local is killed and
/// restarted, batches invoked side by side as the template's mapping invokes
/// them: every valid order stored once, exactly the invalid bodies
/// dead-lettered (by the function, on their first delivery), valid orders
/// failed only during the outage; each environment of the function, at its
/// template memory size, never killed for memory and its peak below the limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dynamodb_killed_and_restarted_during_5000_messages_loses_and_duplicates_nothing() {
    let began = Instant::now();
    let template = template();
    let source = order_source(&template);
    let data = DataDir::new("dynamodb-restart");
    let (dynamodb, queues) =
        servers(&template, Some(data.path().to_path_buf()), RUN_VISIBILITY_S).await;
    let (orders, dead_letters, receives) = queues.with_dead_letters(&source);
    let servers_up = began.elapsed();

    let (bodies, invalid) = run_bodies();
    queues.send_all(orders, &bodies).await;
    let sent = began.elapsed();

    // Owned: the DynamoDB Local server moves to the outage's thread below.
    let env = owned(servers_env(&dynamodb, &queues));
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let ledger = Ledger::default();
    let outage = Outage::after(
        dynamodb.server,
        Arc::clone(&ledger.invocations),
        KILL_AFTER_INVOCATIONS,
        DOWN_FOR,
    );
    let drain_began = Instant::now();
    let totals = drain_in_environments(&queues, orders, &source, &env, &ledger);
    let drained_in = drain_began.elapsed();
    let (server, window) = outage.finish();
    let window = window.expect("DynamoDB Local was killed before the queue was drained");

    let (during, outside) = ledger.valid_failures(window);
    let outage_s = (window.up - window.down).as_secs_f64();
    eprintln!(
        "5,000 messages ({RUN_VALID} orders, {RUN_DUPLICATES} duplicates, {} invalid), \
         visibility timeout {RUN_VISIBILITY_S} s: {totals:?}; servers up after {:.1} s, \
         sent after {:.1} s, drained in {:.1} s; DynamoDB Local down {outage_s:.1} s \
         (killed after {KILL_AFTER_INVOCATIONS} invocations, restarted after {DOWN_FOR:?} \
         + its start); failed deliveries of valid orders: {during} in invocations \
         overlapping the outage, {outside} outside it; most failed deliveries of one \
         message: {} (dead-lettered at {receives})",
        invalid.len(),
        servers_up.as_secs_f64(),
        sent.as_secs_f64(),
        drained_in.as_secs_f64(),
        ledger.most_failures_of_one_valid_message(),
    );

    assert_reconciled(
        &server.client(),
        &queues,
        orders,
        dead_letters,
        0..RUN_VALID,
        &invalid,
    )
    .await;
    assert!(during > 0, "the outage failed no delivery: {totals:?}");
    assert_eq!(
        outside, 0,
        "valid orders failed only while DynamoDB Local was down"
    );
    assert_eq!(totals.whole_batch_failures, 0, "{totals:?}");
    assert_eq!(
        totals.deleted,
        bodies.len(),
        "every message was deleted in the end"
    );
    assert_eq!(
        ledger.invalid_failures(),
        0,
        "each invalid body was dead-lettered on its first delivery"
    );
    assert_eq!(totals.returned, during, "nothing else came back");
    eprintln!("whole scenario: {:.1} s", began.elapsed().as_secs_f64());
}

/// Drain `orders` through the event source mapping of `source`, with as many
/// pollers as it runs at once (at most [`MAX_ENVIRONMENTS`]), each batch in
/// an environment of its own (`env` on top of the template's), as Lambda runs
/// them; every answer recorded in `ledger`. Then each environment must have
/// stayed within its memory limit.
fn drain_in_environments(
    queues: &LocalQueues,
    orders: &LocalQueue,
    source: &SqsSource,
    env: &[(&str, &str)],
    ledger: &Ledger,
) -> Totals {
    let environments = Environments::start(pollers(source, MAX_ENVIRONMENTS), env);
    let in_a_free_environment = |event: &str| environments.invoke(event);
    let invoke = ledger.invoke(&in_a_free_environment);
    let deadline = Instant::now() + Duration::from_secs(300);
    let totals = tokio::task::block_in_place(|| {
        drain_concurrently(
            &queues.server.endpoint(),
            orders,
            source,
            environments.all.len(),
            deadline,
            &invoke,
        )
    })
    .unwrap_or_else(|e| panic!("{e}\n{}", environments.logs()));
    let served = environments.invocations();
    for (n, emulator) in environments.all.iter().enumerate() {
        assert_within_memory_limit(
            emulator,
            &format!(
                "order processor, environment {} of {} ({} invocations)",
                n + 1,
                served.len(),
                served[n]
            ),
        );
    }
    totals
}

/// Most environments the restart scenario starts: the mapping's
/// `MaximumConcurrency` (the template's `OrderMaxConcurrency`, 5 by default)
/// sets how many it uses.
const MAX_ENVIRONMENTS: usize = 5;

/// Environments of the order processor, each serving one invocation at a
/// time, as many as there are pollers (so one is always free), and how many
/// invocations each served.
struct Environments {
    all: Vec<Emulator>,
    free: Mutex<Vec<usize>>,
    served: Vec<AtomicUsize>,
}

impl Environments {
    /// `count` environments of the function with `env` on top of the template's.
    fn start(count: usize, env: &[(&str, &str)]) -> Self {
        Self {
            all: (0..count).map(|_| start("order-processor", env)).collect(),
            free: Mutex::new((0..count).rev().collect()),
            served: (0..count).map(|_| AtomicUsize::new(0)).collect(),
        }
    }

    /// Invoke the function in a free environment.
    fn invoke(&self, event: &str) -> Result<Invocation, String> {
        let n = lock(&self.free)
            .pop()
            .ok_or("more invocations at once than environments")?;
        let answer = self.all[n].invoke(event);
        self.served[n].fetch_add(1, Ordering::SeqCst);
        lock(&self.free).push(n);
        answer
    }

    /// Invocations each environment served.
    fn invocations(&self) -> Vec<usize> {
        self.served
            .iter()
            .map(|n| n.load(Ordering::SeqCst))
            .collect()
    }

    /// Everything the environments printed, one after the other.
    fn logs(&self) -> String {
        self.all.iter().map(Emulator::logs).collect()
    }
}

/// The 5,000 bodies of the restart scenario, shuffled, and the invalid ones
/// among them (spread over the first 1,000).
fn run_bodies() -> (Vec<String>, Vec<String>) {
    let valid: Vec<String> = (0..RUN_VALID)
        .chain((0..RUN_DUPLICATES).map(|n| n * 7))
        .map(body)
        .collect();
    let invalid = invalid_bodies(RUN_INVALID_ROUNDS);
    // The invalid bodies among the first 1,000 messages.
    let bodies = mixed(valid, &invalid, 1_000);
    assert_eq!(bodies.len(), 5_000);
    (bodies, invalid)
}

/// `env` as owned text.
fn owned(env: Vec<(&str, &str)>) -> Vec<(String, String)> {
    env.into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

/// The function timeout set in the emulator for the silent-DynamoDB scenario.
const TIMEOUT_S: u32 = 2;

/// A batch from the queue while DynamoDB accepts connections and never
/// answers, with a 2 s function timeout: the handler cuts off each attempt,
/// tries again, gives up at its deadline (less its margin) and reports every
/// order failed, so none is deleted; the one invalid body goes to the
/// dead-letter queue meanwhile. Then the orders again while the function is
/// frozen: the emulator stops it at the timeout and answers `Task timed
/// out`, which fails the whole batch; again nothing is deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dynamodb_that_never_answers_fails_every_record_before_the_function_timeout() {
    let source = order_source(&template());
    let (_black_hole, endpoint) = black_hole();
    let queues = LocalQueues::start(1).await;
    let (orders, dead_letters, _) = queues.with_dead_letters(&source);
    let garbage = "{not json".to_owned();
    let bodies: Vec<String> = (0..9).map(body).chain([garbage.clone()]).collect();
    queues.send_all(orders, &bodies).await;
    let timeout = TIMEOUT_S.to_string();
    let mut env = function_env(&[("AWS_ENDPOINT_URL_DYNAMODB", endpoint.as_str())]);
    env.extend(queues.env());
    // Read by the emulator (and passed on to the function): it sets each
    // invocation's deadline and stops a function that overruns.
    env.push(("AWS_LAMBDA_FUNCTION_TIMEOUT", &timeout));
    let emulator = start("order-processor", &env);
    assert_initialised_within_the_timeout(&emulator);

    let mapping = EventSource::new(&queues.client, orders, &source);
    let seen: Mutex<Vec<(Value, Invocation)>> = Mutex::default();
    let invoke = |event: &str| {
        let began = Instant::now();
        let answer = emulator.invoke(event)?;
        eprintln!(
            "timeout {TIMEOUT_S} s, DynamoDB silent: answered in {:.2} s: {}",
            began.elapsed().as_secs_f64(),
            answer.body
        );
        let event = serde_json::from_str(event).map_err(|e| e.to_string())?;
        lock(&seen).push((event, answer.clone()));
        Ok(answer)
    };

    // The handler answers in time: every order failed, none deleted.
    let delivery = mapping
        .poll_once(Duration::from_secs(5), &invoke)
        .await
        .expect("poll");
    assert!(delivery.received > 0, "{delivery:?}");
    assert!(!delivery.whole_batch_failed, "{delivery:?}");
    let (event, answer) = lock(&seen).pop().expect("an invocation");
    let (order_ids, garbage_ids) = orders_and_garbage(&event, &garbage);
    assert_eq!(delivery.deleted, garbage_ids.len(), "{delivery:?}");
    assert_eq!(
        failed_ids(&answer.json().expect("a batch response")),
        order_ids,
        "every order reported failed"
    );
    assert_failed_for_their_reasons(&emulator.logs(), &order_ids, &garbage_ids);
    let dead = dead_letter_bodies(&queues, dead_letters).await;
    assert_eq!(dead.len(), garbage_ids.len(), "{dead:?}");
    assert!(dead.iter().all(|body| *body == garbage), "{dead:?}");

    // A frozen function (SIGSTOP): the emulator stops it at the timeout and
    // answers something that is not a batch response: the whole batch fails.
    freeze(&emulator);
    let delivery = mapping
        .poll_once(Duration::from_secs(5), &invoke)
        .await
        .expect("poll");
    assert!(delivery.received > 0, "{delivery:?}");
    assert_eq!(delivery.deleted, 0, "{delivery:?}");
    assert!(delivery.whole_batch_failed, "{delivery:?}");
    let (_, answer) = lock(&seen).pop().expect("an invocation");
    assert!(answer.body.contains("Task timed out"), "{}", answer.body);
    assert_eq!(
        depth(&queues.client, &orders.url).await.expect("depth"),
        (bodies.len() - garbage_ids.len()) as u64,
        "no order was acknowledged"
    );
}

/// A listener that never accepts, and its endpoint: the kernel completes
/// each connection and queues the request, so the function's client waits
/// for an answer that never comes (no refusal, no reset).
fn black_hole() -> (TcpListener, String) {
    let black_hole = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("listener");
    let endpoint = format!(
        "http://{}",
        black_hole.local_addr().expect("listener address")
    );
    (black_hole, endpoint)
}

/// The emulator counts a cold start against the timeout too: an init that
/// overruns it (seen once on a loaded machine) is stopped like a frozen
/// function. Start the function with an empty batch, which needs no
/// DynamoDB, so that what follows is the handler against its deadline.
fn assert_initialised_within_the_timeout(emulator: &Emulator) {
    let started = (0..3).any(|_| {
        emulator.invoke(r#"{"Records":[]}"#).is_ok_and(|answer| {
            answer
                .json()
                .is_ok_and(|json| json.get("errorType").is_none())
        })
    });
    assert!(started, "no init within {TIMEOUT_S} s: {}", emulator.logs());
}

/// The message ids of a batch `event`: of the orders, and of the records
/// whose body is `garbage`.
fn orders_and_garbage(event: &Value, garbage: &str) -> (BTreeSet<String>, BTreeSet<String>) {
    let records: BTreeMap<String, String> = event["Records"]
        .as_array()
        .expect("records")
        .iter()
        .map(|r| {
            let text = |key: &str| r[key].as_str().unwrap_or_default().to_owned();
            (text("messageId"), text("body"))
        })
        .collect();
    let garbage_ids: BTreeSet<String> = records
        .iter()
        .filter(|(_, body)| **body == garbage)
        .map(|(id, _)| id.clone())
        .collect();
    let order_ids: BTreeSet<String> = records
        .keys()
        .filter(|id| !garbage_ids.contains(*id))
        .cloned()
        .collect();
    (order_ids, garbage_ids)
}

/// Each record failed for its reason in `logs`: the garbage is invalid (and
/// dead-lettered), the orders timed out; the function itself never did.
fn assert_failed_for_their_reasons(
    logs: &str,
    order_ids: &BTreeSet<String>,
    garbage_ids: &BTreeSet<String>,
) {
    let classes = |message: &str| -> BTreeMap<String, String> {
        json_lines(logs)
            .iter()
            .filter(|l| l["message"] == message)
            .map(|l| {
                let text = |key: &str| l[key].as_str().unwrap_or_default().to_owned();
                (text("message_id"), text("class"))
            })
            .collect()
    };
    let timeouts: BTreeMap<String, String> = order_ids
        .iter()
        .map(|id| (id.clone(), "timeout".to_owned()))
        .collect();
    assert_eq!(classes("record failed"), timeouts, "{logs}");
    let invalid: BTreeMap<String, String> = garbage_ids
        .iter()
        .map(|id| (id.clone(), "invalid_json".to_owned()))
        .collect();
    assert_eq!(classes("record dead-lettered"), invalid, "{logs}");
    assert!(!logs.contains("Task timed out"), "{logs}");
}

/// Stop the emulator's one function process (SIGSTOP).
fn freeze(emulator: &Emulator) {
    let function = process::descendants(emulator.pid());
    assert_eq!(function.len(), 1, "one function process: {function:?}");
    process::signal(function[0], "STOP").unwrap_or_else(|e| panic!("{e}"));
}

/// The bodies of every message in the dead-letter queue (taken out).
async fn dead_letter_bodies(queues: &LocalQueues, dead_letters: &LocalQueue) -> Vec<String> {
    take_all(&queues.client, &dead_letters.url)
        .await
        .expect("dead letters")
        .into_iter()
        .map(|m| m.body.unwrap_or_default())
        .collect()
}

const THROTTLED_VALID: u64 = 300;
const THROTTLED_DUPLICATES: u64 = 20;
/// Throttling answers one order gets at most. With 8 attempts per delivery
/// (`Backoff::default()`), a delivery fails only after 8 throttled attempts:
/// at most one failed delivery per order, never `maxReceiveCount` (5).
const THROTTLES_PER_ORDER: usize = 10;

/// A few hundred messages while a proxy throttles DynamoDB in bursts: the
/// handler retries, and every valid order ends stored once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn throttling_bursts_are_retried_and_every_order_is_stored_once() {
    let began = Instant::now();
    let template = template();
    let source = order_source(&template);
    let (dynamodb, queues) = servers(&template, None, 2).await;
    let proxy = ThrottlingProxy::start(dynamodb.server.port(), THROTTLES_PER_ORDER);
    let (orders, dead_letters, _) = queues.with_dead_letters(&source);

    let valid: Vec<String> = (0..THROTTLED_VALID)
        .chain((0..THROTTLED_DUPLICATES).map(|n| n * 11))
        .map(body)
        .collect();
    let invalid = invalid_bodies(1);
    let bodies = mixed(valid, &invalid, 60);
    queues.send_all(orders, &bodies).await;

    let mut env = proxy.env();
    env.extend(queues.env());
    let emulator = start("order-processor", &env);
    let ledger = Ledger::default();
    let drain_began = Instant::now();
    let limit = Duration::from_secs(120);
    let totals = EventSource::new(&queues.client, orders, &source)
        .drain(
            Instant::now() + limit,
            &ledger.invoke(&|event| emulator.invoke(event)),
        )
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", emulator.logs()));
    let stats = proxy.stats();
    let (provisioned, throttling) = (stats.provisioned(), stats.throttling());
    // The invalid bodies were dead-lettered on their first delivery.
    let failed_deliveries = totals.returned;
    let most = ledger.most_failures_of_one_valid_message();
    eprintln!(
        "{} messages through throttling bursts ({BURST_LENGTH} of every {BURST_EVERY} PutItems, \
         at most {THROTTLES_PER_ORDER} per order): {totals:?}; PutItems: {} forwarded, \
         {provisioned} ProvisionedThroughputExceededException, {throttling} ThrottlingException; \
         retried within an invocation: {}; failed deliveries of valid orders: {failed_deliveries} \
         (most for one message: {most}); drained in {:.1} s, {:.1} s in all",
        bodies.len(),
        stats.forwarded(),
        (provisioned + throttling).saturating_sub(failed_deliveries),
        drain_began.elapsed().as_secs_f64(),
        began.elapsed().as_secs_f64(),
    );

    assert_reconciled(
        &dynamodb.server.client(),
        &queues,
        orders,
        dead_letters,
        0..THROTTLED_VALID,
        &invalid,
    )
    .await;
    assert!(
        provisioned > 0 && throttling > 0,
        "both kinds of throttling were answered"
    );
    assert!(stats.forwarded() >= THROTTLED_VALID as usize);
    assert_eq!(totals.whole_batch_failures, 0, "{totals:?}");
    assert_eq!(ledger.invalid_failures(), 0);
    assert_eq!(failed_deliveries, ledger.valid_failures_total());
    let attempts = order_processor::retry::Backoff::default().max_attempts as usize;
    assert!(
        most <= THROTTLES_PER_ORDER / attempts,
        "a delivery fails only after {attempts} throttled attempts (retried, not given up at once)"
    );
}

// ---------------------------------------------------------------- shared setup

/// The message ids in an answer's `batchItemFailures`.
fn failed_ids(answer: &Value) -> BTreeSet<String> {
    answer["batchItemFailures"]
        .as_array()
        .map(|failures| {
            failures
                .iter()
                .filter_map(|f| f["itemIdentifier"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// Every answer of the function as the event source mapping saw it.
#[derive(Default)]
struct Ledger {
    invocations: Arc<AtomicUsize>,
    answers: Mutex<Vec<Answer>>,
}

/// One invocation: when it ran and which records it failed.
struct Answer {
    started: Instant,
    ended: Instant,
    /// Message ids of failed records whose body is a valid order.
    valid_failed: Vec<String>,
    /// Failed records whose body is not a valid order.
    invalid_failed: usize,
}

/// When DynamoDB Local was down: killed at `down`, accepting again at `up`.
#[derive(Debug, Clone, Copy)]
struct Window {
    down: Instant,
    up: Instant,
}

impl Ledger {
    /// `invoke`, recording each answer.
    fn invoke<'a>(
        &'a self,
        invoke: &'a (dyn Fn(&str) -> Result<Invocation, String> + Sync),
    ) -> impl Fn(&str) -> Result<Invocation, String> + Sync + 'a {
        move |event| {
            let started = Instant::now();
            let answer = invoke(event)?;
            self.record(started, event, &answer);
            self.invocations.fetch_add(1, Ordering::SeqCst);
            Ok(answer)
        }
    }

    fn record(&self, started: Instant, event: &str, answer: &Invocation) {
        let event: Value = serde_json::from_str(event).expect("event JSON");
        let bodies: HashMap<&str, &str> = event["Records"]
            .as_array()
            .map(|records| {
                records
                    .iter()
                    .filter_map(|r| Some((r["messageId"].as_str()?, r["body"].as_str()?)))
                    .collect()
            })
            .unwrap_or_default();
        let failed = answer.json().map(|a| failed_ids(&a)).unwrap_or_default();
        let (valid, invalid): (Vec<String>, Vec<String>) = failed.into_iter().partition(|id| {
            bodies
                .get(id.as_str())
                .is_some_and(|b| order_processor::order::parse(b).is_ok())
        });
        lock(&self.answers).push(Answer {
            started,
            ended: Instant::now(),
            valid_failed: valid,
            invalid_failed: invalid.len(),
        });
    }

    /// Failed deliveries of valid orders in invocations that overlapped
    /// `window`, and in the others.
    fn valid_failures(&self, window: Window) -> (usize, usize) {
        let answers = lock(&self.answers);
        let (during, outside): (Vec<&Answer>, Vec<&Answer>) = answers
            .iter()
            .partition(|a| a.started <= window.up && a.ended >= window.down);
        let count = |list: &[&Answer]| list.iter().map(|a| a.valid_failed.len()).sum();
        (count(&during), count(&outside))
    }

    fn valid_failures_total(&self) -> usize {
        lock(&self.answers)
            .iter()
            .map(|a| a.valid_failed.len())
            .sum()
    }

    fn invalid_failures(&self) -> usize {
        lock(&self.answers).iter().map(|a| a.invalid_failed).sum()
    }

    fn most_failures_of_one_valid_message(&self) -> usize {
        let mut per_message: HashMap<String, usize> = HashMap::new();
        for answer in lock(&self.answers).iter() {
            for id in &answer.valid_failed {
                *per_message.entry(id.clone()).or_default() += 1;
            }
        }
        per_message.into_values().max().unwrap_or(0)
    }
}

/// The server (restarted if it was killed) and when it was down.
type OutageResult = Result<(DynamoDbLocal, Option<Window>), String>;

/// DynamoDB Local killed (SIGTERM, SIGKILL 200 ms later) once the function was
/// invoked `after` times, and started again on the same port and database
/// `down_for` later, on a thread of its own. Dropped early (a failed test),
/// it stops waiting and stops the server.
struct Outage {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<OutageResult>>,
}

impl Outage {
    fn after(
        server: DynamoDbLocal,
        invocations: Arc<AtomicUsize>,
        after: usize,
        down_for: Duration,
    ) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            while invocations.load(Ordering::SeqCst) < after {
                if stopped.load(Ordering::SeqCst) {
                    return Ok((server, None));
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            let down = Instant::now();
            let (port, db_path, log) = server.kill();
            std::thread::sleep(down_for);
            let server = DynamoDbLocal::start_on(
                port,
                db_path.as_deref(),
                &log.with_extension("restarted.log"),
                Compiler::Quick,
            )?;
            Ok((
                server,
                Some(Window {
                    down,
                    up: Instant::now(),
                }),
            ))
        });
        Self {
            stop,
            thread: Some(thread),
        }
    }

    /// The server and the outage's window (`None`: never killed).
    fn finish(mut self) -> (DynamoDbLocal, Option<Window>) {
        self.stop.store(true, Ordering::SeqCst);
        self.thread
            .take()
            .expect("running")
            .join()
            .expect("outage thread")
            .unwrap_or_else(|e| panic!("restart: {e}"))
    }
}

impl Drop for Outage {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

//! Many invocations at once in one process, for the lab's probe
//! `lab_concurrency`: each function's real handler, cold-started as the
//! function does, driven by a fixed number of clients at a time.

use arrow_worker::config::Config as ArrowConfig;
use arrow_worker_testkit::orders::MemoryStore;
use lambda_runtime::{Context, Diagnostic, LambdaEvent};
use order_processor::config::Config as OrdersConfig;
use order_processor_testkit::dead_letters::MemoryDeadLetters;
use order_processor_testkit::orders as sample;
use order_processor_testkit::store::MemoryOrders;
use serde_json::{Value, json};
use shared::config::{Env, number_or};
use shared::invocation::Deadline;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The hasher's request: the sample event's (its first password, its cost).
const HASH_EVENT: &str = include_str!("../../../../events/password-hasher/hash.json");
/// The Arrow worker's request: the sample aggregation by customer.
const ARROW_EVENT: &str = include_str!("../../../../events/arrow-worker/report-by-customer.json");
/// Orders per page of the Arrow worker's generated table (DynamoDB's pages
/// are up to 1 MB: about this many of these orders).
const PAGE: usize = 1_000;
/// How long any invocation may take before the probe calls it stuck.
const DEADLINE: Duration = Duration::from_secs(120);
/// How often RSS is sampled while requests run.
const SAMPLE_EVERY: Duration = Duration::from_millis(5);

/// One function's handler, ready to serve.
pub enum Work {
    Orders(Box<order_processor::handler::Handler<MemoryOrders, MemoryDeadLetters>>),
    Hasher(password_hasher::handler::Handler, Value),
    Arrow(arrow_worker::handler::Handler<MemoryStore>, Value),
}

impl Work {
    /// Cold start `function` as its `main` does, with settings from `env`
    /// (and the probe's own: `STORE_MS`, the store's answer time, and `ROWS`,
    /// the Arrow worker's table); with the CPU share it detected.
    pub fn start(function: &str, env: &dyn Env) -> Result<(Arc<Self>, f64), String> {
        let store_time =
            Duration::from_millis(number_or(env, "STORE_MS", 5, 0..=10_000).map_err(text)?);
        let (work, init) = match function {
            "orders" => {
                let (init, config) = shared::start(env, OrdersConfig::from_env).map_err(text)?;
                let store = MemoryOrders::accept_all().delay(store_time);
                let handler = order_processor::handler::Handler::new(
                    store,
                    MemoryDeadLetters::new(),
                    &config,
                );
                (Self::Orders(Box::new(handler)), init)
            }
            "hasher" => {
                let (init, config) =
                    shared::start(env, password_hasher::config::Config::from_env).map_err(text)?;
                let estimates = password_hasher::calibration::Estimates::on_demand();
                let handler =
                    password_hasher::handler::Handler::new(init.clone(), config, estimates);
                (Self::Hasher(handler, one_password(HASH_EVENT)?), init)
            }
            "arrow" => {
                let (init, config) = shared::start(env, ArrowConfig::from_env).map_err(text)?;
                let rows = number_or(env, "ROWS", 20_000, 1..=10_000_000).map_err(text)?;
                let rows = usize::try_from(rows).map_err(text)?;
                let items = arrow_worker_testkit::orders::items(rows, (rows as u64 / 8).max(1), 7);
                let store = MemoryStore::new(items, PAGE).with_page_latency(store_time);
                let workers = init.vcpus.workers;
                let handler = arrow_worker::handler::Handler::new(store, config, workers, None);
                (Self::Arrow(handler, parse(ARROW_EVENT)?), init)
            }
            other => return Err(format!("unknown function {other:?}")),
        };
        Ok((Arc::new(work), init.vcpus.share))
    }

    /// Serve request number `n`: whether it was answered (`false`: refused
    /// as `Busy`), or what went wrong.
    async fn serve(&self, n: u64) -> Result<bool, String> {
        match self {
            Self::Orders(handler) => {
                let records = sample::records(n * 10..n * 10 + 10, sample::body);
                let deadline = Deadline::at(Instant::now() + DEADLINE);
                let report = handler.process(&records, deadline).await.map_err(text)?;
                match report.failed().next() {
                    None => Ok(true),
                    Some((id, why)) => Err(format!("record {id} failed: {why:?}")),
                }
            }
            Self::Hasher(handler, event) => {
                let raw = serde_json::value::to_raw_value(event).map_err(text)?;
                let answer = handler.handle(invocation(raw)).await.map_err(diagnostic)?;
                match answer["hashes"].as_array().map(Vec::len) {
                    Some(1) => Ok(true),
                    _ => Err(format!("not one hash: {answer}")),
                }
            }
            Self::Arrow(handler, event) => match handler.handle(invocation(event.clone())).await {
                Ok(_) => Ok(true),
                Err(refused) if refused.error_type == "Busy" => Ok(false),
                Err(failed) => Err(diagnostic(failed)),
            },
        }
    }
}

/// `event` with only its first password.
fn one_password(event: &str) -> Result<Value, String> {
    let mut event = parse(event)?;
    let first = event["passwords"][0].take();
    event["passwords"] = json!([first]);
    Ok(event)
}

fn parse(event: &str) -> Result<Value, String> {
    serde_json::from_str(event).map_err(text)
}

fn text(e: impl std::fmt::Display) -> String {
    e.to_string()
}

fn diagnostic(d: Diagnostic) -> String {
    format!("{}: {}", d.error_type, d.error_message)
}

/// An invocation of `payload` with [`DEADLINE`] to go.
fn invocation<T>(payload: T) -> LambdaEvent<T> {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let mut context = Context::default();
    context.deadline = u64::try_from((now + DEADLINE).as_millis()).unwrap_or(u64::MAX);
    LambdaEvent::new(payload, context)
}

/// A concurrency and how many requests it is measured over.
#[derive(Debug, Clone, Copy)]
pub struct Level {
    pub clients: usize,
    pub requests: usize,
}

impl Level {
    /// `CLIENTS:REQUESTS`, e.g. `8:64`.
    pub fn parse(text: &str) -> Result<Self, String> {
        let bad = || format!("level {text:?}: expected CLIENTS:REQUESTS, e.g. 8:64");
        let (clients, requests) = text.split_once(':').ok_or_else(bad)?;
        let level = Self {
            clients: clients.parse().map_err(|_| bad())?,
            requests: requests.parse().map_err(|_| bad())?,
        };
        if level.clients == 0 || level.requests < level.clients {
            return Err(bad());
        }
        Ok(level)
    }
}

/// What one pass of requests gave.
struct Pass {
    seconds: f64,
    /// Each answered request's time, sorted.
    latencies: Vec<Duration>,
    busy: usize,
    /// Most RSS seen while it ran, in bytes.
    rss_max: u64,
}

/// `warm_up` requests one at a time, then each of `levels` twice (a warm-up
/// pass, then the measured one); the levels as JSON.
pub async fn drive(work: Arc<Work>, warm_up: usize, levels: &[Level]) -> Result<Value, String> {
    let next = Arc::new(AtomicU64::new(0));
    pass(&work, &next, 1, warm_up.max(1)).await?;
    let mut measured = Vec::new();
    for level in levels {
        let warm = pass(&work, &next, level.clients, level.requests).await?;
        let rss_warm = rss();
        let run = pass(&work, &next, level.clients, level.requests).await?;
        let quantile = |q: f64| {
            let i = ((run.latencies.len() as f64 - 1.0) * q).round() as usize;
            run.latencies.get(i).map_or(0.0, |d| d.as_secs_f64() * 1e3)
        };
        measured.push(json!({
            "clients": level.clients,
            "requests": level.requests,
            "answered": run.latencies.len(),
            "busy": run.busy + warm.busy,
            "seconds": run.seconds,
            "p50_ms": quantile(0.5),
            "p99_ms": quantile(0.99),
            "rss_warm_mib": mib(rss_warm),
            "rss_end_mib": mib(rss()),
            "rss_max_mib": mib(warm.rss_max.max(run.rss_max)),
        }));
    }
    Ok(Value::Array(measured))
}

/// `requests` requests by `clients` clients at once, numbered from `next`.
async fn pass(
    work: &Arc<Work>,
    next: &Arc<AtomicU64>,
    clients: usize,
    requests: usize,
) -> Result<Pass, String> {
    let left = Arc::new(AtomicUsize::new(requests));
    let (rss_max, done) = (
        Arc::new(AtomicU64::new(rss())),
        Arc::new(AtomicBool::new(false)),
    );
    let sampler = tokio::spawn(sample_rss(rss_max.clone(), done.clone()));
    let started = Instant::now();
    let handles: Vec<_> = (0..clients)
        .map(|_| tokio::spawn(client(work.clone(), next.clone(), left.clone())))
        .collect();
    let mut latencies = Vec::with_capacity(requests);
    let mut busy = 0;
    for handle in handles {
        let (answered, refused) = handle.await.map_err(text)??;
        latencies.extend(answered);
        busy += refused;
    }
    let seconds = started.elapsed().as_secs_f64();
    done.store(true, Ordering::Relaxed);
    sampler.await.map_err(text)?;
    latencies.sort_unstable();
    Ok(Pass {
        seconds,
        latencies,
        busy,
        rss_max: rss_max.load(Ordering::Relaxed),
    })
}

/// One client: requests one after another while any are `left`; the
/// answered ones' times and how many were refused.
async fn client(
    work: Arc<Work>,
    next: Arc<AtomicU64>,
    left: Arc<AtomicUsize>,
) -> Result<(Vec<Duration>, usize), String> {
    let (mut answered, mut busy) = (Vec::new(), 0);
    while left
        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
        .is_ok()
    {
        let n = next.fetch_add(1, Ordering::Relaxed);
        let started = Instant::now();
        // Spawned, as the runtime spawns each invocation.
        let served = tokio::spawn({
            let work = work.clone();
            async move { work.serve(n).await }
        });
        match served.await.map_err(text)?? {
            true => answered.push(started.elapsed()),
            false => busy += 1,
        }
    }
    Ok((answered, busy))
}

/// Keep the most RSS seen in `max` until `done`.
async fn sample_rss(max: Arc<AtomicU64>, done: Arc<AtomicBool>) {
    while !done.load(Ordering::Relaxed) {
        max.fetch_max(rss(), Ordering::Relaxed);
        tokio::time::sleep(SAMPLE_EVERY).await;
    }
}

fn rss() -> u64 {
    shared::memory::snapshot().rss_bytes
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / f64::from(1 << 20)
}

//! Many invocations at once in one process, for the functions' `concurrency`
//! probes (`functions/<name>/lab/examples/<name>-concurrency.rs`): a
//! function's real handler, cold-started as the function does, driven by a
//! fixed number of clients at a time. Each probe says how to start its
//! handler and serve request `n` ([`Work`]); [`probe`] does the rest.
//!
//! `<name>-concurrency WARM_UP LEVEL:REQUESTS...` (run by `cargo xtask lab`,
//! with [`SCALE`] set)
//! - WARM_UP requests first, one at a time, unmeasured (`fill`: as many as
//!   the handler needs to fill what it keeps, [`Work::warm_up`]);
//! - then each LEVEL: REQUESTS requests by LEVEL clients at once, each sending
//!   its next request when its last is answered, twice: a warm-up pass, then
//!   the measured pass. RSS is sampled every few milliseconds.
//!
//! One JSON line out. A request that fails ends the probe with an error; one
//! the function refuses as `Busy` (its budget full) is counted.

use lambda_runtime::{Context, Diagnostic, LambdaEvent};
use serde_json::{Value, json};
use shared::config::{Env, ProcessEnv, number_or};
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How long any invocation may take before the probe calls it stuck.
pub const DEADLINE: Duration = Duration::from_secs(120);
/// How often RSS is sampled while requests run.
const SAMPLE_EVERY: Duration = Duration::from_millis(5);
/// The setting that tells a probe the lab's scale, `quick` or `full` (its
/// requests may be smaller in quick mode).
pub const SCALE: &str = "LAB_SCALE";

/// One function's handler, ready to serve.
pub trait Work: Send + Sync + 'static {
    /// Serve request number `n`: whether it was answered (`false`: refused
    /// as `Busy`), or what went wrong.
    fn serve(&self, n: u64) -> impl Future<Output = Result<bool, String>> + Send;

    /// Requests that fill what the handler keeps between requests (a cache),
    /// so that RSS is compared once it is full: `WARM_UP` `fill`.
    fn warm_up(&self) -> usize {
        0
    }
}

/// Whether the lab runs at full scale ([`SCALE`] is not `quick`).
pub fn full_scale(env: &dyn Env) -> bool {
    !matches!(env.get(SCALE), Ok(Some(scale)) if scale == "quick")
}

/// The probe's whole run: cold start with `start` (settings from the
/// process environment, as on Lambda; it answers the handler and the CPU
/// share it detected), drive it as the arguments say, print the JSON line
/// (`request` says what one request is, for the report).
pub async fn probe<W: Work>(
    request: &str,
    start: impl FnOnce(&dyn Env) -> Result<(W, f64), String>,
) -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [warm_up, levels @ ..] = args.as_slice() else {
        return Err("usage: WARM_UP LEVEL:REQUESTS...".into());
    };
    let levels = levels
        .iter()
        .map(|l| Level::parse(l))
        .collect::<Result<Vec<_>, _>>()?;
    let (work, vcpus) = start(&ProcessEnv)?;
    let warm_up = match warm_up.as_str() {
        "fill" => work.warm_up(),
        count => count
            .parse()
            .map_err(|_| format!("WARM_UP {warm_up:?}: expected a number or `fill`"))?,
    };
    let measured = drive(Arc::new(work), warm_up, &levels).await?;
    println!(
        "{}",
        json!({
            "request": request,
            "allocator": shared::allocator::name(),
            "vcpus": vcpus,
            "levels": measured,
        })
    );
    Ok(())
}

/// The store's answer time of a probe's in-memory store (`STORE_MS`, 5 ms
/// unless set), as DynamoDB would answer.
pub fn store_time(env: &dyn Env) -> Result<Duration, String> {
    Ok(Duration::from_millis(
        number_or(env, "STORE_MS", 5, 0..=10_000).map_err(text)?,
    ))
}

/// Any error as text.
pub fn text(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// A handler's error as text.
pub fn diagnostic(d: Diagnostic) -> String {
    format!("{}: {}", d.error_type, d.error_message)
}

/// An invocation of `payload` with [`DEADLINE`] to go.
pub fn invocation<T>(payload: T) -> LambdaEvent<T> {
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
pub async fn drive<W: Work>(
    work: Arc<W>,
    warm_up: usize,
    levels: &[Level],
) -> Result<Value, String> {
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
async fn pass<W: Work>(
    work: &Arc<W>,
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
async fn client<W: Work>(
    work: Arc<W>,
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

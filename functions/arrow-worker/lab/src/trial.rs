//! A first-invocation trial, for the pre-warm probe: a fresh
//! Arrow worker handler over generated orders, invoked `rounds` times, each
//! round timed and its minor page faults counted. Run it in a fresh process per
//! variant, so no variant inherits another's heap.

use arrow_worker::config::Config;
use arrow_worker::handler::Handler;
use arrow_worker_testkit::orders::{self as arrow, MemoryStore};
use shared::allocator::{self, Policy};
use shared::arena;
use std::time::{Duration, Instant};

/// One invocation's cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Round {
    /// Wall-clock time of the invocation.
    pub took: Duration,
    /// Minor page faults of the process during it.
    pub minor_faults: u64,
}

/// How a trial pre-warms the arena before its first invocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArenaPrewarm {
    /// No pre-warm.
    Off,
    /// As the function does it: `shared::arena::start` (which refuses
    /// allocators that do not keep the pre-faulted pages).
    Shipped(usize),
    /// Pre-fault on a background thread even where `arena::start` refuses:
    /// to measure what pre-warming would give with other allocators.
    Forced(usize),
}

/// A trial's results.
#[derive(Debug, Clone)]
pub struct Trial {
    /// How long the pre-warm took (on its own thread).
    pub prewarm: Option<Duration>,
    /// Each invocation, first to last.
    pub rounds: Vec<Round>,
}

/// Cold start as the function does it with `MEMORY_RETURN=keep` (pre-warming
/// as `arena` says, and running the pipeline once on a few orders if
/// `warm_code`), then `rounds` invocations grouping `rows` orders by customer.
pub async fn run(
    rows: usize,
    arena: ArenaPrewarm,
    warm_code: bool,
    rounds: usize,
) -> Result<Trial, String> {
    allocator::apply(Policy::Keep)?;
    // The orders stand for the table: generated before cold start begins, so
    // they do not use up the pre-warmed pages (a real scan holds one page).
    let items = arrow::items(rows, (rows as u64 / 8).max(1), 7);
    shared::pool::build_global(1).map_err(|e| e.to_string())?;
    let env = [("TABLE_NAME", "orders"), ("REPORTS_TABLE", "reports")];
    let config = Config::from_env(&env).map_err(|e| e.to_string())?;
    // The first invocation arrives after init; the handler waits for an
    // unfinished pre-warm itself, but the trial measures the invocation alone.
    let (prewarm, prewarm_took) = match arena {
        ArenaPrewarm::Off => (None, None),
        ArenaPrewarm::Shipped(bytes) => {
            let started = arena::start(bytes, Policy::Keep).map_err(|e| e.to_string())?;
            let report = started
                .wait(Duration::from_secs(120))
                .await
                .ok_or("the pre-warm did not finish in 120 s")?;
            (Some(started), Some(report.took))
        }
        ArenaPrewarm::Forced(bytes) => {
            let report = std::thread::spawn(move || arena::prefault(bytes))
                .join()
                .map_err(|_| "the pre-warm thread panicked")?;
            (None, Some(report.took))
        }
    };
    let handler = Handler::new(MemoryStore::new(items, 1_000), config, 1, prewarm);
    if warm_code {
        arrow_worker::warm_up::run().map_err(|e| e.to_string())?;
    }
    let payload = serde_json::json!({"operation": "aggregate", "query": {"group_by": "customer"}});
    let mut results = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let event = lambda_runtime::LambdaEvent::new(payload.clone(), Default::default());
        let faults = shared::memory::minor_faults();
        let started = Instant::now();
        let answer = handler.handle(event).await.map_err(|e| e.error_message)?;
        let took = started.elapsed();
        std::hint::black_box(answer);
        results.push(Round {
            took,
            minor_faults: shared::memory::minor_faults().saturating_sub(faults),
        });
    }
    Ok(Trial {
        prewarm: prewarm_took,
        rounds: results,
    })
}

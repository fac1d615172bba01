//! Performance-lab probe: the real order-processor handler (a store that keeps
//! nothing instead of DynamoDB) driven through a traffic pattern, printing one
//! JSON line: RSS after invocations, records per second of handler time (the
//! lab's `memory` contract, `tools/lab/src/memory.rs`).
//!
//! `order-processor-memory POLICY CAPACITY PHASE...` (run by `cargo xtask lab`)
//! - POLICY: `template` applies `MEMORY_RETURN` as `shared::start` does (the
//!   template sets `prompt`); `library-defaults` leaves the allocator as shipped.
//! - CAPACITY: the bound of what the handler keeps between invocations, here
//!   its idempotency cache (`CACHE_CAPACITY`).
//! - PHASE: `INVOCATIONSxRECORDS@GAP_MS`, e.g. `10000x10@0` (a burst) or
//!   `300x1@100` (one order every 100 ms). Between invocations the process
//!   sleeps, as a Lambda sandbox idles between requests.
//!
//! The function's other settings come from the environment, as on Lambda
//! (`TABLE_NAME`, `DEAD_LETTER_QUEUE_URL`, `MEMORY_RETURN`); dead letters stay
//! in memory.

use order_processor::config::Config;
use order_processor::handler::Handler;
use order_processor_testkit::dead_letters::MemoryDeadLetters;
use order_processor_testkit::orders as sample;
use order_processor_testkit::store::MemoryOrders;
use shared::allocator::{self, Policy};
use shared::config::ProcessEnv;
use shared::invocation::Deadline;
use std::num::NonZeroUsize;
use std::time::{Duration, Instant};

/// What the lab's report says runs.
const HANDLER: &str = "The real handler (validation, idempotency cache, partial batch failures) with a \
     store that keeps nothing, on a multi-thread tokio runtime as in the function; each record a \
     distinct order";

/// Most RSS samples per phase without gaps (a burst is sampled evenly).
const SAMPLES_PER_BURST: u64 = 500;

struct Phase {
    invocations: u64,
    orders: u64,
    gap: Duration,
}

fn parse_phase(text: &str) -> Result<Phase, String> {
    let bad = || format!("phase {text:?}: expected INVOCATIONSxRECORDS@GAP_MS, e.g. 100x10@0");
    let (counts, gap) = text.split_once('@').ok_or_else(bad)?;
    let (invocations, orders) = counts.split_once('x').ok_or_else(bad)?;
    let number = |s: &str| s.parse::<u64>().map_err(|_| bad());
    Ok(Phase {
        invocations: number(invocations)?,
        orders: number(orders)?.clamp(1, 10),
        gap: Duration::from_millis(number(gap)?),
    })
}

lab_probes::declare_allocator!();

#[tokio::main]
async fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: order-processor-memory template|library-defaults CAPACITY PHASE...";
    let [policy, capacity, phases @ ..] = args.as_slice() else {
        return Err(usage.to_owned());
    };
    let capacity: NonZeroUsize = capacity.parse().map_err(|_| usage.to_owned())?;
    let settings = match policy.as_str() {
        "template" => {
            allocator::apply(Policy::from_env(&ProcessEnv).map_err(|e| e.to_string())?)?.to_string()
        }
        "library-defaults" => "library defaults".to_owned(),
        other => return Err(format!("unknown policy {other:?}")),
    };
    let phases = phases
        .iter()
        .map(|p| parse_phase(p))
        .collect::<Result<Vec<_>, _>>()?;
    let config = Config {
        cache_capacity: capacity,
        ..Config::from_env(&ProcessEnv).map_err(|e| e.to_string())?
    };
    let handler = Handler::new(
        MemoryOrders::accept_all(),
        MemoryDeadLetters::new(),
        &config,
    );

    let mut rss = Vec::new(); // [invocation, MiB]
    let (mut invocation, mut next_order, mut failed) = (0u64, 0u64, 0usize);
    let mut busy = Duration::ZERO;
    for phase in &phases {
        let every = if phase.gap.is_zero() {
            phase.invocations.div_ceil(SAMPLES_PER_BURST).max(1)
        } else {
            1
        };
        for i in 0..phase.invocations {
            if !phase.gap.is_zero() {
                std::thread::sleep(phase.gap);
            }
            let records = sample::records(next_order..next_order + phase.orders, sample::body);
            next_order += phase.orders;
            let started = Instant::now();
            let deadline = Deadline::at(Instant::now() + Duration::from_secs(10));
            let report = handler
                .process(&records, deadline)
                .await
                .map_err(|e| e.to_string())?;
            busy += started.elapsed();
            failed += report.failed().count();
            invocation += 1;
            if (i + 1) % every == 0 || i + 1 == phase.invocations {
                rss.push(serde_json::json!([
                    invocation,
                    shared::memory::snapshot().rss_bytes as f64 / f64::from(1 << 20)
                ]));
            }
        }
    }
    let peak = shared::memory::snapshot().peak_rss_bytes;
    println!(
        "{}",
        serde_json::json!({
            "handler": HANDLER,
            "allocator": allocator::name(),
            "policy": policy,
            "settings": settings,
            "invocations": invocation,
            "records": next_order,
            "failed": failed,
            "busy_seconds": busy.as_secs_f64(),
            "kept": handler.cache_len(),
            "peak_rss_mib": peak as f64 / f64::from(1 << 20),
            "rss_mib": rss,
        })
    );
    Ok(())
}

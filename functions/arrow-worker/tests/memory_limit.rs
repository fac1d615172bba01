//! The Arrow worker with its default arena under its memory size (the
//! template's `MemorySize`, the local stack's memory limit), aggregating tens
//! of thousands of orders, stays below its limit. Skipped, with a line that
//! says so, where limits are not enforced.

mod support;

use arrow_worker::query::MAX_LIMIT;
use local_stack::emulator::Invocation;
use serde_json::{Value, json};
use std::time::Instant;
use support::{LocalDynamoDb, assert_within_memory_limit, limits_enforced, mib, start};

fn answer(invocation: &Invocation) -> Value {
    invocation
        .json()
        .unwrap_or_else(|e| panic!("{e} (HTTP {})", invocation.status))
}

/// Orders in DynamoDB Local for the Arrow worker's aggregation.
const ARROW_ORDERS: u64 = 40_000;
/// Their customers: each one a group of the aggregation, all in its answer.
const ARROW_CUSTOMERS: u64 = 10_000;

/// The Arrow worker at the template's memory size with its default arena,
/// initialised ahead of traffic (provisioned concurrency), then one
/// aggregation by customer over [`ARROW_ORDERS`] orders, every group in the
/// answer; no out-of-memory kill and the peak below the limit. The shipped
/// mimalloc 2 would not reuse pre-faulted pages, so `PREWARM=auto` does not
/// pre-warm (`shared/src/arena.rs`); with mimalloc 3 it would, during init.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_arrow_worker_ahead_of_traffic_aggregates_within_its_memory() {
    if !limits_enforced() {
        return;
    }
    let began = Instant::now();
    let dynamodb = LocalDynamoDb::start().await;
    support::write_items(
        &dynamodb.server.client(),
        arrow_worker_testkit::orders::of_customers(ARROW_ORDERS, ARROW_CUSTOMERS),
    )
    .await;
    let written = began.elapsed();
    let mut env = dynamodb.env();
    // Initialised ahead of traffic: where the allocator keeps the pages, the
    // arena is pre-faulted during init and in memory with the aggregation.
    env.push(("AWS_LAMBDA_INITIALIZATION_TYPE", "provisioned-concurrency"));
    let emulator = start("arrow-worker", &env);
    let request = json!({
        "operation": "aggregate",
        "query": { "group_by": "customer", "limit": MAX_LIMIT },
    });
    let invoked = Instant::now();
    let answered = emulator.invoke(request.to_string()).expect("invoke");
    let took = invoked.elapsed();
    let body = answer(&answered);
    assert!(
        body.get("errorType").is_none(),
        "{body}\n{}",
        emulator.logs()
    );
    let memory_mb = support::function("arrow-worker").memory_mb;
    // The worker's default arena (`ARENA_MIB` unset) for its memory size.
    let arena = shared::arena::default_bytes(memory_mb.into());
    eprintln!(
        "arrow worker at {memory_mb} MB, default arena {:.0} MiB: {ARROW_ORDERS} orders \
         written in {:.1} s, aggregated by customer in {:.1} s ({} groups, {} pages, \
         prewarmed {}, waited {:.0} ms for it)",
        mib(arena as u64),
        written.as_secs_f64(),
        took.as_secs_f64(),
        body["groups_total"],
        body["run"]["pages"],
        body["run"]["prewarmed"],
        body["run"]["prewarm_wait_ms"].as_f64().unwrap_or_default(),
    );
    assert_eq!(body["rows"]["scanned"], ARROW_ORDERS, "{}", body["rows"]);
    assert_eq!(body["groups_total"], ARROW_CUSTOMERS);
    assert_eq!(
        body["groups"].as_array().map(Vec::len),
        Some(ARROW_CUSTOMERS as usize)
    );
    assert_eq!(
        body["run"]["prewarmed"], false,
        "mimalloc 2 ships: `auto` does not pre-warm where the pages would not be reused: {}",
        body["run"]
    );
    assert_within_memory_limit(&emulator, "arrow worker, pre-warm and aggregation");
}

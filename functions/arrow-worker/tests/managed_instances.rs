//! The Arrow worker on Lambda Managed Instances on the local stack, as
//! `cargo xtask run --managed-instances` runs it: rounds of more aggregations
//! over 15,000 orders at once than it serves, each answered correctly or
//! refused `Busy` by its row budget, none out of memory, the environment's
//! peak below its limit (skipped where limits are not enforced).

mod support;

use local_stack::emulator::OUT_OF_MEMORY;
use local_stack::pool::{Options, Pool};
use serde_json::{Value, json};
use std::time::Instant;
use support::{assert_pool_within_memory_limit, managed_pool, send_at_once};
use testkit::managed_instances::{managed, most_at_once, on_managed_instances};

/// The Arrow worker, and the orders it aggregates in DynamoDB Local, their
/// customers each a group of every answer. Fewer orders than `memory_limit`'s
/// 40,000: each aggregation scans them all, and DynamoDB Local's scans set
/// this test's time.
const ARROW: &str = "arrow-worker";
const ARROW_ORDERS: u64 = 15_000;
const ARROW_CUSTOMERS: u64 = 5_000;
/// Rounds of more aggregations at once than the environment serves.
const ROUNDS: usize = 2;

/// The Arrow worker on one Managed Instances environment (the template's
/// memory size and concurrency), [`ARROW_ORDERS`] orders in DynamoDB Local:
/// rounds of two more aggregations by customer at once than the environment
/// serves, each over every order. Each answer is the one a request alone
/// gets, or `Busy` (the environment's row budget, `MAX_ROWS`, refuses what
/// it cannot hold instead of allocating it); at least one is answered; no
/// invocation ends out of memory, the environment is never replaced, and its
/// cgroup's peak stays below its memory limit. Skipped where limits are not
/// enforced.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_large_aggregations_stay_within_the_environments_memory() {
    if !support::limits_enforced() {
        return;
    }
    let began = Instant::now();
    let template = on_managed_instances();
    let (function, managed) = managed(&template, ARROW);
    let dynamodb = support::LocalDynamoDb::start().await;
    support::write_items(
        &dynamodb.server.client(),
        arrow_worker_testkit::orders::of_customers(ARROW_ORDERS, ARROW_CUSTOMERS),
    )
    .await;
    let pool = managed_pool(&template, ARROW, &dynamodb.env(), None);
    let alone = aggregated_alone(&pool);
    let at_once = most_at_once(managed) + 2;
    let answers: Vec<Value> = (0..ROUNDS)
        .flat_map(|_| send_at_once(&pool, vec![(aggregation(), Options::default()); at_once]))
        .collect();
    let busy = busy_or_equal(&answers, &alone);
    eprintln!(
        "{ROUNDS} rounds of {at_once} aggregations of {ARROW_ORDERS} orders at once on \
         {ARROW} ({managed}, {} MB): {} answered, {busy} Busy; {:.1} s in all",
        function.memory_mb,
        answers.len() - busy,
        began.elapsed().as_secs_f64()
    );
    assert!(busy < answers.len(), "every request was refused Busy");
    let logs = pool.logs();
    assert!(!logs.contains(OUT_OF_MEMORY), "out of memory:\n{logs}");
    assert_eq!(pool.started(), 1, "one environment, never replaced");
    assert_pool_within_memory_limit(&pool, &format!("{ARROW} on Managed Instances"));
}

/// One aggregation by customer over every order, every group in the answer.
fn aggregation() -> String {
    json!({
        "operation": "aggregate",
        "query": { "group_by": "customer", "limit": arrow_worker::query::MAX_LIMIT },
    })
    .to_string()
}

/// The answer of [`aggregation`] alone in `pool`, checked against the orders
/// written, without how its invocation went (`run`).
fn aggregated_alone(pool: &Pool) -> Value {
    let answer = send_at_once(pool, vec![(aggregation(), Options::default())]).remove(0);
    let groups = answer["groups"].as_array().map(Vec::len);
    assert!(
        answer["rows"]["scanned"] == ARROW_ORDERS
            && groups == Some(ARROW_CUSTOMERS as usize)
            && answer["groups_total"] == ARROW_CUSTOMERS,
        "not an aggregate of {ARROW_ORDERS} orders by {ARROW_CUSTOMERS} customers: {}",
        summary(&answer)
    );
    without_run(answer)
}

/// How many of `answers` are `Busy`; each of the others must be `alone`.
fn busy_or_equal(answers: &[Value], alone: &Value) -> usize {
    let busy = answers.iter().filter(|a| a["errorType"] == "Busy").count();
    for answer in answers.iter().filter(|a| a["errorType"] != "Busy") {
        assert!(
            without_run(answer.clone()) == *alone,
            "neither the answer alone nor Busy: {}",
            summary(answer)
        );
    }
    busy
}

/// `answer` without `run` (timings and pages: one invocation's own).
fn without_run(mut answer: Value) -> Value {
    if let Some(fields) = answer.as_object_mut() {
        fields.remove("run");
    }
    answer
}

/// An answer in a line: its error, or its counts.
fn summary(answer: &Value) -> String {
    match answer.get("errorType") {
        Some(kind) => format!("{kind}: {}", answer["errorMessage"]),
        None => format!(
            "rows {}, {} groups of {}",
            answer["rows"],
            answer["groups"].as_array().map_or(0, Vec::len),
            answer["groups_total"]
        ),
    }
}

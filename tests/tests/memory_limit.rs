//! Functions under the local stack's memory limit (the template's
//! `MemorySize`):
//!
//! - a function past its limit: the invocation ends as Lambda reports it
//!   (`Runtime.OutOfMemory`, logged as out of memory), and the next invocation
//!   is a cold start in a fresh process;
//! - the order processor with a leak, fed by the queue: the batch it is killed
//!   in comes back whole, and nothing is lost;
//! - the Arrow worker with its default arena, pre-warmed, then aggregating
//!   tens of thousands of orders, stays below its limit.
//!
//! Each is skipped, with a line that says so, where limits are not enforced.

use arrow_worker::query::MAX_LIMIT;
use e2e::{
    LocalDynamoDb, assert_reconciled, assert_within_memory_limit, limits_enforced, lock, mib,
    order_source, servers, servers_env, start, start_as, stored_hashes, template, write_orders,
};
use local_stack::elasticmq::depth;
use local_stack::emulator::{Emulator, Invocation, OUT_OF_MEMORY};
use local_stack::event_source::EventSource;
use local_stack::template::Function;
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::sync::Mutex;
use std::time::{Duration, Instant};

fn answer(invocation: &Invocation) -> Value {
    invocation
        .json()
        .unwrap_or_else(|e| panic!("{e} (HTTP {})", invocation.status))
}

#[test]
fn past_its_memory_size_a_function_is_out_of_memory_then_cold_starts() {
    if !limits_enforced() {
        return;
    }
    let function = Function {
        logical_id: "LeakyFunction".into(),
        binary: "leaky_function".into(),
        memory_mb: 128,
        timeout_s: 10,
        env: Vec::new(),
        reserved_concurrency: None,
    };
    let rie = local_stack::tools::emulator().expect("emulator");
    let emulator = Emulator::start(
        &rie,
        env!("CARGO_BIN_EXE_leaky_function").as_ref(),
        &function,
        &[],
        &e2e::scratch("memory-limit.log"),
    )
    .expect("start");
    let invoke = |mib: u64| emulator.invoke(json!({ "mib": mib }).to_string());

    let first = invoke(16).expect("invoke 16 MiB");
    assert_eq!(answer(&first), json!({ "invocation": 1 }), "{}", first.body);

    let oom = invoke(200).expect("invoke 200 MiB");
    let body = answer(&oom);
    assert_eq!(oom.status, 200, "a function error, as on Lambda: {body}");
    assert_eq!(body["errorType"], "Runtime.OutOfMemory", "{body}");
    let message = body["errorMessage"].as_str().unwrap_or_default();
    assert!(message.starts_with("RequestId: "), "{message}");
    assert!(
        message.ends_with(" Error: Runtime exited with error: signal: killed"),
        "{message}"
    );
    let logs = emulator.logs();
    let out_of_memory: Vec<&str> = logs
        .lines()
        .filter(|line| line.contains("Runtime.OutOfMemory"))
        .collect();
    assert_eq!(out_of_memory.len(), 1, "one out-of-memory line:\n{logs}");
    assert!(out_of_memory[0].contains(message), "{}", out_of_memory[0]);

    let after = invoke(16).expect("invoke 16 MiB after");
    assert_eq!(
        answer(&after),
        json!({ "invocation": 1 }),
        "a fresh process (cold start):\n{}",
        emulator.logs()
    );
}

/// Orders sent to the leaking order processor.
const LEAK_ORDERS: u64 = 60;
/// MiB it keeps per invocation: at 256 MB two batches fit (about 220 MiB with
/// the process's own) and the third is far past the limit, so the kernel
/// kills it at once. A step that lands just at the limit (48 MiB: the fifth
/// batch) can instead reclaim file pages for a long time and time the
/// invocation out, which is not what this test is about (the figures are
/// printed).
const LEAK_MIB: &str = "100";
/// The local visibility timeout: how soon a failed batch comes back.
const LEAK_VISIBILITY_S: u32 = 2;

/// One invocation as the event source mapping made it.
struct Batch {
    /// The records' message ids, their `ApproximateReceiveCount` and order ids.
    records: Vec<(String, u64, String)>,
    /// The answer was `Runtime.OutOfMemory`.
    out_of_memory: bool,
    /// The answer, for messages.
    answer: String,
}

impl Batch {
    fn of(event: &str, answer: &Invocation) -> Self {
        let event: Value = serde_json::from_str(event).expect("event JSON");
        let records = event["Records"]
            .as_array()
            .expect("records")
            .iter()
            .map(|r| {
                let order = order_processor::order::parse(r["body"].as_str().unwrap_or_default())
                    .expect("a sample order");
                let receives = r["attributes"]["ApproximateReceiveCount"]
                    .as_str()
                    .and_then(|n| n.parse().ok())
                    .expect("ApproximateReceiveCount");
                (
                    r["messageId"].as_str().unwrap_or_default().to_owned(),
                    receives,
                    order.order.order_id,
                )
            })
            .collect();
        let out_of_memory = answer
            .json()
            .is_ok_and(|json| json["errorType"] == OUT_OF_MEMORY);
        Self {
            records,
            out_of_memory,
            answer: answer.body.chars().take(200).collect(),
        }
    }
}

/// The real order processor's handler, with a leak of [`LEAK_MIB`] per
/// invocation (`leaking_order_processor`), at the template's memory size, fed
/// by the queue through the local event source mapping: the invocation past
/// the limit answers `Runtime.OutOfMemory`, the mapping fails its whole batch
/// (nothing deleted), every message of it is received again after the
/// visibility timeout and stored then; the orders of the batches before the
/// kill are in the table at the kill; in the end every order is stored once,
/// nothing is dead-lettered and the queue is empty.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leaking_order_processor_is_killed_at_its_limit_and_its_batch_comes_back() {
    if !limits_enforced() {
        return;
    }
    let template = template();
    let source = order_source(&template);
    let (dynamodb, queues) = servers(&template, None, LEAK_VISIBILITY_S).await;
    let (orders, dead_letters, _) = queues.with_dead_letters(&source);
    let bodies: Vec<String> = (0..LEAK_ORDERS)
        .map(order_processor_testkit::orders::body)
        .collect();
    queues.send_all(orders, &bodies).await;
    let mut env = servers_env(&dynamodb, &queues);
    env.push(("LEAK_MIB", LEAK_MIB));
    let emulator = start_as(
        &template,
        "order-processor",
        env!("CARGO_BIN_EXE_leaking_order_processor").as_ref(),
        &env,
    );
    let mapping = EventSource::new(&queues.client, orders, &source);
    let batches: Mutex<Vec<Batch>> = Mutex::default();
    let invoke = |event: &str| {
        let answer = emulator.invoke(event)?;
        lock(&batches).push(Batch::of(event, &answer));
        Ok(answer)
    };
    let table = dynamodb.server.client();
    // The orders of the batches answered before the first kill, and whether
    // the table held each of them at that moment.
    let mut before_kill: Option<(BTreeSet<String>, BTreeSet<String>)> = None;
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        assert!(Instant::now() < deadline, "not drained in time");
        let delivery = mapping
            .poll_once(Duration::from_secs(1), &invoke)
            .await
            .unwrap_or_else(|e| panic!("{e}\n{}", emulator.logs()));
        if delivery.received == 0 {
            if depth(&queues.client, &orders.url).await.expect("depth") == 0 {
                break;
            }
            continue;
        }
        let (killed, answer, earlier) = last_and_earlier(&lock(&batches));
        if killed {
            assert!(
                delivery.whole_batch_failed
                    && delivery.deleted == 0
                    && delivery.returned == delivery.received,
                "a killed invocation fails its whole batch: {delivery:?}"
            );
            if before_kill.is_none() {
                let stored = stored_hashes(&table, "OrdersTable").await;
                before_kill = Some((earlier, stored.into_keys().collect()));
            }
        } else {
            assert!(
                !delivery.whole_batch_failed && delivery.returned == 0,
                "a batch the function answered is stored whole: {delivery:?} {answer}"
            );
        }
    }

    let batches = std::mem::take(&mut *lock(&batches));
    let kills = assert_killed_for_memory(&emulator, &batches);
    let (earlier, stored) = before_kill.expect("the table was read at the first kill");
    let missing: Vec<&String> = earlier.difference(&stored).collect();
    assert!(
        missing.is_empty(),
        "orders answered before the kill, not in the table at the kill: {missing:?}"
    );
    assert_killed_batches_came_back(&batches, &kills);
    assert_reconciled(&table, &queues, orders, dead_letters, 0..LEAK_ORDERS, &[]).await;
}

/// Whether the last invocation was killed for memory, its answer, and the
/// orders of the invocations before it.
fn last_and_earlier(batches: &[Batch]) -> (bool, String, BTreeSet<String>) {
    let (last, earlier) = batches.split_last().expect("an invocation");
    let earlier: BTreeSet<String> = earlier
        .iter()
        .flat_map(|b| b.records.iter().map(|(_, _, order)| order.clone()))
        .collect();
    (last.out_of_memory, last.answer.clone(), earlier)
}

/// The invocations killed for memory (at least one, not the first), each
/// logged once as out of memory and counted by the cgroup where it counts.
fn assert_killed_for_memory(emulator: &Emulator, batches: &[Batch]) -> Vec<usize> {
    let kills: Vec<usize> = (0..batches.len())
        .filter(|i| batches[*i].out_of_memory)
        .collect();
    eprintln!(
        "{LEAK_ORDERS} orders, {LEAK_MIB} MiB kept per invocation, limit {:.0} MiB: \
         {} invocations, killed for memory at invocations {kills:?}, peak {:.1} MiB",
        mib(emulator.memory_limit_bytes().unwrap_or_default()),
        batches.len(),
        mib(emulator.peak_memory_bytes().unwrap_or_default()),
    );
    let first = *kills
        .first()
        .unwrap_or_else(|| panic!("no invocation was killed for memory:\n{}", emulator.logs()));
    assert!(first > 0, "the first batch already did not fit");
    let logs = emulator.logs();
    assert_eq!(
        logs.lines().filter(|l| l.contains(OUT_OF_MEMORY)).count(),
        kills.len(),
        "one out-of-memory line per kill:\n{logs}"
    );
    if let Some(counted) = emulator.oom_kills() {
        assert_eq!(counted, kills.len() as u64, "the cgroup's count");
    }
    kills
}

/// Every message of a killed invocation was received again later.
fn assert_killed_batches_came_back(batches: &[Batch], kills: &[usize]) {
    for &k in kills {
        for (id, receives, order) in &batches[k].records {
            let again = batches[k + 1..]
                .iter()
                .flat_map(|b| &b.records)
                .find(|(later, _, _)| later == id);
            assert!(
                again.is_some_and(|(_, later, _)| later > receives),
                "{order} (message {id}) of the killed invocation {k} was not received again"
            );
        }
    }
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
    write_orders(&dynamodb, ARROW_ORDERS, ARROW_CUSTOMERS).await;
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
    let memory_mb = e2e::function("arrow-worker").memory_mb;
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

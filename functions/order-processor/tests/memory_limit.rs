//! The order processor with a leak under its memory size (the template's
//! `MemorySize`, the local stack's memory limit), fed by the queue: the batch
//! it is killed in comes back whole, and nothing is lost. Skipped, with a
//! line that says so, where limits are not enforced.

mod support;

use local_stack::elasticmq::depth;
use local_stack::emulator::{Emulator, Invocation, OUT_OF_MEMORY};
use local_stack::event_source::EventSource;
use serde_json::Value;
use std::collections::BTreeSet;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use support::{
    assert_reconciled, limits_enforced, lock, mib, order_source, servers, servers_env, start_as,
    stored_hashes, template,
};

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
        &leaking_order_processor(),
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

/// The build of the example `leaking_order_processor` (`cargo test` builds
/// a package's examples with its tests).
fn leaking_order_processor() -> std::path::PathBuf {
    let order_processor = support::binary("order-processor");
    let path = order_processor
        .with_file_name("examples")
        .join("leaking_order_processor");
    assert!(path.is_file(), "no example build {}", path.display());
    path
}

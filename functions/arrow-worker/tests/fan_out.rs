//! The fan-out at scale, through the template's own state machine on the local
//! Step Functions engine: 64,000 orders of 16,000 customers (items in the
//! table's shared schema, what the order processor's store writes)
//! aggregated by customer over 16 and over 64 segments give exactly the
//! answer of one function scanning the whole table.
//! Inline partials of that fan-out would pass Step Functions' 256 KiB per
//! state many times over; stored partials keep only references in the states,
//! and the answer (over 6 MB) comes back as an S3 key. A state that really
//! passes 256 KiB still fails the execution, and says why.
//!
//! The suite runs this file alone: its one function scans 64,000 orders in
//! DynamoDB Local within its Timeout, as on Lambda, and beside another test
//! binary DynamoDB Local served the scan too slowly (`DeadlineTooShort`).

mod support;

use arrow_worker::columns::Item;
use aws_sdk_dynamodb::Client as DynamoDb;
use aws_sdk_s3::Client as S3;
use local_stack::emulator::Invocation;
use local_stack::jvm::Compiler;
use local_stack::lambda_api::LambdaApi;
use local_stack::pool::Pool;
use serde_json::{Value, json};
use shared::orders::attr;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Instant;
use support::{DataDir, LocalAnalytics, LocalDynamoDb, sample_order, write_items};
use tokio::task::JoinHandle;

const ORDERS: u64 = 64_000;
const CUSTOMERS: u64 = 16_000;

/// Four orders per customer, in consecutive currencies: each customer pays in
/// all four sample currencies, about 500 bytes of answer per customer (8 MB
/// in all). Written 25 to a `BatchWriteItem` (`support::write_items`): the
/// order processor's conditional `PutItem`, one request per order, would
/// take minutes. A batch write replaces an item of the same key where the
/// store's would refuse it, so the ids are checked distinct (and the full
/// scan finds every order).
async fn write_orders(client: &DynamoDb) {
    let started = Instant::now();
    let items: Vec<Item> = (0..ORDERS)
        .map(|n| sample_order(n, &format!("cust-{:06}", n / (ORDERS / CUSTOMERS))))
        .collect();
    let ids: HashSet<&str> = items
        .iter()
        .filter_map(|item| item.get(attr::ORDER_ID)?.as_s().ok())
        .map(String::as_str)
        .collect();
    assert_eq!(ids.len() as u64, ORDERS, "one order per id");
    write_items(client, items).await;
    eprintln!(
        "{ORDERS} orders of {CUSTOMERS} customers written in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

/// The Arrow worker behind a local Invoke API, with DynamoDB and S3.
struct Stack {
    ddb: LocalDynamoDb,
    analytics: LocalAnalytics,
    pool: Arc<Pool>,
    _api: LambdaApi,
}

/// The worker (two environments) over `ddb`, behind the Invoke API the
/// local state machine calls.
fn stack(ddb: LocalDynamoDb) -> Stack {
    let mut analytics = LocalAnalytics::new();
    let mut env = ddb.env();
    env.extend(analytics.env());
    let (pool, api) = support::worker_behind_invoke_api(&env);
    analytics.start(&api.endpoint());
    Stack {
        ddb,
        analytics,
        pool,
        _api: api,
    }
}

impl Stack {
    fn s3(&self) -> S3 {
        let config = local_stack::local_aws::sdk_config(&self.analytics.server().endpoint());
        let config = aws_sdk_s3::config::Builder::from(&config)
            .force_path_style(true)
            .build();
        S3::from_conf(config)
    }

    fn bucket(&self) -> &str {
        &self.analytics.buckets()[0]
    }

    /// The answer `body` carries, or the one stored under its `answer_key`.
    async fn answer(&self, body: &Value) -> Value {
        let Some(key) = body["answer_key"].as_str() else {
            return body.clone();
        };
        let object = self
            .s3()
            .get_object()
            .bucket(self.bucket())
            .key(key)
            .send()
            .await
            .unwrap_or_else(|e| panic!("get {key}: {e:?}"));
        let bytes = object.body.collect().await.expect("body").into_bytes();
        assert_eq!(body["answer_bytes"], bytes.len(), "{key}");
        serde_json::from_slice(&bytes).expect("a stored answer")
    }

    /// Bytes of the partials stored under `partials/<run>/`.
    async fn partial_sizes(&self, run: &str) -> Vec<i64> {
        let listed = self
            .s3()
            .list_objects_v2()
            .bucket(self.bucket())
            .prefix(format!("partials/{run}/"))
            .send()
            .await
            .expect("list partials");
        listed
            .contents()
            .iter()
            .map(|o| o.size().unwrap_or(0))
            .collect()
    }
}

/// The fan-outs run while the one function scans the whole table, in an
/// environment of its own: that scan (one segment, page after page) is the
/// longest part, and each answer is compared with it once it is there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_state_machine_fans_out_over_16_and_64_segments_to_one_scans_answer() {
    // In a database folder, not in memory: DynamoDB Local pages a whole-table
    // scan about twice as fast from one.
    let data = DataDir::new("fan-out");
    let ddb = LocalDynamoDb::start_persistent(data.path(), Compiler::Peak).await;
    let client = ddb.server.client();
    // The worker, moto and the Invoke API start while the orders are written.
    let stack = tokio::task::spawn_blocking(move || stack(ddb));
    write_orders(&client).await;
    let stack = stack.await.expect("the stack");
    let query = json!({"group_by": "customer", "limit": CUSTOMERS});

    let one_function = one_function(&stack, &query);
    let mut fan_outs = Vec::new();
    for total_segments in [16_u32, 64] {
        fan_outs.push((
            total_segments,
            fan_out(&stack, &query, total_segments).await,
        ));
    }
    // The default limit (1,000 customers): about 0.5 MB, under Lambda's
    // response limit but over what a state holds: stored too, not refused
    // by Step Functions.
    let execution = stack.analytics.run(
        support::REPORT,
        &json!({"query": {"group_by": "customer"}, "total_segments": 16}),
    );
    assert!(execution.succeeded(), "{execution:?}");
    let output = execution.output.clone().expect("output");
    let first_customers = stack.answer(&output).await;

    let reference = one_functions_answer(&stack, one_function).await;
    for (total_segments, merged) in fan_outs {
        assert_eq!(
            merged["groups"], reference["groups"],
            "{total_segments} segments"
        );
        assert_eq!(
            merged["rows"], reference["rows"],
            "{total_segments} segments"
        );
        assert_eq!(merged["groups_total"], reference["groups_total"]);
    }
    let first: Vec<Value> = reference["groups"].as_array().expect("groups")[..1_000].to_vec();
    assert_eq!(first_customers["groups"], json!(first));
    drop(stack.ddb);
}

/// The one function's answer to `query` over the whole table, started now:
/// the worker in an environment of its own, outside the pool the state
/// machine's tasks run in. Its answer, and how long it took.
fn one_function(stack: &Stack, query: &Value) -> JoinHandle<(Invocation, f64)> {
    let mut env = stack.ddb.env();
    env.extend(stack.analytics.env());
    let single = support::start("arrow-worker", &env);
    let request = json!({"operation": "aggregate", "query": query}).to_string();
    tokio::task::spawn_blocking(move || {
        let started = Instant::now();
        let answer = single.invoke(request).expect("invoke");
        (answer, started.elapsed().as_secs_f64())
    })
}

/// The answer of [`one_function`], once it is there: over 6 MB, so stored
/// in S3, every customer's group, every order matched.
async fn one_functions_answer(stack: &Stack, one_function: JoinHandle<(Invocation, f64)>) -> Value {
    let (one, seconds) = one_function.await.expect("the one function's scan");
    assert_eq!(one.status, 200, "{}", one.body);
    let one = one.json().expect("JSON");
    assert!(one["answer_key"].is_string(), "over 6 MB: an S3 key, {one}");
    let reference = stack.answer(&one).await;
    eprintln!("one function over the whole table: {seconds:.1} s");
    let groups = reference["groups"].as_array().expect("groups").len();
    assert_eq!(groups as u64, CUSTOMERS);
    assert_eq!(reference["rows"]["matched"], ORDERS);
    reference
}

/// The state machine's answer to `query` over `total_segments` (stored in
/// S3), its partials stored too, one per segment, together past what a state
/// may hold.
async fn fan_out(stack: &Stack, query: &Value, total_segments: u32) -> Value {
    let started = Instant::now();
    let run = format!("fan-out-{total_segments}");
    let client = stack.analytics.client();
    let arn = stack.analytics.state_machine_arn(support::REPORT);
    let input = json!({"query": query, "total_segments": total_segments});
    let started_arn = client
        .start_execution(arn, &input, Some(&run))
        .unwrap_or_else(|e| panic!("{e}"));
    let execution = client
        .wait(&started_arn, std::time::Duration::from_secs(600))
        .unwrap_or_else(|e| panic!("{e}"));
    let seconds = started.elapsed().as_secs_f64();
    assert!(execution.succeeded(), "{total_segments}: {execution:?}");
    let output = execution.output.clone().expect("output");
    assert!(output["answer_key"].is_string(), "{output}");
    let merged = stack.answer(&output).await;

    let sizes = stack.partial_sizes(&run).await;
    assert_eq!(sizes.len(), total_segments as usize);
    let stored: i64 = sizes.iter().sum();
    // Each segment holds about a quarter of the customers' groups, or all
    // of them at 16: inline, Step Functions would refuse the Map's result.
    assert!(stored > 262_144 * 4, "{stored} bytes of partials");
    eprintln!(
        "fan-out over {total_segments} segments: {seconds:.1} s, \
         {:.0} KiB per segment stored in S3 ({:.1} MiB in all), answer {} bytes",
        stored as f64 / total_segments as f64 / 1024.0,
        stored as f64 / (1 << 20) as f64,
        output["answer_bytes"]
    );
    merged
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_state_past_256_kib_fails_the_execution_and_says_why() {
    let stack = stack(LocalDynamoDb::start().await);
    // The input is within StartExecution's limit; the first state adds the
    // segment list to it and passes 256 KiB.
    let padding = "9".repeat(255 * 1024);
    let execution = stack.analytics.run(
        support::REPORT,
        &json!({
            "query": {"group_by": "customer", "from": padding},
            "total_segments": 1_000,
        }),
    );
    assert_eq!(execution.status, "FAILED", "{execution:?}");
    assert_eq!(execution.error.as_deref(), Some("States.DataLimitExceeded"));
    let cause = execution.cause.clone().unwrap_or_default();
    assert!(cause.contains("ListSegments"), "{cause}");
    assert_eq!(stack.pool.started(), 0, "no segment ran");
}

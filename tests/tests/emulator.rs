//! The real function binaries under the Lambda runtime interface emulator, with
//! the memory size, timeout and environment `template.yaml` declares: every
//! sample event answered as its expectation says. (The suite also runs this
//! file on a scratch copy's `sam build`: see `xtask/src/user_changes.rs`.)

use aws_sdk_dynamodb::types::AttributeValue;
use e2e::{LocalDynamoDb, functions, init_duration_ms, start};
use local_stack::events::Sample;
use local_stack::expectations::{self, Context, Report};
use serde_json::Value;
use shared::orders::attr;
use std::collections::{BTreeMap, HashMap};

/// A stored item.
type Item = HashMap<String, AttributeValue>;

/// Every sample event of every function, its answer checked against the
/// expectation beside it ([`expectations::check`]), then where the suite
/// knows more ([`check_more`]); after SQS batches of orders, the orders table
/// holds exactly the orders their expectations say.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_sample_event_is_answered_by_its_function() {
    let names = functions();
    let entries = std::fs::read_dir(e2e::workspace_root().join("events")).expect("events/");
    for dir in entries.filter_map(Result::ok).filter(|e| e.path().is_dir()) {
        let dir = dir.file_name().to_string_lossy().into_owned();
        assert!(names.contains(&dir), "events/{dir} names no function");
    }
    // Every function of the template with its samples, those with reports
    // last: they report on the orders the others stored.
    let mut all: Vec<(String, Vec<Sample>)> = names
        .into_iter()
        .map(|name| {
            let samples = local_stack::events::samples(&name).unwrap_or_else(|e| panic!("{e}"));
            assert!(!samples.is_empty(), "events/{name}/ has no sample event");
            (name.clone(), invoked_directly(&name, samples))
        })
        .collect();
    all.sort_by_key(|(_, samples)| samples.iter().any(|s| s.expect.report.is_some()));
    let dynamodb = LocalDynamoDb::start().await;
    // The orders stored so far, which reports cover.
    let mut written = Vec::new();
    for (name, samples) in &all {
        let emulator = start(name, &dynamodb.env());
        for sample in samples {
            let file = sample.file_name();
            let answer = emulator.invoke(&sample.text).expect("invoke");
            assert_eq!(answer.status, 200, "{name} {file}: {}", answer.body);
            let body = answer.json().expect("JSON answer");
            let logs = emulator.logs();
            // No ElasticMQ here: the dead-letter queue cannot be reached, so
            // invalid records are reported failed.
            let context = Context {
                stored_orders: written.len(),
                dead_letter_queue: false,
                output: &logs,
            };
            if let Err(e) = expectations::check(&sample.expect, &sample.event, &body, &context) {
                panic!("{name} {file}: {e}");
            }
            let inner = expectations::answer_json(&sample.expect, &body).expect("checked");
            check_more(name, sample, &inner, &written);
        }
        if samples.iter().any(|s| s.expect.invalid_records.is_some()) {
            written = stored_orders(name, &dynamodb).await;
        }
        let logs = emulator.logs();
        match init_duration_ms(&logs) {
            Some(ms) => eprintln!("cold start of {name} under the emulator: init {ms:.1} ms"),
            None => panic!("{name}: the emulator reported no init duration:\n{logs}"),
        }
    }
}

/// The samples of `name` that are its events: not those that are a state
/// machine's input (`state_machine` in their expectation: `cargo xtask run`
/// runs them through it), each skipped with a line.
fn invoked_directly(name: &str, samples: Vec<Sample>) -> Vec<Sample> {
    samples
        .into_iter()
        .filter(|sample| match sample.state_machine() {
            Some(machine) => {
                eprintln!(
                    "skipped {name} {}: the input of state machine {machine}, not an event of the function",
                    sample.file_name()
                );
                false
            }
            None => true,
        })
        .collect()
}

/// The orders in the tables after the SQS batch samples of `name`: exactly
/// the orders their expectations leave stored (without a dead-letter
/// queue); every order item of every table, in the orders' shared schema
/// (`shared::orders::attr`), sorted by id.
async fn stored_orders(name: &str, dynamodb: &LocalDynamoDb) -> Vec<Item> {
    let client = dynamodb.server.client();
    let tables = client.list_tables().send().await.expect("ListTables");
    let keys = [
        attr::ORDER_ID,
        attr::CUSTOMER_ID,
        attr::CURRENCY,
        attr::CREATED_AT_MS,
        attr::TOTAL_CENTS,
    ];
    let mut orders = Vec::new();
    for table in tables.table_names() {
        let items = e2e::scan(&client, table).await.into_iter();
        orders.extend(items.filter(|item| keys.iter().all(|key| item.contains_key(*key))));
    }
    orders.sort_by_key(|o| text(o, attr::ORDER_ID));
    let ids: Vec<String> = orders.iter().map(|o| text(o, attr::ORDER_ID)).collect();
    let expected =
        local_stack::events::stored_orders(name, false).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        ids, expected,
        "the orders stored after the samples of {name}"
    );
    orders
}

/// The text attribute `key` of `item` (a number's digits too).
fn text(item: &Item, key: &str) -> String {
    match item.get(key) {
        Some(AttributeValue::S(s) | AttributeValue::N(s)) => s.clone(),
        other => panic!("{key} is {other:?}"),
    }
}

/// The number attribute `key` of `item`.
fn number<T: std::str::FromStr>(item: &Item, key: &str) -> T {
    text(item, key)
        .parse()
        .unwrap_or_else(|_| panic!("{key} is not a number"))
}

/// Per group of `group_by` ("customer", "day" or "currency") and currency: the
/// count and the sum of `total_cents` of `orders`, computed without Arrow.
fn reference_groups<'a>(
    orders: impl Iterator<Item = &'a Item>,
    group_by: &str,
) -> BTreeMap<(String, String), (u64, u64)> {
    let mut groups = BTreeMap::new();
    for o in orders {
        let key = match group_by {
            "customer" => text(o, attr::CUSTOMER_ID),
            "currency" => text(o, attr::CURRENCY),
            "day" => utc_day(number(o, attr::CREATED_AT_MS)),
            other => panic!("unknown group_by {other}"),
        };
        let entry = groups
            .entry((key, text(o, attr::CURRENCY)))
            .or_insert((0, 0));
        entry.0 += 1;
        entry.1 += number::<u64>(o, attr::TOTAL_CENTS);
    }
    groups
}

/// `YYYY-MM-DD` of a time in milliseconds since the epoch, in UTC.
fn utc_day(ms: i64) -> String {
    let at = time::OffsetDateTime::from_unix_timestamp(ms.div_euclid(1_000)).expect("in range");
    at.date().to_string()
}

/// What the suite checks of `answer` (the JSON of an HTTP answer's body) to
/// `sample` of `name` beyond its expectation, knowing the machine and the
/// stored orders: a function that reports its workers uses the vCPUs of its
/// memory size, capped by this machine; no on-demand cold start pre-warms; a
/// report's groups are what the stored orders `written` give without Arrow.
fn check_more(name: &str, sample: &Sample, answer: &Value, written: &[Item]) {
    if let Some(workers) = answer.get("workers") {
        let memory_mb = u64::from(e2e::function(name).memory_mb);
        let share = shared::vcpus::lambda_share(memory_mb).expect("a memory size with a share");
        let available = std::thread::available_parallelism().map_or(1, usize::from);
        assert_eq!(*workers, Value::from(share.min(available)), "{answer}");
        assert!(answer["duration_ms"].as_f64().is_some(), "{answer}");
        assert!(
            answer["memory"]["rss_bytes"].as_u64().unwrap_or(0) > 0,
            "{answer}"
        );
    }
    // The local stack's environments start on demand, as Lambda's without
    // provisioned concurrency.
    if let Some(prewarmed) = answer["run"].get("prewarmed") {
        assert_eq!(*prewarmed, false, "{answer}");
    }
    if let Some(report) = sample.expect.report {
        check_report_groups(report, &sample.event, answer, written);
    }
}

/// The groups of a report are the reference of `written` (all of them, or
/// with `day_only` those of the event's `day`), which is not empty.
fn check_report_groups(report: Report, event: &Value, answer: &Value, written: &[Item]) {
    let day = match report {
        Report::AllStoredOrders => None,
        Report::DayOnly => Some(event["day"].as_str().expect("the event's day")),
    };
    let matched = written
        .iter()
        .filter(|o| day.is_none_or(|d| utc_day(number(o, attr::CREATED_AT_MS)) == d));
    let group_by = answer["query"]["group_by"]
        .as_str()
        .expect("query.group_by");
    let expected = reference_groups(matched, group_by);
    // Without a function that stores orders in the template, a report has
    // none to report: an empty one is right then, and only then.
    assert_eq!(
        expected.is_empty(),
        written.is_empty(),
        "a report on no order, orders stored: {answer}"
    );
    let reported: BTreeMap<(String, String), (u64, u64)> = answer["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .flat_map(|g| {
            let key = g["key"].as_str().expect("key");
            g["money"].as_array().expect("money").iter().map(move |m| {
                let currency = m["currency"].as_str().expect("currency");
                let count = m["count"].as_u64().expect("count");
                let sum = m["total_cents"]["sum"].as_u64().expect("sum");
                ((key.to_owned(), currency.to_owned()), (count, sum))
            })
        })
        .collect();
    assert_eq!(reported, expected, "{answer}");
    let matched: u64 = expected.values().map(|(count, _)| count).sum();
    assert_eq!(answer["rows"]["matched"], matched, "{answer}");
}

//! What the order processor's end-to-end flows share, on top of the generic
//! harness (`testkit`, re-exported): sample orders as SQS records and
//! bodies, what the table and the dead-letter queue must hold after them.
//! Each test binary uses part of it.
#![allow(dead_code)]

pub use testkit::*;

use local_stack::elasticmq::{LocalQueue, depth, take_all};
use local_stack::template::{SqsSource, Template};

/// SQS records (standard queue) carrying the sample orders `range`, message
/// ids `msg-N`.
pub fn sample_records(range: std::ops::Range<u64>) -> Vec<aws_lambda_events::sqs::SqsMessage> {
    order_processor_testkit::orders::records(range, order_processor_testkit::orders::body)
}

/// Every item of a local table as `order_id -> content_hash`; each item's
/// hash must be of the current `hash_version`.
pub async fn stored_hashes(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
) -> std::collections::BTreeMap<String, String> {
    use aws_sdk_dynamodb::types::AttributeValue;
    let mut items = std::collections::BTreeMap::new();
    for item in scan(client, table).await {
        let text = |key: &str| match item.get(key) {
            Some(AttributeValue::S(s)) => s.clone(),
            other => panic!("{key} is {other:?}"),
        };
        let version = order_processor::order::content_hash::HASH_VERSION.to_string();
        assert_eq!(
            item.get("hash_version"),
            Some(&AttributeValue::N(version)),
            "{}",
            text("order_id")
        );
        let previous = items.insert(text("order_id"), text("content_hash"));
        assert!(previous.is_none(), "a scan returned an order twice");
    }
    items
}

/// What the table must hold after the sample orders `range` were processed.
pub fn expected_hashes(range: std::ops::Range<u64>) -> std::collections::BTreeMap<String, String> {
    range
        .map(|n| {
            let valid = order_processor::order::validate(order_processor_testkit::orders::order(n))
                .unwrap_or_else(|e| panic!("sample {n}: {e}"));
            (valid.order.order_id.clone(), valid.hash_hex())
        })
        .collect()
}

/// Bodies the order processor must refuse, six per round, each for another
/// reason (a wrong total, an unknown currency, an unknown field, no items,
/// truncated JSON, a body over the 64 KiB limit), all distinct (at most 100
/// rounds).
pub fn invalid_bodies(rounds: u64) -> Vec<String> {
    use serde_json::Value;
    assert!(
        rounds <= 100,
        "at most 100 rounds of distinct invalid bodies"
    );
    let tampered = |n: u64, change: &dyn Fn(&mut Value)| {
        let mut order: Value = serde_json::from_str(&order_processor_testkit::orders::body(n))
            .unwrap_or_else(|e| panic!("sample {n}: {e}"));
        change(&mut order);
        order.to_string()
    };
    let mut bodies = Vec::new();
    for n in 0..rounds {
        let id = 10_000 + n;
        bodies.push(tampered(id, &|o| o["total_cents"] = Value::from(1)));
        bodies.push(tampered(id + 100, &|o| o["currency"] = Value::from("euro")));
        bodies.push(tampered(id + 200, &|o| o["surprise"] = Value::from(true)));
        bodies.push(tampered(id + 300, &|o| {
            o["items"] = Value::from(Vec::<Value>::new())
        }));
        bodies.push(format!("{{\"order_id\": \"ord-{id}\", "));
        bodies.push(format!("{} {}", " ".repeat(70 * 1024), n));
    }
    for body in &bodies {
        assert!(
            order_processor::order::parse(body).is_err(),
            "meant to be invalid: {}",
            &body[..body.len().min(80)]
        );
    }
    bodies
}

/// `valid` in a fixed shuffle (a stride coprime to its length), with the
/// `invalid` bodies spread over the first `within` positions.
pub fn mixed(valid: Vec<String>, invalid: &[String], within: usize) -> Vec<String> {
    let n = valid.len();
    let gcd = |mut a: usize, mut b: usize| {
        while b != 0 {
            (a, b) = (b, a % b);
        }
        a
    };
    let stride = [7, 11, 13, 17]
        .into_iter()
        .find(|s| gcd(*s, n) == 1)
        .expect("a coprime stride");
    let mut bodies: Vec<String> = (0..n).map(|i| valid[i * stride % n].clone()).collect();
    let step = (within / invalid.len().max(1)).max(1);
    for (i, bad) in invalid.iter().enumerate() {
        bodies.insert((i * step).min(bodies.len()), bad.clone());
    }
    bodies
}

/// The order processor's SQS event (the event source mapping SAM creates).
pub fn order_source(template: &Template) -> SqsSource {
    template
        .sqs_sources()
        .expect("SQS events")
        .into_iter()
        .find(|s| s.function == "order-processor")
        .expect("the order processor has an SQS event")
}

/// The end every run of orders through the queue must reach: each valid order
/// stored exactly once with the content sent, exactly the invalid bodies
/// dead-lettered (so no valid order there), each with its failure class, the
/// order queue empty.
pub async fn assert_reconciled(
    table: &aws_sdk_dynamodb::Client,
    queues: &LocalQueues,
    orders: &LocalQueue,
    dead_letters: &LocalQueue,
    valid: std::ops::Range<u64>,
    invalid: &[String],
) {
    const TABLE: &str = "OrdersTable";
    let stored = stored_hashes(table, TABLE).await;
    let expected = expected_hashes(valid);
    let missing = expected.keys().filter(|k| !stored.contains_key(*k)).count();
    let unexpected = stored.keys().filter(|k| !expected.contains_key(*k)).count();
    assert!(
        stored == expected,
        "{TABLE}: {} items, {missing} orders missing, {unexpected} unexpected, {} with other content",
        stored.len(),
        expected
            .iter()
            .filter(|(k, v)| stored.get(*k).is_some_and(|s| s != *v))
            .count()
    );
    let letters = take_all(&queues.client, &dead_letters.url)
        .await
        .expect("dead letters");
    let class = order_processor::dead_letter::attr::FAILURE_CLASS;
    for letter in &letters {
        let body = letter.body().unwrap_or_default();
        let expected = order_processor::order::parse(body).err().map(|e| e.class());
        assert_eq!(
            letter
                .message_attributes()
                .and_then(|a| a.get(class))
                .and_then(|v| v.string_value()),
            expected,
            "the class of a dead letter: {body:.80}"
        );
    }
    let mut dead: Vec<String> = letters
        .into_iter()
        .map(|m| m.body.unwrap_or_default())
        .collect();
    let mut expected_dead = invalid.to_vec();
    dead.sort();
    expected_dead.sort();
    assert!(
        dead == expected_dead,
        "dead-letter queue: {} messages, {} of them valid orders, {} invalid bodies expected",
        dead.len(),
        dead.iter()
            .filter(|b| order_processor::order::parse(b).is_ok())
            .count(),
        invalid.len()
    );
    assert_eq!(
        depth(&queues.client, &orders.url).await.expect("depth"),
        0,
        "order queue empty"
    );
}

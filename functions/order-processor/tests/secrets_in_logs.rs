//! No order body and no credential in the order processor's log lines,
//! answers, error messages or spans: its real binary under the emulator,
//! logging at TRACE (the most the runtime can print: every level of every
//! crate) and tracing every invocation to a local X-Ray daemon, on valid and
//! invalid records, with the emulator's whole log and everything the daemon
//! received read afterwards.

use serde_json::{Value, json};
use testkit::LocalDynamoDb;
use testkit::secrets::{
    assert_absent, assert_no_credentials, at_trace, check_marker_lines, invoke, spans_of,
};
use testkit::start;

/// In every order's customer id: an order's content shows as this.
const ORDER_MARKER: &str = "ordmark9q";

/// An order of customer `cust-<marker>-<n>`.
fn order_body(n: u64) -> String {
    let mut order = order_processor_testkit::orders::order(n);
    order.order_id = format!("ord-secret-{n:04}");
    order.customer_id = format!("cust-{ORDER_MARKER}-{n}");
    serde_json::to_string(&order).expect("order")
}

fn sqs_event(bodies: &[(String, String)]) -> Value {
    let records: Vec<Value> = bodies
        .iter()
        .map(|(id, body)| {
            json!({"messageId": id, "receiptHandle": "rh", "body": body, "attributes": {},
                   "messageAttributes": {}, "eventSource": "aws:sqs",
                   "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:OrdersQueue", "awsRegion": "us-east-1"})
        })
        .collect();
    json!({ "Records": records })
}

/// Returns the bodies it sent.
fn order_processor_at_trace(dynamodb: &LocalDynamoDb) -> Vec<String> {
    let env = at_trace(dynamodb.env());
    let emulator = start("order-processor", &env);
    let with_marker = |n: u64| {
        let body = order_body(n);
        format!("{},\"note\":\"{ORDER_MARKER}\"}}", &body[..body.len() - 1])
    };
    let records: Vec<(String, String)> = vec![
        ("ok-1".into(), order_body(1)),
        ("ok-2".into(), order_body(2)),
        // An unknown field, a wrong total, broken JSON, too large: all refused.
        ("unknown-field".into(), with_marker(3)),
        (
            "wrong-total".into(),
            order_body(4).replace("\"total_cents\":", "\"total_cents\":1"),
        ),
        ("broken".into(), order_body(5)[..60].to_owned()),
        (
            "too-large".into(),
            format!("{}{}", order_body(6), " ".repeat(70_000)),
        ),
        ("ok-3".into(), order_body(7)),
    ];
    let bodies: Vec<String> = records
        .iter()
        .map(|(_, b)| b.trim_end().to_owned())
        .collect();
    let event = sqs_event(&records);
    let mut answers = Vec::new();
    for _ in 0..2 {
        // The second delivery finds every order in the cache.
        let answer = invoke(&emulator, &event);
        let failed: Value = serde_json::from_str(&answer).expect("answer");
        let ids: Vec<&str> = failed["batchItemFailures"]
            .as_array()
            .expect("batchItemFailures")
            .iter()
            .filter_map(|f| f["itemIdentifier"].as_str())
            .collect();
        assert_eq!(ids, ["unknown-field", "wrong-total", "broken", "too-large"]);
        answers.push(answer);
    }
    // A body the runtime cannot read (invalid UTF-8): the invocation fails.
    let unreadable = sqs_event(&[("bad-bytes".into(), order_body(8))])
        .to_string()
        .into_bytes();
    let marker_at = unreadable
        .windows(ORDER_MARKER.len())
        .position(|w| w == ORDER_MARKER.as_bytes())
        .expect("marker");
    let mut unreadable = unreadable;
    unreadable[marker_at] = 0xFF;
    let answer = emulator.invoke(&unreadable).expect("invoke");
    let (status, answer) = (answer.status, answer.body);
    assert_eq!(status, 200, "{answer}");
    assert!(answer.contains("invalid unicode code point"), "{answer}");
    answers.push(answer);
    let logs = emulator.logs();
    assert!(
        logs.contains(r#""level":"TRACE""#),
        "TRACE logging is on:\n{logs:.2000}"
    );
    for answer in &answers {
        assert_absent("order-processor answer", answer, "an order body", &bodies);
        assert!(!answer.contains(ORDER_MARKER), "{answer}");
    }
    assert_absent("order-processor log", &logs, "an order body", &bodies);
    assert_no_credentials("order-processor log", &logs);
    // No line carries part of an order: the shared crate drops the SDK's
    // TRACE lines of requests and responses.
    check_marker_lines("order-processor", &logs, ORDER_MARKER, &[]);
    bodies
}

/// Every log line with part of an order (the marker) comes from one of

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_order_body_in_logs_answers_or_spans_at_trace_level() {
    let dynamodb = LocalDynamoDb::start().await;
    let bodies = order_processor_at_trace(&dynamodb);
    // Every invocation's spans are sent when it ends: all are in by now.
    let spans = spans_of(3);
    assert_absent("spans", &spans, "an order body", &bodies);
    assert!(
        !spans.contains(ORDER_MARKER),
        "part of an order in the spans"
    );
}

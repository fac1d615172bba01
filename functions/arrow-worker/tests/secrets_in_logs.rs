//! No order body and no credential in the Arrow worker's log lines,
//! answers, error messages or spans: its real binary under the emulator,
//! logging at TRACE (the most the runtime can print: every level of every
//! crate) and tracing every invocation to a local X-Ray daemon, over orders
//! whose customers carry a marker and requests that quote an order body,
//! with the emulator's whole log and everything the daemon received read
//! afterwards.

mod support;

use arrow_worker_testkit::orders::{START_MS, order_item};
use aws_sdk_dynamodb::types::AttributeValue;
use serde_json::json;
use shared::orders::attr;
use support::LocalDynamoDb;
use support::start;
use testkit::secrets::{
    assert_absent, assert_no_credentials, at_trace, check_marker_lines, invoke, spans_of,
};

/// In every order's customer id: an order's content shows as this.
const ORDER_MARKER: &str = "ordmark9q";

/// Orders of customers `cust-<marker>-<n>` in the orders table, and an order
/// body of each, as a client would have sent it.
async fn marked_orders(dynamodb: &LocalDynamoDb) -> Vec<String> {
    let mut items = Vec::new();
    let mut bodies = Vec::new();
    for n in 1..=3_u64 {
        let (order_id, customer) = (
            format!("ord-secret-{n:04}"),
            format!("cust-{ORDER_MARKER}-{n}"),
        );
        let ms = START_MS + i64::try_from(n).expect("small") * 60_000;
        let mut item = order_item(&customer, "EUR", ms, 1_000 * n, n);
        item.insert(attr::ORDER_ID.into(), AttributeValue::S(order_id.clone()));
        items.push(item);
        // As long as a client's order is (the worker quotes at most the
        // start of a bad value: a short body would be quoted whole).
        let lines: Vec<_> = (1..=4)
            .map(|l| json!({"sku": format!("SKU-{n}-{l}"), "quantity": l, "unit_price_cents": 250}))
            .collect();
        bodies.push(
            json!({"order_id": order_id, "customer_id": customer, "currency": "EUR",
                   "items": lines, "total_cents": 1_000 * n, "note": ORDER_MARKER,
                   "created_at": "2026-11-01T00:01:00Z"})
            .to_string(),
        );
    }
    support::write_items(&dynamodb.server.client(), items).await;
    bodies
}

fn arrow_worker_at_trace(dynamodb: &LocalDynamoDb, bodies: &[String]) {
    let env = at_trace(dynamodb.env());
    let emulator = start("arrow-worker", &env);
    let mut answers = Vec::new();
    let by_customer = invoke(
        &emulator,
        &json!({"operation": "aggregate", "query": {"group_by": "customer"}}),
    );
    assert!(by_customer.contains("\"groups\""), "{by_customer:.500}");
    answers.push(by_customer);
    for request in [
        json!({"operation": "daily_report", "day": "2026-11-01"}),
        json!({"operation": "aggregate", "query": {"group_by": "day"}, "segment": 0, "total_segments": 2}),
        json!({"operation": "aggregate", "query": {"group_by": "day", "from": "yesterday"}}),
        json!({"operation": "merge", "partials": [{"order": bodies[0]}]}),
        json!({"operation": bodies[0]}),
    ] {
        answers.push(invoke(&emulator, &request));
    }
    let logs = emulator.logs();
    for answer in &answers {
        assert_absent("arrow-worker answer", answer, "an order body", bodies);
    }
    assert_absent("arrow-worker log", &logs, "an order body", bodies);
    assert_no_credentials("arrow-worker log", &logs);
    // The refusal of the request whose operation is an order body quotes
    // the start of that value (at most 200 characters), in the function's
    // line and the runtime's; nothing else carries part of an order.
    check_marker_lines(
        "arrow-worker",
        &logs,
        ORDER_MARKER,
        &["arrow_worker::handler", "lambda_runtime::layers::panic"],
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_order_body_in_logs_answers_or_spans_at_trace_level() {
    let dynamodb = LocalDynamoDb::start().await;
    let bodies = marked_orders(&dynamodb).await;
    arrow_worker_at_trace(&dynamodb, &bodies);
    // Every invocation's spans are sent when it ends: all are in by now.
    let spans = spans_of(6);
    assert_absent("spans", &spans, "an order body", &bodies);
}

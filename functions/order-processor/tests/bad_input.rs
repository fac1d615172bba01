//! The order processor's bad-input corpus (`tests/bad-input/`, see its
//! README) through its real handler in-process, with in-memory stores; one
//! case through the real runtime under the emulator; and the SQS body limit
//! (256 KiB per message). A payload the runtime cannot deserialise never
//! reaches the handler: the runtime reports an invocation error. In-process,
//! that step is `serde_json::from_slice` into the handler's event type, as in
//! `lambda_runtime`.

use aws_lambda_events::sqs::{SqsBatchResponse, SqsEvent, SqsMessage};
use lambda_runtime::LambdaEvent;
use order_processor::error::RecordFailure;
use order_processor::handler::{BatchReport, Handler, Outcome};
use order_processor::order::Order;
use order_processor::store::StoreError;
use order_processor_testkit::dead_letters::MemoryDeadLetters;
use order_processor_testkit::store::MemoryOrders;
use serde_json::{Value, json};
use shared::invocation::Deadline;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use testkit::bad_input::{
    Case, LAMBDA_PAYLOAD_BYTES, context, corpus, nested_arrays, size, template_env,
};
use testkit::start;

/// SQS's largest message (and so the largest body an order can arrive with).
const SQS_MESSAGE_BYTES: usize = 256 * 1024;

/// Its dead-letter queue refuses every send, so each invalid record stays in
/// `batchItemFailures` with its class (moving records to the dead-letter
/// queue is tested by the order processor's handler tests and `queue_to_table`).
fn order_handler() -> Handler<MemoryOrders, MemoryDeadLetters> {
    let env = template_env("order-processor");
    let config = order_processor::config::Config::from_env(&env.as_slice()).expect("config");
    let refused = StoreError::permanent("no dead-letter queue in this test");
    Handler::new(
        MemoryOrders::new(),
        MemoryDeadLetters::failing(refused),
        &config,
    )
}

fn sqs_record(id: &str, body: &str) -> SqsMessage {
    let mut record = SqsMessage::default();
    record.message_id = Some(id.to_owned());
    record.body = Some(body.to_owned());
    record
}

/// `records` through the Lambda entry point (`handle`: the response Lambda
/// gets) and, on a second fresh handler, through `process` (the reasons).
async fn run_batch(
    records: Vec<SqsMessage>,
) -> (
    Result<SqsBatchResponse, String>,
    Result<BatchReport, String>,
) {
    let timeout = u64::from(testkit::function("order-processor").timeout_s);
    let report = order_handler()
        .process(
            &records,
            Deadline::at(Instant::now() + Duration::from_secs(timeout)),
        )
        .await
        .map_err(|e| e.to_string());
    let mut event = SqsEvent::default();
    event.records = records;
    let response = order_handler()
        .handle(LambdaEvent::new(event, context(timeout)))
        .await
        .map_err(|e| e.to_string());
    (response, report)
}

fn failed_ids(response: &SqsBatchResponse) -> Vec<String> {
    response
        .batch_item_failures
        .iter()
        .map(|f| f.item_identifier.clone())
        .collect()
}

fn outcome<'a>(report: &'a BatchReport, id: &str) -> &'a Outcome {
    &report
        .outcomes
        .iter()
        .find(|(m, _)| m == id)
        .unwrap_or_else(|| panic!("no outcome for {id}"))
        .1
}

/// A record's expected outcome (`accepted` or an invalid class) against what
/// the handler did with it.
fn check_record(case: &Case, report: &BatchReport, failed: &[String], id: &str, expect: &str) {
    let outcome = outcome(report, id);
    if expect == "accepted" {
        assert_eq!(*outcome, Outcome::Stored, "{}: {id}", case.name);
        assert!(
            !failed.iter().any(|f| f == id),
            "{}: {id} not acknowledged",
            case.name
        );
        return;
    }
    let Outcome::Failed(RecordFailure::Invalid(invalid)) = outcome else {
        panic!("{}: {id} is {outcome:?}, expected {expect}", case.name);
    };
    assert_eq!(invalid.class(), expect, "{}: {invalid}", case.name);
    assert!(
        failed.iter().any(|f| f == id),
        "{}: {id} failed but is not in batchItemFailures",
        case.name
    );
    case.check_message(&invalid.to_string());
}

/// The words of a body a reason may name: the schema's field names, the
/// keys of a valid order (its items' too).
fn fields() -> Vec<String> {
    fn keys(value: &Value, out: &mut Vec<String>) {
        match value {
            Value::Object(map) => {
                for (key, value) in map {
                    out.push(key.clone());
                    keys(value, out);
                }
            }
            Value::Array(values) => values.iter().for_each(|v| keys(v, out)),
            _ => {}
        }
    }
    let order: Value = serde_json::from_str(&order_processor_testkit::orders::body(1))
        .expect("a sample order is JSON");
    let mut out = Vec::new();
    keys(&order, &mut out);
    out
}

/// No string (but a field name) and no number of two digits or more (but
/// the schema's limits) written in `body` appears in `reason`, outside its
/// position (`at line L column C`): a reason goes to logs and to the dead
/// letter's `FailureReason`, and a body may carry what must not.
fn assert_quotes_no_value(case: &str, body: &str, reason: &str) {
    use order_processor::order::{MAX_AMOUNT_CENTS, MAX_ID_LEN, MAX_ITEMS, MAX_QUANTITY};
    let reason = reason.split(" at line ").next().unwrap_or(reason);
    let limits = [
        MAX_AMOUNT_CENTS,
        MAX_ID_LEN as u64,
        MAX_ITEMS as u64,
        u64::from(MAX_QUANTITY),
    ]
    .map(|n| n.to_string());
    let runs = |text: &str| -> Vec<String> {
        text.split(|c: char| !c.is_ascii_digit())
            .filter(|n| n.len() > 1)
            .map(str::to_owned)
            .collect()
    };
    let in_reason = runs(reason);
    for number in runs(body) {
        assert!(
            limits.contains(&number) || !in_reason.contains(&number),
            "{case}: the reason {reason:?} quotes the number {number} of the body"
        );
    }
    let fields = fields();
    let strings = body.split('"').skip(1).step_by(2).filter(|s| s.len() > 1);
    for value in strings.filter(|s| !fields.iter().any(|f| f == s)) {
        assert!(
            !reason.contains(value),
            "{case}: the reason {reason:?} quotes {value:?} of the body"
        );
    }
}

fn order_json(order_id: &str, items: &str, total: usize) -> String {
    format!(
        r#"{{"order_id":"{order_id}","customer_id":"cust-edge","items":{items},"total_cents":{total},"currency":"EUR","created_at":"2026-11-20T09:15:00Z"}}"#
    )
}

fn generate_order_body(spec: &Value) -> Vec<u8> {
    let n = |key: &str| size(spec, key, &[]);
    let item = r#"{"sku":"SKU-1","quantity":1,"unit_price_cents":1}"#;
    match spec["generate"].as_str() {
        // A valid order, then spaces (JSON whitespace) up to `bytes`.
        Some("padded_order") => {
            let mut body = order_json("ord-padded", &format!("[{item}]"), 1);
            let pad = n("bytes").checked_sub(body.len()).expect("room to pad");
            body.push_str(&" ".repeat(pad));
            body.into_bytes()
        }
        Some("padded_garbage") => format!("{{{}", "x".repeat(n("bytes") - 1)).into_bytes(),
        Some("nested_arrays") => nested_arrays(n("depth")).into_bytes(),
        Some("nested_in_items") => order_json("ord-nested", &nested_arrays(n("depth")), 1).into(),
        Some("items") => {
            let count = n("count");
            let items: Vec<_> = (0..count)
                .map(|i| format!(r#"{{"sku":"SKU-{i}","quantity":1,"unit_price_cents":1}}"#))
                .collect();
            order_json("ord-items", &format!("[{}]", items.join(",")), count).into_bytes()
        }
        other => panic!("unknown generator {other:?}"),
    }
}

/// A body between two valid orders: the body's record gets its expected
/// outcome, the two others are acknowledged.
async fn order_body_case(case: &Case) {
    let body = std::str::from_utf8(&case.input).unwrap_or_else(|_| {
        panic!(
            "{}: a record body is a string; other bytes arrive only inside an event (event-*.json)",
            case.name
        )
    });
    let control = |n| order_processor_testkit::orders::body(n);
    let records = vec![
        sqs_record("msg-before", &control(1)),
        sqs_record("msg-case", body),
        sqs_record("msg-after", &control(2)),
    ];
    let (response, report) = run_batch(records).await;
    let response = response.unwrap_or_else(|e| panic!("{}: {e}", case.name));
    let report = report.unwrap_or_else(|e| panic!("{}: {e}", case.name));
    let failed = failed_ids(&response);
    check_record(case, &report, &failed, "msg-case", case.expect());
    if let Outcome::Failed(RecordFailure::Invalid(invalid)) = outcome(&report, "msg-case") {
        assert_quotes_no_value(&case.name, body, &invalid.to_string());
    }
    for id in ["msg-before", "msg-after"] {
        check_record(case, &report, &failed, id, "accepted");
    }
    let expected: &[&str] = if case.expect() == "accepted" {
        &[]
    } else {
        &["msg-case"]
    };
    assert_eq!(failed, expected, "{}", case.name);
}

/// A whole SQS event, deserialised as the runtime does, then handled.
async fn order_event_case(case: &Case) {
    let event = match serde_json::from_slice::<SqsEvent>(&case.input) {
        Ok(event) => event,
        Err(e) => {
            // The runtime reports an invocation error: Lambda retries the whole
            // batch, nothing is acknowledged (the emulator test below shows it).
            assert_eq!(case.expect(), "batch_fails", "{}: {e}", case.name);
            case.check_message(&e.to_string());
            return;
        }
    };
    let ids: Vec<String> = event
        .records
        .iter()
        .map(|r| r.message_id.clone().unwrap_or_default())
        .collect();
    let (response, report) = run_batch(event.records).await;
    match case.expect() {
        "batch_fails" => {
            let err = response.expect_err(&case.name);
            case.check_message(&err);
            assert!(report.is_err(), "{}", case.name);
        }
        "records" => {
            let response = response.unwrap_or_else(|e| panic!("{}: {e}", case.name));
            let report = report.unwrap_or_else(|e| panic!("{}: {e}", case.name));
            let expected: BTreeMap<String, Value> =
                serde_json::from_value(case.spec["records"].clone())
                    .expect("records: {messageId: outcome}");
            let listed: Vec<&String> = expected.keys().collect();
            let mut sorted: Vec<&String> = ids.iter().collect();
            sorted.sort();
            assert_eq!(
                listed, sorted,
                "{}: every record has an expectation",
                case.name
            );
            let failed = failed_ids(&response);
            for (id, expect) in &expected {
                check_record(
                    case,
                    &report,
                    &failed,
                    id,
                    expect.as_str().unwrap_or_default(),
                );
            }
        }
        other => panic!("{}: unknown expectation {other}", case.name),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn order_processor_corpus() {
    let cases = corpus(
        "order-processor",
        env!("CARGO_MANIFEST_DIR"),
        generate_order_body,
    );
    for case in &cases {
        match case.input_kind() {
            "request" => order_body_case(case).await,
            "event" => order_event_case(case).await,
            other => panic!("{}: unknown input {other}", case.name),
        }
    }
    eprintln!("order-processor: {} cases", cases.len());
}

/// SQS's largest batch (10,000 records), half invalid: answered record by
/// record, and the answer stays far inside Lambda's response limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn order_processor_answers_the_largest_batch_inside_the_response_limit() {
    const BATCH: u64 = 10_000; // the most an SQS event source mapping sends
    let records: Vec<SqsMessage> = (0..BATCH)
        .map(|n| {
            // SQS message ids are UUIDs: 36 characters.
            let id = format!("00000000-0000-4000-8000-{n:012}");
            let body = if n % 2 == 0 {
                order_processor_testkit::orders::body(n)
            } else {
                format!("not an order {n}")
            };
            sqs_record(&id, &body)
        })
        .collect();
    let request_bytes = serde_json::to_vec(&json!({"Records": records}))
        .expect("event")
        .len();
    let (response, _) = run_batch(records).await;
    let response = response.expect("response");
    let failed = failed_ids(&response);
    assert_eq!(failed.len(), 5_000);
    assert!(
        failed
            .iter()
            .all(|id| id.ends_with(|c: char| "13579".contains(c))),
        "exactly the invalid (odd) records failed"
    );
    let bytes = serde_json::to_vec(&response).expect("response").len();
    eprintln!(
        "order-processor, 10,000 records: request {request_bytes} bytes, response with 5,000 failures {bytes} bytes"
    );
    assert!(bytes < LAMBDA_PAYLOAD_BYTES, "{bytes}");
}

/// The order processor under the emulator, logging at TRACE: an SQS event the
/// runtime cannot deserialise (a record body that is not valid UTF-8, a lone
/// surrogate, not a string), or one with a record without `messageId`, fails
/// the invocation as a whole, so nothing is acknowledged and Lambda retries
/// the batch; the process lives on and answers the next event.
#[test]
fn the_runtime_fails_the_whole_batch_when_a_record_cannot_be_read() {
    let emulator = start("order-processor", &[("AWS_LAMBDA_LOG_LEVEL", "TRACE")]);
    let cases: Vec<Case> = corpus(
        "order-processor",
        env!("CARGO_MANIFEST_DIR"),
        generate_order_body,
    )
    .into_iter()
    .filter(|c| c.input_kind() == "event" && c.expect() == "batch_fails")
    .collect();
    let unreadable = cases
        .iter()
        .filter(|c| serde_json::from_slice::<SqsEvent>(&c.input).is_err())
        .count();
    assert!(
        unreadable >= 3,
        "the corpus has events the runtime cannot read"
    );
    for case in &cases {
        let file = &case.name;
        let answer = emulator.invoke(&case.input).expect("invoke");
        let (status, body) = (answer.status, answer.body);
        assert_eq!(status, 200, "{file}: {body}");
        let answer: Value = serde_json::from_str(&body).expect("JSON answer");
        assert!(
            answer.get("batchItemFailures").is_none() && answer["errorType"].is_string(),
            "{file}: a function error, not a batch answer: {answer}"
        );
        let message = answer["errorMessage"].as_str().unwrap_or_default();
        case.check_message(message);
        if serde_json::from_slice::<SqsEvent>(&case.input).is_err() {
            assert!(
                message.starts_with("failed to deserialize the incoming data"),
                "{file}: the runtime refused it: {message}"
            );
        }
        // The same process answers the next event, record by record.
        let next = json!({"Records": [{"messageId": "after", "body": "{}"}]}).to_string();
        let answer = emulator.invoke(&next).expect("invoke");
        let (status, body) = (answer.status, answer.body);
        assert_eq!(status, 200, "{body}");
        let answer: Value = serde_json::from_str(&body).expect("JSON answer");
        assert_eq!(
            answer,
            json!({"batchItemFailures": [{"itemIdentifier": "after"}]}),
            "after {file}"
        );
    }
    let logs = emulator.logs();
    let starts = logs.matches("shared init done").count();
    assert_eq!(starts, 1, "one cold start, no crash:\n{logs}");
    assert!(!logs.contains("panicked"), "{logs}");
    assert!(
        !logs.contains("ord-event"),
        "no order body in the logs:\n{logs}"
    );
}

#[test]
fn sqs_bodies_beyond_the_limit_are_refused_before_parsing() {
    // The largest body SQS delivers is refused by size alone, before any JSON
    // is read: the class says so even though the body is not JSON either.
    let body = format!("{{{}", "x".repeat(SQS_MESSAGE_BYTES - 1));
    let err = order_processor::order::parse(&body).expect_err("too large");
    assert_eq!(err.class(), "too_large", "{err}");
    let order: Order = order_processor_testkit::orders::order(1);
    let mut valid = serde_json::to_string(&order).expect("order");
    valid.push_str(&" ".repeat(order_processor::order::MAX_BODY_BYTES - valid.len()));
    assert!(order_processor::order::parse(&valid).is_ok());
}

//! The bad-input corpus (`tests/bad-input/<function>/`, see its README) through
//! each function's real handler in-process, with in-memory stores; one case
//! through the real runtime under the emulator; and the payload limits (Lambda:
//! 6 MB per synchronous request and response; SQS: 256 KiB per message).
//!
//! A payload the runtime cannot deserialise never reaches a handler: the
//! runtime reports an invocation error. In-process, that step is
//! `serde_json::from_slice` into the handler's event type, as in `lambda_runtime`.

use arrow_worker::columns::Item as StoredItem;
use arrow_worker::query::MAX_LIMIT;
use aws_lambda_events::sqs::{SqsBatchResponse, SqsEvent, SqsMessage};
use base64::Engine;
use e2e::{start, workspace_root};
use lambda_runtime::{Context, LambdaEvent};
use order_processor::error::RecordFailure;
use order_processor::handler::{BatchReport, Handler, Outcome};
use order_processor::order::Order;
use order_processor::store::StoreError;
use order_processor_testkit::dead_letters::MemoryDeadLetters;
use order_processor_testkit::store::MemoryOrders;
use password_hasher::calibration::Estimator;
use password_hasher::config::Config as HasherConfig;
use serde_json::value::RawValue;
use serde_json::{Value, json};
use shared::invocation::Deadline;
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Lambda's limit on a synchronous request and on a response (6 MB).
const LAMBDA_PAYLOAD_BYTES: usize = 6 * 1024 * 1024;
/// SQS's largest message (and so the largest body an order can arrive with).
const SQS_MESSAGE_BYTES: usize = 256 * 1024;
/// An error message is a line for a person, never a payload.
const MAX_MESSAGE_BYTES: usize = 512;
/// Every password in the hasher's corpus contains this; nothing may echo it.
const PASSWORD_MARKER: &str = "pw-7f3a";
/// The Arrow worker's `MAX_ROWS` in these tests (the corpus names it).
const ARROW_MAX_ROWS: usize = 25_000;

// ------------------------------------------------------------------ the corpus

/// One case of the corpus: its spec (a line of `cases.json`) and its input.
struct Case {
    name: String,
    spec: Value,
    input: Vec<u8>,
}

impl Case {
    fn field(&self, key: &str) -> Option<&str> {
        self.spec[key].as_str()
    }

    fn expect(&self) -> &str {
        self.field("expect").unwrap_or_default()
    }

    fn input_kind(&self) -> &str {
        self.field("input").unwrap_or("request")
    }

    /// A message must name the problem (`says`), stay short and echo neither
    /// the input nor a password.
    fn check_message(&self, message: &str) {
        if let Some(says) = self.field("says") {
            assert!(
                message.contains(says),
                "{}: the message does not say {says:?}: {message:?}",
                self.name
            );
        }
        assert!(
            message.len() <= MAX_MESSAGE_BYTES,
            "{}: a message of {} bytes: {:.200}...",
            self.name,
            message.len(),
            message
        );
        self.check_no_echo(message);
    }

    /// No output repeats the whole input (when it is more than a word) or
    /// any part of a password.
    fn check_no_echo(&self, output: &str) {
        assert!(
            !output.contains(PASSWORD_MARKER),
            "{}: a password came back: {output:.300}",
            self.name
        );
        if self.input.len() >= 16 {
            let input = String::from_utf8_lossy(&self.input);
            assert!(
                !output.contains(input.trim()),
                "{}: the input came back: {output:.300}",
                self.name
            );
        }
    }
}

/// The cases of `function`: every file of its folder is listed in its
/// `cases.json` and every listed file exists; generated inputs come from `generate`.
fn corpus(function: &str, generate: impl Fn(&Value) -> Vec<u8>) -> Vec<Case> {
    let dir = workspace_root()
        .join("tests")
        .join("bad-input")
        .join(function);
    let list = std::fs::read(dir.join("cases.json")).expect("cases.json");
    let specs: Vec<Value> = serde_json::from_slice(&list).expect("cases.json is a JSON array");
    let files: BTreeSet<String> = std::fs::read_dir(&dir)
        .expect("corpus folder")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|name| name != "cases.json")
        .collect();
    let listed: BTreeSet<String> = specs
        .iter()
        .filter_map(|s| s["file"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(files, listed, "{function}: files and cases.json differ");
    specs
        .into_iter()
        .map(|spec| match spec["file"].as_str() {
            Some(file) => Case {
                name: format!("{function}/{file}"),
                input: std::fs::read(dir.join(file)).expect("case file"),
                spec,
            },
            None => Case {
                name: format!("{function}/generated {spec}"),
                input: generate(&spec),
                spec,
            },
        })
        .collect()
}

/// A number parameter of a generated case: a literal, or `NAME` / `NAME + 1`
/// with `NAME` one of `names`.
fn size(spec: &Value, key: &str, names: &[(&str, usize)]) -> usize {
    if let Some(n) = spec[key].as_u64() {
        return usize::try_from(n).expect("size");
    }
    let text = spec[key]
        .as_str()
        .unwrap_or_else(|| panic!("{spec}: {key}"));
    let (name, plus) = text
        .split_once(" + ")
        .map_or((text, 0), |(n, p)| (n, p.parse().expect("NAME + N")));
    let value = names
        .iter()
        .find(|(n, _)| *n == name)
        .unwrap_or_else(|| panic!("{spec}: unknown name {name}"))
        .1;
    value + plus
}

fn nested_arrays(depth: usize) -> String {
    format!("{}{}", "[".repeat(depth), "]".repeat(depth))
}

/// A Lambda context whose deadline is `seconds` away.
fn context(seconds: u64) -> Context {
    let mut context = Context::default();
    context.request_id = "bad-input".into();
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_millis();
    context.deadline = u64::try_from(now).expect("ms") + seconds * 1_000;
    context
}

/// The template's environment of `name`, as a settings table (leaked: a test
/// process reads it a few times).
fn template_env(name: &str) -> Vec<(&'static str, &'static str)> {
    let function = e2e::function(name);
    let memory: &'static str = function.memory_mb.to_string().leak();
    function
        .env
        .into_iter()
        .map(|(k, v)| -> (&'static str, &'static str) { (k.leak(), v.leak()) })
        .chain([("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", memory)])
        .collect()
}

// ------------------------------------------------------------ order processor

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
    let timeout = u64::from(e2e::function("order-processor").timeout_s);
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
    let cases = corpus("order-processor", generate_order_body);
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

// ------------------------------------------------------------ password hasher

async fn hasher(limits: HasherConfig) -> password_hasher::handler::Handler {
    let env = template_env("password-hasher");
    let init = shared::Init::decide(&env.as_slice()).expect("init");
    let estimator = Estimator::calibrate().await.expect("calibration");
    password_hasher::handler::Handler::new(init, limits, estimator)
}

fn template_limits() -> HasherConfig {
    HasherConfig::from_env(&template_env("password-hasher").as_slice()).expect("limits")
}

fn hasher_timeout() -> u64 {
    u64::from(e2e::function("password-hasher").timeout_s)
}

/// A Function URL event (payload format 2.0) with `body`, base64 when it is
/// not UTF-8 (as Lambda sends binary bodies).
fn url_event(body: &[u8]) -> Value {
    let (body, base64) = match std::str::from_utf8(body) {
        Ok(text) => (text.to_owned(), false),
        Err(_) => (base64::engine::general_purpose::STANDARD.encode(body), true),
    };
    json!({"version": "2.0", "rawPath": "/", "requestContext": {"http": {"method": "POST"}},
           "headers": {"content-type": "application/json"}, "body": body, "isBase64Encoded": base64})
}

/// `payload` as the runtime hands it to the hasher: its text, unparsed.
fn raw(payload: &Value) -> Box<RawValue> {
    serde_json::value::to_raw_value(payload).expect("JSON")
}

fn generate_hasher_request(spec: &Value, limits: &HasherConfig) -> Vec<u8> {
    let n = |key: &str| size(spec, key, &[("BATCH_LIMIT", limits.batch)]);
    let request = match spec["generate"].as_str() {
        Some("nested_arrays") => {
            return format!(
                r#"{{"operation":"hash","cost":4,"passwords":{}}}"#,
                nested_arrays(n("depth"))
            )
            .into_bytes();
        }
        Some("long_password") => {
            let password = format!("{PASSWORD_MARKER}{}", "x".repeat(n("bytes") - 7));
            json!({"operation": "hash", "cost": 4, "passwords": [password]})
        }
        Some("hash_batch") => {
            let passwords: Vec<String> = (0..n("count"))
                .map(|i| format!("{PASSWORD_MARKER}-{i}"))
                .collect();
            json!({"operation": "hash", "cost": spec["cost"], "passwords": passwords})
        }
        Some("verify_batch") => {
            let hash = match spec["hash"].as_str() {
                Some("malformed") => "$2b$04$not-a-bcrypt-hash",
                // A real cost-14 hash: verifying it is as slow as hashing.
                Some("cost 14") => "$2b$14$abcdefghijklmnopqrstuuW3yZNQq6raZist0hr1B7Ekj5IHx.k86",
                other => panic!("unknown hash {other:?}"),
            };
            let items: Vec<Value> = (0..n("count"))
                .map(|i| json!({"password": format!("{PASSWORD_MARKER}-{i}"), "hash": hash}))
                .collect();
            json!({"operation": "verify", "items": items})
        }
        other => panic!("unknown generator {other:?}"),
    };
    request.to_string().into_bytes()
}

/// The error type and status a refused request gets.
fn refusal(expect: &str) -> Option<(&'static str, u16)> {
    match expect {
        "ok" => None,
        "invalid" | "not_json" => Some(("InvalidRequest", 400)),
        "deadline" => Some(("DeadlineTooShort", 400)),
        other => panic!("unknown expectation {other}"),
    }
}

/// An accepted answer: `contains` what the case says, and as many results as
/// a generated batch had items.
fn check_answer(case: &Case, answer: &Value) {
    let text = answer.to_string();
    case.check_no_echo(&text);
    if let Some(part) = case.field("contains") {
        assert!(text.contains(part), "{}: {text:.400}", case.name);
    }
    if let Some(count) = case.spec.get("count") {
        let items = size(
            &case.spec,
            "count",
            &[("BATCH_LIMIT", template_limits().batch)],
        );
        let results = answer["hashes"]
            .as_array()
            .or_else(|| answer["results"].as_array())
            .map_or(0, Vec::len);
        assert_eq!(results, items, "{}: {count}", case.name);
    }
}

/// The request through a Function URL: an HTTP answer, 400 with a clear
/// message when refused.
async fn hasher_url_path(
    hasher: &password_hasher::handler::Handler,
    case: &Case,
    event: Value,
    status: u16,
) {
    let answer = hasher
        .handle(LambdaEvent::new(raw(&event), context(hasher_timeout())))
        .await
        .unwrap_or_else(|e| panic!("{}: a Function URL gets an HTTP answer: {e:?}", case.name));
    case.check_no_echo(&answer.to_string());
    assert_eq!(answer["statusCode"], status, "{}: {answer}", case.name);
    let body: Value = serde_json::from_str(answer["body"].as_str().unwrap_or_default())
        .unwrap_or_else(|e| panic!("{}: body is JSON: {e}", case.name));
    if status == 200 {
        check_answer(case, &body);
        return;
    }
    let message = body["error"].as_str().unwrap_or_default();
    if case.expect() == "not_json" {
        assert!(
            message.starts_with("request is not valid JSON (line"),
            "{}: {message}",
            case.name
        );
        case.check_no_echo(message);
    } else {
        case.check_message(message);
    }
    if case.input_kind() != "url_event"
        && let Some((error_type, _)) = refusal(case.expect())
    {
        assert_eq!(body["errorType"], error_type, "{}", case.name);
    }
}

/// The request as a direct invoke: the runtime checks that it is one JSON
/// value and hands its text over; the handler answers or returns a function
/// error.
async fn hasher_direct_path(hasher: &password_hasher::handler::Handler, case: &Case) {
    let payload = match serde_json::from_slice::<Box<RawValue>>(&case.input) {
        Ok(payload) => payload,
        Err(e) => {
            assert_eq!(case.expect(), "not_json", "{}: {e}", case.name);
            case.check_message(&e.to_string());
            return;
        }
    };
    let answer = hasher
        .handle(LambdaEvent::new(payload, context(hasher_timeout())))
        .await;
    match (answer, refusal(case.expect())) {
        // JSON the runtime passes on and the parser refuses (a lone
        // surrogate, nesting too deep): a position, as for a Function URL.
        (Err(diagnostic), _) if case.expect() == "not_json" => {
            assert_eq!(diagnostic.error_type, "InvalidRequest", "{}", case.name);
            assert!(
                diagnostic
                    .error_message
                    .starts_with("request is not valid JSON (line"),
                "{}: {}",
                case.name,
                diagnostic.error_message
            );
            case.check_no_echo(&diagnostic.error_message);
        }
        (Ok(answer), None) => check_answer(case, &answer),
        (Err(diagnostic), Some((error_type, _))) => {
            assert_eq!(diagnostic.error_type, error_type, "{}", case.name);
            case.check_message(&diagnostic.error_message);
        }
        (answer, _) => panic!("{}: expected {}, got {answer:?}", case.name, case.expect()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn password_hasher_corpus() {
    let limits = template_limits();
    let hasher = hasher(limits).await;
    let cases = corpus("password-hasher", |spec| {
        generate_hasher_request(spec, &limits)
    });
    for case in &cases {
        if case.input_kind() == "url_event" {
            let event: Value = serde_json::from_slice(&case.input).expect("event JSON");
            let status = u16::try_from(case.spec["status"].as_u64().expect("status")).expect("u16");
            hasher_url_path(&hasher, case, event, status).await;
            continue;
        }
        let status = refusal(case.expect()).map_or(200, |(_, status)| status);
        hasher_url_path(&hasher, case, url_event(&case.input), status).await;
        hasher_direct_path(&hasher, case).await;
    }
    eprintln!("password-hasher: {} cases", cases.len());
}

/// The largest batch the settings allow (`BATCH_LIMIT` 10,000), answered in
/// the largest form (Function URL: JSON in a JSON string), stays inside
/// Lambda's response limit; and a request as large as Lambda allows is read
/// and refused with a clear error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn password_hasher_answers_stay_inside_the_response_limit() {
    let largest = HasherConfig::from_env(&[("BATCH_LIMIT", "10000")]).expect("the largest batch");
    assert!(
        HasherConfig::from_env(&[("BATCH_LIMIT", "10001")]).is_err(),
        "BATCH_LIMIT is at most 10,000"
    );
    let hasher = hasher(largest).await;
    let url_answer_bytes = |answer: &Value| answer.to_string().len();
    let serve = |request: Value| {
        let hasher = &hasher;
        async move {
            let body = request.to_string().into_bytes();
            hasher
                .handle(LambdaEvent::new(
                    raw(&url_event(&body)),
                    context(hasher_timeout()),
                ))
                .await
                .expect("HTTP answer")
        }
    };
    // Verify: 10,000 pairs refused one by one, without bcrypt work, in each
    // way a pair can be; the longest answer counts. A long password's message
    // grows with its digits: 10,000 of them of 500 bytes fill most of a
    // request.
    let long_password = format!("{PASSWORD_MARKER}{}", "x".repeat(493));
    let refused_pairs = [
        (
            PASSWORD_MARKER,
            format!("$2b$31${}", "a".repeat(53)),
            "hash cost 31 is above the allowed maximum",
        ),
        (
            PASSWORD_MARKER,
            format!("$2x$05${}", "a".repeat(53)),
            "are not supported; rehash with $2b$",
        ),
        (
            long_password.as_str(),
            format!("$2b$04${}", "a".repeat(53)),
            "password is 500 bytes",
        ),
    ];
    let mut verify_bytes = 0;
    for (password, hash, says) in &refused_pairs {
        let items = vec![json!({"password": password, "hash": hash}); largest.batch];
        let verify = serve(json!({"operation": "verify", "items": items})).await;
        assert_eq!(verify["statusCode"], 200, "{verify:.300}");
        let body = verify["body"].as_str().unwrap_or_default();
        assert!(body.contains(says), "{says}: {body:.300}");
        verify_bytes = verify_bytes.max(url_answer_bytes(&verify));
    }
    // Hash: the answer grows by one hash per password; measured on 1 and 101
    // passwords, then scaled to 10,000.
    let hash = |n: usize| {
        let passwords: Vec<String> = (0..n).map(|i| format!("{PASSWORD_MARKER}-{i}")).collect();
        serve(json!({"operation": "hash", "cost": 4, "passwords": passwords}))
    };
    let (one, many) = (hash(1).await, hash(101).await);
    assert_eq!(many["statusCode"], 200);
    let per_hash = (url_answer_bytes(&many) - url_answer_bytes(&one)).div_ceil(100);
    let hash_bytes = url_answer_bytes(&one) + per_hash * (largest.batch - 1);
    eprintln!(
        "password-hasher at BATCH_LIMIT 10,000 (Function URL form): verify answer {verify_bytes} bytes, hash answer about {hash_bytes} bytes ({per_hash} per hash)"
    );
    assert!(verify_bytes < LAMBDA_PAYLOAD_BYTES, "{verify_bytes}");
    assert!(hash_bytes < LAMBDA_PAYLOAD_BYTES, "{hash_bytes}");
    // A request of Lambda's full 6 MB (one huge password): read, then refused
    // by the password rule, quoting nothing.
    let huge = format!(
        "{PASSWORD_MARKER}{}",
        "x".repeat(LAMBDA_PAYLOAD_BYTES - 200)
    );
    let refused = serve(json!({"operation": "hash", "cost": 4, "passwords": [huge]})).await;
    assert_eq!(refused["statusCode"], 400);
    let body = refused["body"].as_str().unwrap_or_default();
    assert!(body.contains("bcrypt uses at most 72"), "{body:.300}");
    assert!(body.len() < MAX_MESSAGE_BYTES, "{body:.300}");
}

/// CPU per request is bounded: a batch whose estimated time (items x 2^cost
/// over the workers, from the hash timed at cold start) exceeds 80% of the
/// time left is refused before any hashing; the same batch at a lower cost runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn password_hasher_refuses_work_that_cannot_finish_before_hashing() {
    let limits = template_limits();
    let hasher = hasher(limits).await;
    let passwords: Vec<String> = (0..limits.batch)
        .map(|i| format!("{PASSWORD_MARKER}-{i}"))
        .collect();
    let request = |cost: u32| {
        let body =
            serde_json::to_vec(&json!({"operation": "hash", "cost": cost, "passwords": passwords}))
                .expect("request");
        password_hasher::request::parse(&body, &limits).expect("a valid request")
    };
    // Two seconds left: the largest batch at the highest cost is refused with
    // the estimate; hashing it would take minutes.
    let deadline = Deadline::at(Instant::now() + Duration::from_secs(2));
    let refusal = hasher
        .serve(request(limits.max_cost), deadline)
        .await
        .expect_err("too much work");
    assert_eq!(refusal.error_type(), "DeadlineTooShort");
    assert!(
        refusal.to_string().contains(&format!(
            "{} hash(es) at cost {}",
            limits.batch, limits.max_cost
        )),
        "{refusal}"
    );
    // The whole invocation's time (less the shared deadline rule's margin):
    // the largest batch at the lowest cost fits.
    let deadline = Deadline::from_context(&context(hasher_timeout()));
    let answer = hasher
        .serve(request(limits.min_cost), deadline)
        .await
        .expect("fits");
    assert_eq!(
        answer["hashes"].as_array().map(Vec::len),
        Some(limits.batch)
    );
}

// ------------------------------------------------------------ arrow worker

type ArrowHandler = arrow_worker::handler::Handler<arrow_worker_testkit::orders::MemoryStore>;

fn arrow_worker(items: Vec<StoredItem>) -> ArrowHandler {
    let max_rows: &'static str = ARROW_MAX_ROWS.to_string().leak();
    let env = [
        ("TABLE_NAME", "orders"),
        ("REPORTS_TABLE", "reports"),
        ("MAX_ROWS", max_rows),
        ("ARENA_MIB", "0"),
    ];
    let config = arrow_worker::config::Config::from_env(&env).expect("config");
    ArrowHandler::new(
        arrow_worker_testkit::orders::MemoryStore::new(items, 1_000),
        config,
        2,
        None,
    )
}

/// One order item per customer `cust-000000` ... (so `n` groups by customer).
fn distinct_customers(n: usize) -> Vec<StoredItem> {
    (0..n)
        .map(|i| {
            arrow_worker_testkit::orders::order_item(
                &format!("cust-{i:06}"),
                "EUR",
                arrow_worker_testkit::orders::START_MS,
                100,
                1,
            )
        })
        .collect()
}

/// The request of a generated case, and the store it needs (`None`: the default one).
fn generate_arrow_request(spec: &Value) -> (Vec<u8>, Option<Vec<StoredItem>>) {
    let names = [
        ("MAX_ROWS", ARROW_MAX_ROWS),
        ("MAX_LIMIT", MAX_LIMIT as usize),
    ];
    let n = |key: &str| size(spec, key, &names);
    let (request, items) = match spec["generate"].as_str() {
        Some("nested_arrays") => {
            let text = format!(
                r#"{{"operation":"aggregate","query":{}}}"#,
                nested_arrays(n("depth"))
            );
            return (text.into_bytes(), None);
        }
        Some("long_operation") => (json!({"operation": "x".repeat(n("bytes"))}), None),
        Some("long_from") => (
            json!({"operation": "aggregate", "query": {"group_by": "day", "from": "x".repeat(n("bytes"))}}),
            None,
        ),
        Some("merge_overflow_long_key") => {
            let key = "k".repeat(n("bytes"));
            // Ten million orders of the largest total per partial: each
            // partial's sum fits in 64 bits, the two together do not.
            let (orders, cents) = (10_000_000u64, shared::orders::MAX_AMOUNT_CENTS);
            let partial = |segment: u32| {
                let totals = json!({"sum": orders * cents, "min": cents, "max": cents, "mean": cents as f64});
                let units = json!({"sum": orders, "min": 1, "max": 1, "mean": 1.0});
                json!({"query": {"group_by": "customer"}, "segment": {"segment": segment, "total_segments": 2},
                       "groups": [{"key": key, "count": orders, "quantity": units,
                                   "money": [{"currency": "EUR", "count": orders, "total_cents": totals}]}],
                       "groups_total": 1, "truncated": false,
                       "rows": {"scanned": orders, "matched": orders, "skipped": {"missing_field": 0, "wrong_type": 0, "out_of_range": 0}}})
            };
            (
                json!({"operation": "merge", "partials": [partial(0), partial(1)]}),
                None,
            )
        }
        Some("rows") => (
            json!({"operation": "aggregate", "query": {"group_by": "currency"}}),
            Some(arrow_worker_testkit::orders::items(n("rows"), 50, 3)),
        ),
        Some("distinct_customers") => {
            let request = if spec["segment"] == true {
                json!({"operation": "aggregate", "query": {"group_by": "customer"}, "segment": 0, "total_segments": 1})
            } else {
                json!({"operation": "aggregate", "query": {"group_by": "customer", "limit": MAX_LIMIT}})
            };
            (request, Some(distinct_customers(n("groups"))))
        }
        other => panic!("unknown generator {other:?}"),
    };
    (request.to_string().into_bytes(), items)
}

async fn arrow_case(worker: &ArrowHandler, case: &Case) {
    let payload = match serde_json::from_slice::<Value>(&case.input) {
        Ok(payload) => payload,
        Err(e) => {
            assert_eq!(case.expect(), "not_json", "{}: {e}", case.name);
            case.check_message(&e.to_string());
            return;
        }
    };
    let timeout = u64::from(e2e::function("arrow-worker").timeout_s);
    match worker
        .handle(LambdaEvent::new(payload, context(timeout)))
        .await
    {
        Ok(answer) => {
            assert_eq!(case.expect(), "ok", "{}: {answer:.300}", case.name);
            let groups = answer["groups"].as_array().map_or(0, Vec::len);
            assert!(groups <= MAX_LIMIT as usize, "{}: {groups}", case.name);
            let bytes = answer.to_string().len();
            assert!(bytes < LAMBDA_PAYLOAD_BYTES, "{}: {bytes}", case.name);
            if let Some(total) = answer["groups_total"].as_u64() {
                assert_eq!(
                    answer["truncated"],
                    total > groups as u64,
                    "{}: truncated says so",
                    case.name
                );
            }
        }
        Err(diagnostic) => {
            assert_eq!(
                diagnostic.error_type,
                case.expect(),
                "{}: {:.300}",
                case.name,
                diagnostic.error_message
            );
            case.check_message(&diagnostic.error_message);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arrow_worker_corpus() {
    let default = arrow_worker(arrow_worker_testkit::orders::items(2_000, 50, 7));
    let cases = corpus("arrow-worker", |spec| generate_arrow_request(spec).0);
    for case in &cases {
        match generate_arrow_request_store(&case.spec) {
            Some(items) => arrow_case(&arrow_worker(items), case).await,
            None => arrow_case(&default, case).await,
        }
    }
    eprintln!("arrow-worker: {} cases", cases.len());
}

/// The store a case needs, if not the default one.
fn generate_arrow_request_store(spec: &Value) -> Option<Vec<StoredItem>> {
    spec.get("generate")
        .and_then(|_| generate_arrow_request(spec).1)
}

/// An answer larger than Lambda returns is refused with a clear error. The
/// answer repeats the query, and RFC 3339 times may carry any number of
/// fraction digits: a request just under 6 MB (two such times) over 5,000
/// customers would answer more than 6 MB.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arrow_worker_refuses_an_answer_larger_than_lambda_returns() {
    let worker = arrow_worker(distinct_customers(5_000));
    let time = |digits: usize| format!("2026-11-01T00:00:00.{}Z", "0".repeat(digits));
    let request = |digits: usize| {
        json!({"operation": "aggregate",
               "query": {"group_by": "customer", "from": time(digits), "to": "2099-01-01T00:00:00Z", "limit": MAX_LIMIT}})
    };
    let small = request(0).to_string().len();
    let request = request(LAMBDA_PAYLOAD_BYTES - small - 1);
    let request_bytes = request.to_string().len();
    assert!(request_bytes < LAMBDA_PAYLOAD_BYTES, "{request_bytes}");
    let timeout = u64::from(e2e::function("arrow-worker").timeout_s);
    let refused = match worker
        .handle(LambdaEvent::new(request, context(timeout)))
        .await
    {
        Ok(answer) => panic!(
            "an answer of {} bytes was returned",
            answer.to_string().len()
        ),
        Err(refused) => refused,
    };
    assert_eq!(
        refused.error_type, "AnswerTooLarge",
        "{}",
        refused.error_message
    );
    let bytes: usize = refused
        .error_message
        .split_once("the answer is ")
        .and_then(|(_, rest)| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{}", refused.error_message));
    assert!(bytes > LAMBDA_PAYLOAD_BYTES, "{}", refused.error_message);
    assert!(refused.error_message.len() < MAX_MESSAGE_BYTES);
    eprintln!(
        "arrow-worker: a request of {request_bytes} bytes would answer {bytes} bytes: refused, AnswerTooLarge"
    );
}

// ------------------------------------------------------------ the real runtime

/// The order processor under the emulator, logging at TRACE: an SQS event the
/// runtime cannot deserialise (a record body that is not valid UTF-8, a lone
/// surrogate, not a string), or one with a record without `messageId`, fails
/// the invocation as a whole, so nothing is acknowledged and Lambda retries
/// the batch; the process lives on and answers the next event.
#[test]
fn the_runtime_fails_the_whole_batch_when_a_record_cannot_be_read() {
    let emulator = start("order-processor", &[("AWS_LAMBDA_LOG_LEVEL", "TRACE")]);
    let cases: Vec<Case> = corpus("order-processor", generate_order_body)
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

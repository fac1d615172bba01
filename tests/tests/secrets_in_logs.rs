//! No password and no order body in any log line, answer, error message or
//! span: each function as a real binary under the emulator, logging at TRACE
//! (the most the runtime can print: every level of every crate) and tracing
//! every invocation to a local X-Ray daemon, on valid and invalid input, with
//! the emulator's whole log and everything the daemon received read
//! afterwards.

use base64::Engine;
use e2e::{LocalDynamoDb, start};
use local_stack::emulator::Emulator;
use local_stack::xray_daemon::Daemon;
use serde_json::{Value, json};
use std::sync::OnceLock;

/// Distinctive passwords, each with a part that alone would show a leak. The
/// last is shaped like a field name (word characters only), as a caller who
/// sends a password as a key would.
const PASSWORDS: [(&str, &str); 5] = [
    ("correct horse battery staple 7f3a", "battery staple"),
    ("Tr0ub4dor&3 the second 7f3a", "Tr0ub4dor"),
    ("pässwörd mit ümlauten 7f3a", "mit ümlauten"),
    ("quote\" back\\slash tab\t 7f3a", "back\\slash"),
    ("hunter2_as_a_key_7f3a", "as_a_key"),
];
/// In every order's customer id: an order's content shows as this.
const ORDER_MARKER: &str = "ordmark9q";

/// The most verbose logging the functions allow (the template's format, JSON).
const TRACE: (&str, &str) = ("AWS_LAMBDA_LOG_LEVEL", "TRACE");
/// Credentials as Lambda hands them to a function (DynamoDB Local accepts
/// any): the SDK must not print them either.
const CREDENTIALS: [(&str, &str); 2] = [
    ("AWS_SECRET_ACCESS_KEY", "secret-key-9q7f-never-logged"),
    ("AWS_SESSION_TOKEN", "session-token-9q7f-never-logged"),
];

/// The X-Ray daemon every function of this test sends its spans to.
fn daemon() -> &'static Daemon {
    static DAEMON: OnceLock<Daemon> = OnceLock::new();
    DAEMON.get_or_init(|| Daemon::start(None).unwrap_or_else(|e| panic!("{e}")))
}

/// Where the functions send their spans (as `AWS_XRAY_DAEMON_ADDRESS`).
fn traced() -> (&'static str, &'static str) {
    static ADDRESS: OnceLock<String> = OnceLock::new();
    let address = ADDRESS.get_or_init(|| daemon().address().to_string());
    ("AWS_XRAY_DAEMON_ADDRESS", address.as_str())
}

/// The environment of a function using `dynamodb`, logging at TRACE.
fn env_at_trace(dynamodb: &LocalDynamoDb) -> Vec<(&str, &str)> {
    let mut env = dynamodb.env();
    env.push(TRACE);
    env.push(traced());
    env.extend(CREDENTIALS);
    env
}

/// Neither credential is in `logs`.
fn assert_no_credentials(what: &str, logs: &str) {
    for (name, value) in CREDENTIALS {
        assert!(!logs.contains(value), "{what}: {name} appears in the log");
    }
}

/// `text` as it appears raw, JSON-escaped once (a log field, an answer) and
/// twice (a JSON body inside a JSON event).
fn forms(text: &str) -> [String; 3] {
    let once = serde_json::to_string(text).expect("string");
    let once = once[1..once.len() - 1].to_owned();
    let twice = serde_json::to_string(&once).expect("string");
    let twice = twice[1..twice.len() - 1].to_owned();
    [text.to_owned(), once, twice]
}

/// No form of any password, nor a distinctive part of one, is in `text`.
fn assert_no_password(what: &str, text: &str) {
    for (password, part) in PASSWORDS {
        for form in forms(password).iter().chain(&forms(part)) {
            assert!(
                !text.contains(form.as_str()),
                "{what}: a password ({part:?}) appears in:\n{text:.2000}"
            );
        }
    }
}

/// No order body in `text`, in any form.
fn assert_no_body(what: &str, text: &str, bodies: &[String]) {
    for body in bodies {
        for form in forms(body) {
            assert!(
                !text.contains(&form),
                "{what}: an order body appears in:\n{text:.2000}"
            );
        }
    }
}

fn invoke(emulator: &Emulator, payload: &Value) -> String {
    let answer = emulator.invoke(payload.to_string()).expect("invoke");
    assert_eq!(answer.status, 200, "{}", answer.body);
    answer.body
}

fn url_event(body: &str, base64: bool) -> Value {
    let body = if base64 {
        base64::engine::general_purpose::STANDARD.encode(body)
    } else {
        body.to_owned()
    };
    json!({"version": "2.0", "rawPath": "/", "requestContext": {"http": {"method": "POST"}},
           "body": body, "isBase64Encoded": base64})
}

fn password_hasher_at_trace() {
    let emulator = start("password-hasher", &[TRACE, traced()]);
    let mut answers = hashed_and_verified(&emulator);
    answers.extend(refused(&emulator));
    answers.extend(not_json(&emulator));
    let logs = emulator.logs();
    assert!(
        logs.contains(r#""level":"TRACE""#),
        "TRACE logging is on:\n{logs:.2000}"
    );
    for answer in &answers {
        assert_no_password("password-hasher answer", answer);
    }
    assert_no_password("password-hasher log", &logs);
    eprintln!(
        "password-hasher at TRACE: {} answers, {} log lines, no password",
        answers.len(),
        logs.lines().count()
    );
}

/// The password hasher's answers to hashing [`PASSWORDS`], verifying them
/// (some refused per item), and both through a function URL.
fn hashed_and_verified(emulator: &Emulator) -> Vec<String> {
    let passwords: Vec<&str> = PASSWORDS.iter().map(|(p, _)| *p).collect();
    let hashed = invoke(
        emulator,
        &json!({"operation": "hash", "cost": 4, "passwords": passwords}),
    );
    let hashes: Value = serde_json::from_str(&hashed).expect("answer");
    let hashes = hashes["hashes"].as_array().expect("hashes").clone();
    assert_eq!(hashes.len(), PASSWORDS.len(), "{hashed}");
    let mut answers = vec![hashed];
    let verify = json!({"operation": "verify", "items": [
        {"password": PASSWORDS[0].0, "hash": hashes[0]},
        {"password": PASSWORDS[1].0, "hash": hashes[0]},
        {"password": PASSWORDS[2].0, "hash": "$2b$04$malformed"},
        {"password": PASSWORDS[3].0, "hash": PASSWORDS[3].0},
        // Refused per item, the rest of the batch answered.
        {"password": format!("{}{}", PASSWORDS[4].0, "x".repeat(72)), "hash": hashes[4]},
        {"password": format!("{}\u{0}", PASSWORDS[4].0), "hash": hashes[4]},
        {"password": PASSWORDS[4].0, "hash": hashes[4]},
    ]});
    let verified = invoke(emulator, &verify);
    assert!(
        verified.contains(r#"{"valid":true},{"valid":false}"#),
        "{verified}"
    );
    assert!(
        verified.contains(r#"{"error":"password contains a NUL byte"},{"valid":true}]"#),
        "{verified}"
    );
    answers.push(verified);
    // Function URL forms: text and base64 bodies.
    let hash_body = json!({"operation": "hash", "cost": 4, "passwords": [PASSWORDS[0].0]});
    answers.push(invoke(emulator, &url_event(&hash_body.to_string(), false)));
    answers.push(invoke(emulator, &url_event(&verify.to_string(), true)));
    answers
}

/// The password hasher's answers, direct and through a function URL, to
/// requests it refuses, each with passwords in it.
fn refused(emulator: &Emulator) -> Vec<String> {
    let mut answers = Vec::new();
    // Each with passwords in it, in every place a value can be.
    let requests = [
        json!({"operation": "hash", "cost": 3, "passwords": [PASSWORDS[0].0]}),
        json!({"operation": "hash", "cost": PASSWORDS[1].0, "passwords": [PASSWORDS[1].0]}),
        json!({"operation": PASSWORDS[2].0}),
        json!({"operation": "hash", "cost": 4, "passwords": PASSWORDS[3].0}),
        json!({"operation": "hash", "cost": 4, "passwords": [format!("{}{}", PASSWORDS[0].0, "x".repeat(72))]}),
        json!({"operation": "hash", "cost": 4, "passwords": [format!("{}\u{0}", PASSWORDS[1].0)]}),
        json!({"operation": "hash", "cost": 4, "passwords": [PASSWORDS[2].0], "salt": PASSWORDS[3].0}),
        json!({"operation": "verify", "items": [{"password": PASSWORDS[0].0, "hash": 7}]}),
        json!({"operation": "verify", "items": [{"password": [PASSWORDS[1].0], "hash": "x"}]}),
        json!({"operation": "hash", "cost": 14, "passwords": vec![PASSWORDS[2].0; 1_000]}),
        // Passwords sent as keys: no error names a caller's key.
        json!({"operation": "hash", "cost": 4, "passwords": ["x"], PASSWORDS[4].0: 1}),
        json!({"operation": "verify", "items": [{"password": "x", "hash": "y", PASSWORDS[4].0: 1}]}),
        json!({PASSWORDS[4].0: "hash"}),
    ];
    for request in &requests {
        let answer = invoke(emulator, request);
        assert!(answer.contains("errorType"), "refused: {answer:.300}");
        answers.push(answer);
        let url = invoke(emulator, &url_event(&request.to_string(), false));
        assert!(url.contains(r#""statusCode":400"#), "{url:.300}");
        answers.push(url);
    }
    answers
}

/// The password hasher's answers to payloads that are not JSON, with a
/// password in them.
fn not_json(emulator: &Emulator) -> Vec<String> {
    let mut answers = Vec::new();
    // Not JSON: refused by the runtime (direct) or the function (URL).
    let truncated = format!(
        r#"{{"operation":"hash","cost":4,"passwords":["{}"#,
        PASSWORDS[0].0
    );
    let answer = emulator.invoke(&truncated).expect("invoke");
    assert!(answer.body.contains("errorType"), "{}", answer.body);
    answers.push(answer.body);
    answers.push(invoke(emulator, &url_event(&truncated, true)));
    // Not JSON under a key that is a password: the runtime's reason for
    // refusing it must not name the key either.
    for key in [PASSWORDS[0].0, PASSWORDS[4].0] {
        let key = serde_json::to_string(key).expect("key");
        let invalid_utf8 = [format!("{{{key}: \"").as_bytes(), b"\xff\"}"].concat();
        let too_deep = format!("{{{key}: {}{}}}", "[".repeat(200), "]".repeat(200));
        let truncated = format!("{{\"operation\": \"hash\", {key}: [1, ");
        for payload in [invalid_utf8, too_deep.into_bytes(), truncated.into_bytes()] {
            let answer = emulator.invoke(&payload).expect("invoke");
            assert!(answer.body.contains("errorType"), "{}", answer.body);
            answers.push(answer.body);
        }
    }
    answers
}

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

/// Returns the bodies it sent (for the Arrow worker's check).
fn order_processor_at_trace(dynamodb: &LocalDynamoDb) -> Vec<String> {
    let env = env_at_trace(dynamodb);
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
        assert_no_body("order-processor answer", answer, &bodies);
        assert!(!answer.contains(ORDER_MARKER), "{answer}");
    }
    assert_no_body("order-processor log", &logs, &bodies);
    assert_no_credentials("order-processor log", &logs);
    // No line carries part of an order: the shared crate drops the SDK's
    // TRACE lines of requests and responses.
    check_marker_lines("order-processor", &logs, &[]);
    bodies
}

/// Every log line with part of an order (the marker) comes from one of
/// `allowed` targets; prints how many there were, by target.
fn check_marker_lines(function: &str, logs: &str, allowed: &[&str]) {
    let mut by_target: std::collections::BTreeMap<String, usize> = Default::default();
    for line in logs.lines().filter(|l| l.contains(ORDER_MARKER)) {
        let json: Value = serde_json::from_str(line).unwrap_or_else(|_| {
            panic!("{function}: part of an order in a plain line: {line:.500}")
        });
        let target = json["target"].as_str().unwrap_or_default();
        assert!(
            allowed.contains(&target),
            "{function}: part of an order in: {line:.500}"
        );
        *by_target.entry(target.to_owned()).or_default() += 1;
    }
    eprintln!("{function} at TRACE: lines with part of an order, by target: {by_target:?}");
}

fn arrow_worker_at_trace(dynamodb: &LocalDynamoDb, bodies: &[String]) {
    let env = env_at_trace(dynamodb);
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
        assert_no_body("arrow-worker answer", answer, bodies);
    }
    assert_no_body("arrow-worker log", &logs, bodies);
    assert_no_credentials("arrow-worker log", &logs);
    // The refusal of the request whose operation is an order body quotes
    // the start of that value (at most 200 characters), in the function's
    // line and the runtime's; nothing else carries part of an order.
    check_marker_lines(
        "arrow-worker",
        &logs,
        &["arrow_worker::handler", "lambda_runtime::layers::panic"],
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_password_or_order_body_in_logs_or_answers_at_trace_level() {
    password_hasher_at_trace();
    let dynamodb = LocalDynamoDb::start().await;
    let bodies = order_processor_at_trace(&dynamodb);
    arrow_worker_at_trace(&dynamodb, &bodies);
    // Every invocation's spans are sent when it ends: all are in by now.
    let spans = daemon().spans();
    let invocations = spans.iter().filter(|s| s["name"] == "invocation").count();
    assert!(
        invocations >= 10,
        "the invocations were traced: {invocations}"
    );
    let exported = serde_json::to_string(&spans).expect("spans as JSON");
    assert_no_password("spans", &exported);
    assert_no_body("spans", &exported, &bodies);
    assert!(
        !exported.contains(ORDER_MARKER),
        "part of an order in the spans"
    );
    assert_no_credentials("spans", &exported);
    eprintln!(
        "{} spans of {invocations} invocations: no secret",
        spans.len()
    );
}

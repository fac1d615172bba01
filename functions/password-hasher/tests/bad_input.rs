//! The password hasher's bad-input corpus (`tests/bad-input/`, see its
//! README) through its real handler in-process, directly and through a
//! Function URL; and Lambda's payload limits (6 MB per synchronous request
//! and response).

use base64::Engine;
use lambda_runtime::LambdaEvent;
use password_hasher::calibration::Estimator;
use password_hasher::config::Config as HasherConfig;
use serde_json::value::RawValue;
use serde_json::{Value, json};
use shared::invocation::Deadline;
use std::time::{Duration, Instant};
use testkit::bad_input::{
    Case, LAMBDA_PAYLOAD_BYTES, MAX_MESSAGE_BYTES, SECRET_MARKER, context, corpus, nested_arrays,
    size, template_env,
};

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
    u64::from(testkit::function("password-hasher").timeout_s)
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
            let password = format!("{SECRET_MARKER}{}", "x".repeat(n("bytes") - 7));
            json!({"operation": "hash", "cost": 4, "passwords": [password]})
        }
        Some("hash_batch") => {
            let passwords: Vec<String> = (0..n("count"))
                .map(|i| format!("{SECRET_MARKER}-{i}"))
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
                .map(|i| json!({"password": format!("{SECRET_MARKER}-{i}"), "hash": hash}))
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
    let cases = corpus("password-hasher", env!("CARGO_MANIFEST_DIR"), |spec| {
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
    let long_password = format!("{SECRET_MARKER}{}", "x".repeat(493));
    let refused_pairs = [
        (
            SECRET_MARKER,
            format!("$2b$31${}", "a".repeat(53)),
            "hash cost 31 is above the allowed maximum",
        ),
        (
            SECRET_MARKER,
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
        let passwords: Vec<String> = (0..n).map(|i| format!("{SECRET_MARKER}-{i}")).collect();
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
    let huge = format!("{SECRET_MARKER}{}", "x".repeat(LAMBDA_PAYLOAD_BYTES - 200));
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
        .map(|i| format!("{SECRET_MARKER}-{i}"))
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

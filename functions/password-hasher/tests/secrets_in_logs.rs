//! No password in the password hasher's log lines, answers, error messages
//! or spans: its real binary under the emulator, logging at TRACE (the most
//! the runtime can print: every level of every crate) and tracing every
//! invocation to a local X-Ray daemon, on valid and invalid input, with the
//! emulator's whole log and everything the daemon received read afterwards.

use base64::Engine;
use local_stack::emulator::Emulator;
use serde_json::{Value, json};
use testkit::secrets::{TRACE, forms, invoke, spans_of, traced};
use testkit::start;

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

#[test]
fn no_password_in_logs_answers_or_spans_at_trace_level() {
    password_hasher_at_trace();
    // Every invocation's spans are sent when it ends: all are in by now.
    assert_no_password("spans", &spans_of(5));
}

/// No password of `request` appears in `text`.
fn assert_no_password_of(request: &Value, text: &str) {
    if let Err(e) = local_stack::expectations::no_password_in(request, text) {
        panic!("{e}: {text}");
    }
}

#[test]
fn no_password_reaches_the_logs_even_at_trace_level() {
    let emulator = start(
        "password-hasher",
        &[
            ("AWS_LAMBDA_LOG_LEVEL", "TRACE"),
            ("AWS_LAMBDA_LOG_FORMAT", "JSON"),
        ],
    );
    let mut requests = Vec::new();
    for (_, payload) in testkit::events("password-hasher") {
        let answer = emulator.invoke(&payload).expect("invoke");
        assert_eq!(answer.status, 200);
        let event: Value = serde_json::from_str(&payload).expect("event");
        requests.push(event.get("requestContext").map_or(event.clone(), |_| {
            serde_json::from_str(event["body"].as_str().unwrap_or_default()).expect("body")
        }));
    }
    // Refused requests too: each names a problem but must not echo the password.
    for bad in [
        r#"{"operation":"hash","cost":3,"passwords":["refused-secret-cost"]}"#,
        r#"{"operation":"hash","cost":"refused-secret-type","passwords":["refused-secret-x"]}"#,
        r#"{"operation":"verify","items":[{"password":"refused-secret-hash","hash":"refused-secret-hash"}]}"#,
    ] {
        let answer = emulator.invoke(bad).expect("invoke");
        assert!(!answer.body.contains("refused-secret"), "{}", answer.body);
        requests.push(serde_json::from_str(bad).expect("json"));
    }
    let logs = emulator.logs();
    assert!(
        logs.contains("\"level\":\"TRACE\"") || logs.contains("\"level\":\"DEBUG\""),
        "trace logging is on:\n{logs}"
    );
    for request in &requests {
        assert_no_password_of(request, &logs);
    }
    assert!(!logs.contains("refused-secret"), "{logs}");
}

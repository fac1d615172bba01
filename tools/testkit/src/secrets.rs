//! Checks that no secret reaches a function's logs, answers or spans: the
//! most verbose logging the functions allow, a local X-Ray daemon every
//! traced invocation sends its spans to, credentials as Lambda hands them to
//! a function, and searches for a secret in every form it could appear in.

use local_stack::emulator::Emulator;
use local_stack::xray_daemon::Daemon;
use serde_json::Value;
use std::sync::OnceLock;

/// The most verbose logging the functions allow (the template's format, JSON).
pub const TRACE: (&str, &str) = ("AWS_LAMBDA_LOG_LEVEL", "TRACE");
/// Credentials as Lambda hands them to a function (DynamoDB Local accepts
/// any): the SDK must not print them either.
pub const CREDENTIALS: [(&str, &str); 2] = [
    ("AWS_SECRET_ACCESS_KEY", "secret-key-9q7f-never-logged"),
    ("AWS_SESSION_TOKEN", "session-token-9q7f-never-logged"),
];

/// The X-Ray daemon every function of this test process sends its spans to.
pub fn daemon() -> &'static Daemon {
    static DAEMON: OnceLock<Daemon> = OnceLock::new();
    DAEMON.get_or_init(|| Daemon::start(None).unwrap_or_else(|e| panic!("{e}")))
}

/// Where the functions send their spans (as `AWS_XRAY_DAEMON_ADDRESS`).
pub fn traced() -> (&'static str, &'static str) {
    static ADDRESS: OnceLock<String> = OnceLock::new();
    let address = ADDRESS.get_or_init(|| daemon().address().to_string());
    ("AWS_XRAY_DAEMON_ADDRESS", address.as_str())
}

/// `env`, logging at TRACE, traced, with Lambda's [`CREDENTIALS`].
pub fn at_trace<'a>(mut env: Vec<(&'a str, &'a str)>) -> Vec<(&'a str, &'a str)> {
    env.push(TRACE);
    env.push(traced());
    env.extend(CREDENTIALS);
    env
}

/// Neither credential is in `logs`.
pub fn assert_no_credentials(what: &str, logs: &str) {
    for (name, value) in CREDENTIALS {
        assert!(!logs.contains(value), "{what}: {name} appears in the log");
    }
}

/// `text` as it appears raw, JSON-escaped once (a log field, an answer) and
/// twice (a JSON body inside a JSON event).
pub fn forms(text: &str) -> [String; 3] {
    let once = serde_json::to_string(text).expect("string");
    let once = once[1..once.len() - 1].to_owned();
    let twice = serde_json::to_string(&once).expect("string");
    let twice = twice[1..twice.len() - 1].to_owned();
    [text.to_owned(), once, twice]
}

/// None of `secrets` (`kind`: "an order body", ...) is in `text`, in any form.
pub fn assert_absent(what: &str, text: &str, kind: &str, secrets: &[String]) {
    for secret in secrets {
        for form in forms(secret) {
            assert!(
                !text.contains(&form),
                "{what}: {kind} appears in:\n{text:.2000}"
            );
        }
    }
}

/// Every log line containing `marker` comes from one of `allowed` targets;
/// prints how many there were, by target.
pub fn check_marker_lines(function: &str, logs: &str, marker: &str, allowed: &[&str]) {
    let mut by_target: std::collections::BTreeMap<String, usize> = Default::default();
    for line in logs.lines().filter(|l| l.contains(marker)) {
        let json: Value = serde_json::from_str(line)
            .unwrap_or_else(|_| panic!("{function}: {marker} in a plain line: {line:.500}"));
        let target = json["target"].as_str().unwrap_or_default();
        assert!(
            allowed.contains(&target),
            "{function}: {marker} in: {line:.500}"
        );
        *by_target.entry(target.to_owned()).or_default() += 1;
    }
    eprintln!("{function} at TRACE: lines with {marker}, by target: {by_target:?}");
}

/// Invoke `emulator` with `payload`; the answer's body (HTTP 200).
pub fn invoke(emulator: &Emulator, payload: &Value) -> String {
    let answer = emulator.invoke(payload.to_string()).expect("invoke");
    assert_eq!(answer.status, 200, "{}", answer.body);
    answer.body
}

/// The spans the daemon received from at least `invocations` invocations, as
/// JSON text, with no credential in them.
pub fn spans_of(invocations: usize) -> String {
    let spans = daemon().spans();
    let traced = spans.iter().filter(|s| s["name"] == "invocation").count();
    assert!(
        traced >= invocations,
        "the invocations were traced: {traced}"
    );
    let exported = serde_json::to_string(&spans).expect("spans as JSON");
    assert_no_credentials("spans", &exported);
    eprintln!("{} spans of {traced} invocations", spans.len());
    exported
}

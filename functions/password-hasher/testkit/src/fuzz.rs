//! The fuzz target of the hasher's requests, defined once for both fuzzing
//! engines: the proptest harness of the test suite and the coverage-guided
//! `fuzz/` crate beside it. Not part of the function's behaviour.
//!
//! [`check`] takes a request body as bytes and sends it down every road into
//! the request parser: [`request::parse`] of the bytes, a Function URL event
//! carrying the body base64-encoded and (when UTF-8) as text, and a direct
//! invocation whose payload is the text the runtime hands over
//! ([`request::payload`], then [`request::from_value`]). All roads must give
//! the same verdict, no
//! answer may carry the password fragment [`MARKER`], and nothing may fail
//! internally (an `InternalError` is how a panic on the pool surfaces).
//!
//! A violated property comes back as `Err(what)`; a panic of the code under
//! test is left to propagate, so the engine sees it.

use base64::Engine;
use lambda_runtime::{Context, Diagnostic, LambdaEvent};
use password_hasher::calibration::Estimator;
use password_hasher::config::Config;
use password_hasher::handler::{Handler, is_function_url};
use password_hasher::request::{self, MAX_PASSWORD_BYTES, Request};
use password_hasher::secret::Secret;
use serde_json::value::RawValue;
use serde_json::{Value, json};
use std::time::Duration;

/// A password fragment that no error, log field or response may contain. It
/// holds a `-`, so it can never be echoed as an unknown field name either.
pub const MARKER: &str = "s3cr3t-";

/// A string in bcrypt's shape (cost 4), for verify requests.
const BCRYPT_SHAPED: &str = "$2b$04$abcdefghijklmnopqrstuu5Zr2MjPp0T2w9i3z6y1rB7o4m8c3l9a";

/// Names and values that steer a generator towards the request schema.
pub const VOCABULARY: &[&str] = &[
    "operation",
    "hash",
    "verify",
    "cost",
    "passwords",
    "items",
    "password",
    "s3cr3t-pw",
    BCRYPT_SHAPED,
];

/// The request bodies in the sample events (a direct invocation's payload, a
/// Function URL's decoded body), and two cheap requests carrying [`MARKER`].
pub fn seeds(events: &[Value]) -> Vec<Vec<u8>> {
    let mut seeds: Vec<Vec<u8>> = events
        .iter()
        .filter_map(|event| {
            if !is_function_url(event) {
                return serde_json::to_vec(event).ok();
            }
            let body = event["body"].as_str()?;
            if event["isBase64Encoded"] == true {
                base64::engine::general_purpose::STANDARD.decode(body).ok()
            } else {
                Some(body.as_bytes().to_vec())
            }
        })
        .collect();
    let hash = format!(r#"{{"operation":"hash","cost":4,"passwords":["{MARKER}one","b"]}}"#);
    let verify = format!(
        r#"{{"operation":"verify","items":[{{"password":"{MARKER}two","hash":"{BCRYPT_SHAPED}"}}]}}"#
    );
    seeds.extend([hash.into_bytes(), verify.into_bytes()]);
    seeds
}

/// Check one request body.
pub fn check(data: &[u8]) -> Result<(), String> {
    let limits = Config::default();
    let parsed = request::parse(data, &limits);
    match &parsed {
        Ok(request) if !limits_hold(request, &limits) => {
            return Err("an accepted request breaks a limit".into());
        }
        Ok(_) => {}
        Err(e) => clean("a parse error", &e.0)?,
    }
    let verdict = parsed.map(|_| ()).map_err(|e| e.0);
    let handler = handler()?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .map_err(|e| e.to_string())?;
    let invoke = |payload: Box<RawValue>| {
        runtime.block_on(handler.handle(LambdaEvent::new(payload, Context::default())))
    };
    let base64 = base64::engine::general_purpose::STANDARD.encode(data);
    url_answer(invoke(url_event(&base64, true)?), &verdict)?;
    if let Ok(text) = std::str::from_utf8(data) {
        url_answer(invoke(url_event(text, false)?), &verdict)?;
    }
    // The runtime only checks that a direct invocation's payload is one JSON
    // value, and hands its text over.
    let Ok(payload) = serde_json::from_slice::<Box<RawValue>>(data) else {
        return Ok(());
    };
    let value = serde_json::from_str::<Value>(payload.get()).ok();
    if value.as_ref().is_some_and(is_function_url) {
        // A request shaped like a Function URL event is served as one.
        let answer =
            invoke(payload).map_err(|d| format!("{}: {}", d.error_type, d.error_message))?;
        return http_status(&answer).map(|_| ());
    }
    // The direct road parses the runtime's text, then reads the value.
    let direct = request::payload(payload.clone())
        .and_then(|value| request::from_value(value, &limits))
        .map(|_| ())
        .map_err(|e| e.0);
    if !same_verdict(&direct, &verdict) {
        return Err("the body and the runtime's text get different verdicts".into());
    }
    match (invoke(payload), &direct) {
        (Ok(answer), Ok(())) => clean("an answer", &answer.to_string()),
        (Err(Diagnostic { error_type, .. }), Ok(())) if error_type == "DeadlineTooShort" => Ok(()),
        (Err(d), Err(message))
            if d.error_type == "InvalidRequest" && d.error_message == *message =>
        {
            Ok(())
        }
        (answer, _) => Err(format!(
            "a direct invocation answered {:?} for a body the parser {}",
            answer.map_err(|d| d.error_type),
            if direct.is_ok() { "accepts" } else { "refuses" }
        )),
    }
}

/// The same verdict on the same JSON: equal, or both "not valid JSON" (the
/// runtime's text leaves out the whitespace around the value, so positions
/// may differ).
fn same_verdict(a: &Result<(), String>, b: &Result<(), String>) -> bool {
    let not_json = |v: &Result<(), String>| {
        v.as_ref()
            .is_err_and(|m| m.starts_with("request is not valid JSON"))
    };
    a == b || (not_json(a) && not_json(b))
}

/// Every limit of an accepted request holds.
fn limits_hold(request: &Request, limits: &Config) -> bool {
    let password_ok = |p: &Secret| {
        (1..=MAX_PASSWORD_BYTES).contains(&p.expose().len()) && !p.expose().contains(&0)
    };
    (1..=limits.batch).contains(&request.len())
        && match request {
            Request::Hash { passwords, cost } => {
                (limits.min_cost..=limits.max_cost).contains(cost)
                    && passwords.iter().all(password_ok)
            }
            // A password that breaks the rule is its pair's error, never hashed.
            Request::Verify { items } => items
                .iter()
                .all(|pair| pair.password.as_ref().map_or(true, password_ok)),
        }
}

/// A message is not empty and carries no password.
fn clean(what: &str, message: &str) -> Result<(), String> {
    if message.trim().is_empty() {
        Err(format!("{what} without a message"))
    } else if message.contains(MARKER) {
        Err(format!("{what} carries a password"))
    } else {
        Ok(())
    }
}

/// A Function URL answer: 200 when the parser accepts (or 400 when the work
/// would outlast the deadline), else 400 with the parser's own message.
fn url_answer(
    answer: Result<Value, Diagnostic>,
    verdict: &Result<(), String>,
) -> Result<(), String> {
    let answer = answer.map_err(|d| format!("a Function URL event got a function error: {d:?}"))?;
    let (status, body) = http_status(&answer)?;
    let error_type = body["errorType"].as_str();
    match (status, verdict) {
        (200, Ok(())) => Ok(()),
        (400, Ok(())) if error_type == Some("DeadlineTooShort") => Ok(()),
        (400, Err(message)) if body["error"] == message.as_str() => Ok(()),
        _ => Err(format!(
            "a Function URL answered {status} ({error_type:?}) for a body the parser {}",
            if verdict.is_ok() {
                "accepts"
            } else {
                "refuses"
            }
        )),
    }
}

/// The status and decoded body of a Function URL answer; never a 500, never a password.
fn http_status(answer: &Value) -> Result<(u64, Value), String> {
    let text = answer["body"].as_str().unwrap_or_default();
    clean("a Function URL answer", text)?;
    let body: Value = serde_json::from_str(text).map_err(|e| format!("answer body: {e}"))?;
    match answer["statusCode"].as_u64() {
        Some(status @ (200 | 400 | 405)) => Ok((status, body)),
        status => Err(format!("a Function URL answered {status:?}: {body}")),
    }
}

/// A Function URL (payload format 2.0) POST carrying `body`, as the runtime
/// hands it over.
fn url_event(body: &str, base64: bool) -> Result<Box<RawValue>, String> {
    let event = json!({
        "version": "2.0",
        "rawPath": "/",
        "requestContext": {"http": {"method": "POST"}},
        "body": body,
        "isBase64Encoded": base64,
    });
    serde_json::value::to_raw_value(&event).map_err(|e| e.to_string())
}

/// The real handler with the default limits, one worker, and an estimate of
/// 6 s per cost-4 hash: whatever it accepts is at most 3 cost-4 hashes of real
/// work (18 s of the 23.2 s it may plan: 80% of the 29 s that
/// [`shared::invocation::Deadline`] leaves an invocation without a deadline,
/// 30 s less its 1 s margin), so a fuzz run measures the parsing, not bcrypt.
fn handler() -> Result<Handler, String> {
    let mut init = shared::Init::decide(&[]).map_err(|e| e.to_string())?;
    // One worker on one whole vCPU, whatever this machine has.
    init.vcpus = shared::vcpus::detect(&shared::vcpus::Inputs {
        worker_count: Some("1".into()),
        memory_mb: None,
        cgroup: shared::vcpus::Cgroup::Absent,
        available: 1,
    })
    .map_err(|e| e.to_string())?;
    let estimator = Estimator::from_sample(Duration::from_secs(6), 4);
    Ok(Handler::new(init, Config::default(), estimator))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_and_refusals_pass_the_checks() {
        let events = [json!({"operation": "hash", "cost": 4, "passwords": ["x"]})];
        for seed in seeds(&events) {
            check(&seed).expect("checks hold");
        }
        for body in [
            &b"{not json"[..],
            b"[]",
            b"\xff",
            b"",
            // The runtime passes these on; the parser refuses them.
            br#" {"a": "\ud800"}"#,
            br#"{"operation": "verify", "items": [{"password": "", "hash": "x"}]}"#,
        ] {
            check(body).expect("checks hold");
        }
    }

    #[test]
    fn the_handler_plans_at_most_three_cost_4_hashes() {
        let handler = handler().expect("handler");
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        let hash = |n: usize| {
            let payload = json!({"operation": "hash", "cost": 4, "passwords": vec!["pw"; n]});
            let payload = serde_json::value::to_raw_value(&payload).expect("raw");
            runtime.block_on(handler.handle(LambdaEvent::new(payload, Context::default())))
        };
        assert!(hash(3).is_ok());
        let refused = hash(4).expect_err("four cost-4 hashes are 24 s of the 23.2 s");
        assert_eq!(refused.error_type, "DeadlineTooShort");
    }

    #[test]
    fn a_message_with_the_marker_is_reported() {
        assert!(clean("x", &format!("bad {MARKER}pw")).is_err());
        assert!(clean("x", " ").is_err());
        assert!(clean("x", "cost 3 is outside").is_ok());
    }
}

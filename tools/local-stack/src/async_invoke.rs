//! What Lambda does with an event it accepted for an asynchronous invocation
//! (`InvocationType: Event`), shared by the Lambda Invoke API
//! ([`crate::lambda_api`]) and EventBridge Scheduler ([`crate::schedule`]).
//!
//! A function error (the runtime's `errorType` answer, or an HTTP status
//! other than 200) is retried by Lambda itself:
//! `EventInvokeConfig.MaximumRetryAttempts` times (default 2, so a failing
//! event runs three times). After the last attempt Lambda sends the payload,
//! unchanged, to the function's `DeadLetterQueue` with the message attributes
//! `RequestID` (the invocation's id, the same for every attempt), `ErrorCode`
//! (a 3-digit HTTP status: 200 for a function error) and `ErrorMessage` (at
//! most 1 KB); without one the event is discarded.
//!
//! Lambda waits about 1 minute before its first retry and 2 before its
//! second; locally the n-th retry waits n × [`Config::delay`] (60 s gives
//! Lambda's timing; the local stack uses [`LOCAL_RETRY_DELAY`]).

use crate::elasticmq::error_text;
use crate::emulator::Invocation;
use aws_sdk_sqs::Client;
use aws_sdk_sqs::types::MessageAttributeValue;
use std::future::Future;
use std::hash::{BuildHasher, Hasher};
use std::time::Duration;
use tokio::time::sleep;

/// The wait unit between retries in local runs: short, so that a failing
/// event reaches its dead-letter queue within seconds.
pub const LOCAL_RETRY_DELAY: Duration = Duration::from_millis(500);

/// The most `ErrorMessage` holds, in bytes (Lambda truncates to 1 KB).
pub const ERROR_MESSAGE_LIMIT: usize = 1024;

/// Lambda's default `EventInvokeConfig.MaximumRetryAttempts`.
pub const DEFAULT_RETRIES: u32 = 2;

/// `ErrorCode` of an attempt the environment did not answer at all.
const NO_ANSWER: u16 = 500;

/// A function's asynchronous invocation settings.
#[derive(Debug, Clone)]
pub struct Config {
    /// `EventInvokeConfig.MaximumRetryAttempts`: 0, 1 or 2.
    pub retries: u32,
    /// The function's `DeadLetterQueue`, if it has one.
    pub dead_letter: Option<DeadLetter>,
    /// The wait unit between retries.
    pub delay: Duration,
}

impl Default for Config {
    /// Lambda's defaults (2 retries, no dead-letter queue), local waits.
    fn default() -> Self {
        Self {
            retries: DEFAULT_RETRIES,
            dead_letter: None,
            delay: LOCAL_RETRY_DELAY,
        }
    }
}

/// An SQS queue dead letters go to.
#[derive(Debug, Clone)]
pub struct DeadLetter {
    /// A client of the queue's server.
    pub sqs: Client,
    /// The queue's URL.
    pub queue_url: String,
}

/// How an accepted event ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The function answered without an error.
    Succeeded,
    /// Every attempt failed; the event is in the function's `DeadLetterQueue`.
    DeadLettered(Failure),
    /// Every attempt failed and the function has no `DeadLetterQueue`.
    Discarded(Failure),
}

/// An accepted event once Lambda is done with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Handled {
    /// Invocations run (the first and Lambda's retries).
    pub attempts: u32,
    /// How it ended.
    pub outcome: Outcome,
}

/// The last failure of an event, as Lambda reports it to the dead-letter queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// `RequestID`: the invocation's id.
    pub request_id: String,
    /// `ErrorCode`: the HTTP status of the last attempt (200 for a function error).
    pub error_code: u16,
    /// `ErrorMessage`: the function's `errorMessage` (else the answer), at
    /// most [`ERROR_MESSAGE_LIMIT`] bytes.
    pub error_message: String,
}

/// Run an accepted event: `invoke` runs the function once with the event's
/// payload (`payload`, what a final failure dead-letters); `request_id` is the
/// invocation's id. Retries and the dead-letter queue per `config`. `Err`
/// only if the dead-letter queue refuses the event.
pub async fn run<F, Fut>(
    payload: &[u8],
    request_id: &str,
    config: &Config,
    invoke: F,
) -> Result<Handled, String>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Invocation, String>>,
{
    let mut invoke = invoke;
    let first = invoke().await;
    handle(first, payload, request_id, config, invoke).await
}

/// [`run`] from the answer of the first attempt, `first` (made by the caller:
/// Scheduler's delivery is that attempt).
pub async fn handle<F, Fut>(
    first: Result<Invocation, String>,
    payload: &[u8],
    request_id: &str,
    config: &Config,
    mut invoke: F,
) -> Result<Handled, String>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Invocation, String>>,
{
    let mut answer = first;
    let mut attempts = 1_u32;
    loop {
        let failed = match &answer {
            Ok(answer) => failure(answer, request_id),
            Err(error) => Some(Failure {
                request_id: request_id.to_owned(),
                error_code: NO_ANSWER,
                error_message: truncate(error, ERROR_MESSAGE_LIMIT).to_owned(),
            }),
        };
        let Some(failed) = failed else {
            return Ok(Handled {
                attempts,
                outcome: Outcome::Succeeded,
            });
        };
        if attempts > config.retries {
            let outcome = match &config.dead_letter {
                None => Outcome::Discarded(failed),
                Some(queue) => {
                    dead_letter(queue, payload, &failed).await?;
                    Outcome::DeadLettered(failed)
                }
            };
            return Ok(Handled { attempts, outcome });
        }
        sleep(config.delay.saturating_mul(attempts)).await;
        attempts += 1;
        answer = invoke().await;
    }
}

/// The failure in an answer, if it is one: an HTTP status other than 200, or
/// the runtime's `{"errorType", "errorMessage"}` object.
pub fn failure(answer: &Invocation, request_id: &str) -> Option<Failure> {
    let json = answer.json().ok();
    let error_type = json.as_ref().and_then(|j| j.get("errorType"));
    if answer.status == 200 && error_type.is_none() {
        return None;
    }
    let message = json
        .as_ref()
        .and_then(|j| j.get("errorMessage"))
        .and_then(serde_json::Value::as_str)
        .unwrap_or(&answer.body);
    Some(Failure {
        request_id: request_id.to_owned(),
        error_code: answer.status,
        error_message: truncate(message, ERROR_MESSAGE_LIMIT).to_owned(),
    })
}

/// Send `payload` to `queue` as Lambda dead-letters an asynchronous event.
async fn dead_letter(queue: &DeadLetter, payload: &[u8], failure: &Failure) -> Result<(), String> {
    let attribute = |kind: &str, value: String| {
        MessageAttributeValue::builder()
            .data_type(kind)
            .string_value(value)
            .build()
            .map_err(|e| e.to_string())
    };
    queue
        .sqs
        .send_message()
        .queue_url(&queue.queue_url)
        .message_body(String::from_utf8_lossy(payload))
        .message_attributes(
            "RequestID",
            attribute("String", failure.request_id.clone())?,
        )
        .message_attributes(
            "ErrorCode",
            attribute("Number", failure.error_code.to_string())?,
        )
        .message_attributes(
            "ErrorMessage",
            attribute("String", failure.error_message.clone())?,
        )
        .send()
        .await
        .map_err(|e| format!("dead-letter to {}: {}", queue.queue_url, error_text(&e)))?;
    Ok(())
}

/// The longest prefix of `text` of at most `limit` bytes that ends on a
/// character boundary.
pub fn truncate(text: &str, limit: usize) -> &str {
    let mut end = text.len().min(limit);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// A random request id shaped like Lambda's (a version-4 UUID).
pub fn request_id() -> String {
    let random = || {
        std::collections::hash_map::RandomState::new()
            .build_hasher()
            .finish()
    };
    let (high, low) = (random(), random());
    let high = (high & !0xF000) | 0x4000;
    let low = (low & !(0b11 << 62)) | (0b10 << 62);
    format!(
        "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        high >> 32,
        (high >> 16) & 0xFFFF,
        high & 0xFFFF,
        low >> 48,
        low & 0xFFFF_FFFF_FFFF
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;
    use tokio::time::Instant;

    fn answer(status: u16, body: &str) -> Result<Invocation, String> {
        Ok(Invocation {
            status,
            body: body.into(),
        })
    }

    /// Run with answers given in turn (the last one repeated); the paused
    /// clock's time at each attempt.
    async fn run_with(
        retries: u32,
        answers: Vec<Result<Invocation, String>>,
    ) -> (Handled, Vec<Duration>) {
        let calls = Mutex::new(Vec::new());
        let start = Instant::now();
        let config = Config {
            retries,
            dead_letter: None,
            delay: Duration::from_secs(60),
        };
        let handled = run(b"{}", "id", &config, || {
            let mut calls = calls.lock().expect("calls");
            let index = calls.len().min(answers.len() - 1);
            calls.push(start.elapsed());
            std::future::ready(answers[index].clone())
        })
        .await
        .expect("no dead-letter queue to fail");
        (handled, calls.into_inner().expect("calls"))
    }

    #[tokio::test(start_paused = true)]
    async fn a_function_error_is_retried_one_then_two_minutes_later_then_discarded() {
        let error = r#"{"errorType":"DynamoDBError","errorMessage":"scan failed"}"#;
        let (handled, at) = run_with(2, vec![answer(200, error)]).await;
        let secs: Vec<u64> = at.iter().map(Duration::as_secs).collect();
        assert_eq!(secs, [0, 60, 180]);
        assert_eq!(handled.attempts, 3);
        assert_eq!(
            handled.outcome,
            Outcome::Discarded(Failure {
                request_id: "id".into(),
                error_code: 200,
                error_message: "scan failed".into()
            })
        );
    }

    #[tokio::test(start_paused = true)]
    async fn success_ends_the_retries_and_no_answer_is_a_failure() {
        let (handled, _) = run_with(2, vec![answer(502, "bad"), answer(200, "{}")]).await;
        assert_eq!((handled.attempts, handled.outcome), (2, Outcome::Succeeded));
        let (handled, _) = run_with(0, vec![Err("refused".into())]).await;
        assert_eq!(handled.attempts, 1);
        assert!(
            matches!(&handled.outcome, Outcome::Discarded(f) if f.error_code == 500 && f.error_message == "refused"),
            "{handled:?}"
        );
        let (handled, _) = run_with(1, vec![answer(200, r#"{"ok":1}"#)]).await;
        assert_eq!((handled.attempts, handled.outcome), (1, Outcome::Succeeded));
    }

    #[test]
    fn error_messages_are_cut_at_one_kilobyte_on_a_character_boundary() {
        let long = format!("{}é and more", "x".repeat(1023));
        let body = serde_json::json!({"errorType": "E", "errorMessage": long}).to_string();
        let cut = failure(&Invocation { status: 200, body }, "id").expect("a failure");
        assert_eq!(cut.error_message, "x".repeat(1023));
        let ok = Invocation {
            status: 200,
            body: "{}".into(),
        };
        assert!(failure(&ok, "id").is_none());
    }

    #[test]
    fn request_ids_are_distinct_version_4_uuids() {
        let (a, b) = (request_id(), request_id());
        assert_ne!(a, b);
        let parts: Vec<usize> = a.split('-').map(str::len).collect();
        assert_eq!(parts, [8, 4, 4, 4, 12], "{a}");
        assert_eq!(a.as_bytes()[14], b'4', "{a}");
        assert!(a.chars().all(|c| c == '-' || c.is_ascii_hexdigit()), "{a}");
    }
}

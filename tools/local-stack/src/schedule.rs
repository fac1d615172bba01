//! A `ScheduleV2` event fired on demand, as EventBridge Scheduler and Lambda
//! handle it when the schedule's time comes.
//!
//! Two layers retry, each its own kind of failure:
//!
//! - **Scheduler** invokes the function asynchronously (`InvocationType:
//!   Event`) with the schedule's `Input` as the payload, its context
//!   attributes replaced at each delivery ([`payload`]:
//!   `<aws.scheduler.scheduled-time>` and the rest). Only when Lambda does
//!   not accept the event (the `Invoke` call fails) does Scheduler retry, with
//!   exponential backoff, per the schedule's `RetryPolicy`
//!   (`MaximumRetryAttempts`, `MaximumEventAgeInSeconds`); after that the
//!   event goes to the schedule's own `DeadLetterConfig`, which the local stack
//!   does not run: it reports the event [`Outcome::Undelivered`]. Locally,
//!   "not accepted" is the emulator not answering at all.
//! - **Lambda** owns the event once accepted. A function error (the runtime's
//!   `errorType` answer, or an HTTP status other than 200) is retried by Lambda
//!   itself: `EventInvokeConfig.MaximumRetryAttempts` times (default 2, so a
//!   failing daily report runs three times). After the last attempt Lambda sends
//!   the payload, unchanged, to the function's `DeadLetterQueue` with the
//!   message attributes `RequestID` (the invocation's id, the same for every
//!   attempt), `ErrorCode` (a 3-digit HTTP status: 200 for a function error)
//!   and `ErrorMessage` (at most 1 KB); without one the event is discarded.
//!
//! Lambda waits about 1 minute before its first retry and 2 before its
//! second; Scheduler's backoff is of the same order. Locally every wait is a
//! multiple of a `delay` the caller gives (the runner uses
//! [`LOCAL_RETRY_DELAY`]): Lambda's n-th retry waits n × `delay` (`delay` = 60 s
//! gives Lambda's timing), Scheduler's n-th waits 2^(n-1) × `delay`.

use crate::elasticmq::{LocalQueue, error_text};
use crate::emulator::Invocation;
use crate::template::Schedule;
use aws_sdk_sqs::Client;
use aws_sdk_sqs::types::MessageAttributeValue;
use std::hash::{BuildHasher, Hasher};
use std::time::Duration;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use tokio::time::{Instant, sleep};

/// The wait unit between retries in local runs: short, so that a failing
/// event reaches its dead-letter queue within seconds.
pub const LOCAL_RETRY_DELAY: Duration = Duration::from_millis(500);

/// The most `ErrorMessage` holds, in bytes (Lambda truncates to 1 KB).
pub const ERROR_MESSAGE_LIMIT: usize = 1024;

/// What became of one firing of a schedule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Firing {
    /// Invocations tried (Scheduler's deliveries and Lambda's retries).
    pub attempts: u32,
    /// The payload of the last delivery: what Lambda ran (and retried, and
    /// dead-lettered).
    pub payload: String,
    /// How it ended.
    pub outcome: Outcome,
}

/// How a firing ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The function answered without an error.
    Succeeded,
    /// Every attempt failed; the event is in the function's `DeadLetterQueue`.
    DeadLettered(Failure),
    /// Every attempt failed and the function has no `DeadLetterQueue`.
    Discarded(Failure),
    /// Lambda never accepted the event within Scheduler's `RetryPolicy`.
    Undelivered(String),
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

impl std::fmt::Display for Firing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let plural = if self.attempts == 1 { "" } else { "s" };
        write!(f, "{} attempt{plural}, ", self.attempts)?;
        match &self.outcome {
            Outcome::Succeeded => write!(f, "succeeded"),
            Outcome::DeadLettered(e) => write!(
                f,
                "dead-lettered (ErrorCode {}, ErrorMessage {:?})",
                e.error_code, e.error_message
            ),
            Outcome::Discarded(e) => write!(
                f,
                "discarded, no DeadLetterQueue (ErrorCode {}, ErrorMessage {:?})",
                e.error_code, e.error_message
            ),
            Outcome::Undelivered(e) => write!(f, "never accepted: {e}"),
        }
    }
}

/// The ARN of `schedule` (in Scheduler's default group).
pub fn schedule_arn(schedule: &Schedule) -> String {
    format!(
        "arn:aws:scheduler:{}:{}:schedule/default/{}",
        crate::local_aws::REGION,
        crate::moto::ACCOUNT_ID,
        schedule.name
    )
}

/// The payload of one delivery of `schedule`: its `Input` with the context
/// attributes Scheduler replaces: `<aws.scheduler.scheduled-time>` (the time
/// the schedule fired for, to the second, the same in every delivery of one
/// firing), `<aws.scheduler.execution-id>` (one per delivery),
/// `<aws.scheduler.attempt-number>` (1 for the first delivery) and
/// `<aws.scheduler.schedule-arn>`.
pub fn payload(
    schedule: &Schedule,
    scheduled_time: OffsetDateTime,
    attempt: u32,
    execution_id: &str,
) -> String {
    let time = scheduled_time
        .to_offset(time::UtcOffset::UTC)
        .replace_nanosecond(0)
        .ok()
        .and_then(|t| t.format(&Rfc3339).ok())
        .unwrap_or_default();
    schedule
        .input
        .replace("<aws.scheduler.scheduled-time>", &time)
        .replace("<aws.scheduler.execution-id>", execution_id)
        .replace("<aws.scheduler.attempt-number>", &attempt.to_string())
        .replace("<aws.scheduler.schedule-arn>", &schedule_arn(schedule))
}

/// Fire `schedule` once, for `scheduled_time`: `invoke` runs the function
/// with a payload (the emulator's synchronous invoke stands for Lambda
/// running the accepted event); a final failure goes to the function's
/// dead-letter queue, one of `queues`, through `sqs`. Retries wait multiples
/// of `delay` (see the module doc). `Err` only if the dead-letter queue is
/// missing or refuses the event.
pub async fn fire(
    schedule: &Schedule,
    scheduled_time: OffsetDateTime,
    invoke: &dyn Fn(&[u8]) -> Result<Invocation, String>,
    sqs: &Client,
    queues: &[LocalQueue],
    delay: Duration,
) -> Result<Firing, String> {
    let dead_letters = match &schedule.dead_letter_queue {
        None => None,
        Some(id) => Some(
            queues
                .iter()
                .find(|q| q.spec.logical_id == *id)
                .ok_or_else(|| format!("{}: no local queue {id}", schedule.name))?,
        ),
    };
    let request_id = request_id();
    let first = Instant::now();
    let max_age = Duration::from_secs(u64::from(schedule.retry_policy.maximum_event_age_s));
    let (mut attempts, mut refused, mut failed) = (0_u32, 0_u32, 0_u32);
    // A new delivery while Lambda refuses; Lambda's own retries run the
    // payload it accepted.
    let mut payload = self::payload(schedule, scheduled_time, 1, &execution_id());
    loop {
        attempts += 1;
        let answer = match invoke(payload.as_bytes()) {
            Ok(answer) => answer,
            Err(error) => {
                let wait = delay.saturating_mul(1 << refused.min(16));
                refused += 1;
                if refused > schedule.retry_policy.maximum_retry_attempts
                    || first.elapsed() + wait > max_age
                {
                    return Ok(Firing {
                        attempts,
                        payload,
                        outcome: Outcome::Undelivered(error),
                    });
                }
                sleep(wait).await;
                payload = self::payload(schedule, scheduled_time, refused + 1, &execution_id());
                continue;
            }
        };
        let Some(failure) = failure(&answer, &request_id) else {
            return Ok(Firing {
                attempts,
                payload,
                outcome: Outcome::Succeeded,
            });
        };
        if failed == schedule.lambda_retries {
            let outcome = match dead_letters {
                None => Outcome::Discarded(failure),
                Some(queue) => {
                    dead_letter(sqs, queue, &payload, &failure).await?;
                    Outcome::DeadLettered(failure)
                }
            };
            return Ok(Firing {
                attempts,
                payload,
                outcome,
            });
        }
        failed += 1;
        sleep(delay.saturating_mul(failed)).await;
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
async fn dead_letter(
    sqs: &Client,
    queue: &LocalQueue,
    payload: &str,
    failure: &Failure,
) -> Result<(), String> {
    let attribute = |kind: &str, value: String| {
        MessageAttributeValue::builder()
            .data_type(kind)
            .string_value(value)
            .build()
            .map_err(|e| e.to_string())
    };
    sqs.send_message()
        .queue_url(&queue.url)
        .message_body(payload)
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
        .map_err(|e| format!("dead-letter to {}: {}", queue.url, error_text(&e)))?;
    Ok(())
}

/// The longest prefix of `text` of at most `limit` bytes that ends on a
/// character boundary.
fn truncate(text: &str, limit: usize) -> &str {
    let mut end = text.len().min(limit);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// A random execution id, as Scheduler gives each delivery.
fn execution_id() -> String {
    request_id()
}

/// A random request id shaped like Lambda's (a version-4 UUID).
fn request_id() -> String {
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
    use crate::template::RetryPolicy;
    use std::sync::Mutex;

    fn schedule(lambda_retries: u32, scheduler_retries: u32) -> Schedule {
        Schedule {
            function: "f".into(),
            name: "Tick".into(),
            expression: "rate(1 day)".into(),
            timezone: "UTC".into(),
            input: r#"{"operation": "daily_report", "scheduled_time": "<aws.scheduler.scheduled-time>", "attempt": "<aws.scheduler.attempt-number>"}"#.into(),
            retry_policy: RetryPolicy {
                maximum_retry_attempts: scheduler_retries,
                maximum_event_age_s: 86_400,
            },
            lambda_retries,
            dead_letter_queue: None,
        }
    }

    fn answer(status: u16, body: &str) -> Result<Invocation, String> {
        Ok(Invocation {
            status,
            body: body.into(),
        })
    }

    /// Fire with answers given in turn (the last one repeated); the payloads
    /// and the paused clock's time at each call.
    async fn fire_with(
        schedule: &Schedule,
        answers: Vec<Result<Invocation, String>>,
    ) -> (Firing, Vec<(String, Duration)>) {
        let calls = Mutex::new(Vec::new());
        let start = Instant::now();
        let invoke = |payload: &[u8]| {
            let mut calls = calls.lock().expect("calls");
            let index = calls.len().min(answers.len() - 1);
            calls.push((
                String::from_utf8_lossy(payload).into_owned(),
                start.elapsed(),
            ));
            answers[index].clone()
        };
        let sqs = crate::elasticmq::client(crate::local_aws::NO_SERVER);
        let at = OffsetDateTime::from_unix_timestamp(1_795_652_100).expect("a time");
        let firing = fire(schedule, at, &invoke, &sqs, &[], Duration::from_secs(60))
            .await
            .expect("no dead-letter queue to fail");
        (firing, calls.into_inner().expect("calls"))
    }

    #[tokio::test(start_paused = true)]
    async fn a_function_error_is_retried_by_lambda_one_then_two_minutes_later() {
        let error = r#"{"errorType":"DynamoDBError","errorMessage":"scan failed"}"#;
        let (firing, calls) = fire_with(&schedule(2, 185), vec![answer(200, error)]).await;
        let Outcome::Discarded(failure) = &firing.outcome else {
            panic!("{firing:?}");
        };
        assert_eq!(firing.attempts, 3);
        assert_eq!(
            (failure.error_code, failure.error_message.as_str()),
            (200, "scan failed")
        );
        let at: Vec<u64> = calls.iter().map(|(_, t)| t.as_secs()).collect();
        assert_eq!(at, [0, 60, 180]);
        // Lambda retries the payload it accepted: Scheduler's first delivery.
        let accepted = r#"{"operation": "daily_report", "scheduled_time": "2026-11-26T00:15:00Z", "attempt": "1"}"#;
        assert!(calls.iter().all(|(p, _)| p == accepted), "{calls:?}");
        assert_eq!(firing.payload, accepted);
    }

    #[tokio::test(start_paused = true)]
    async fn success_after_a_retry_and_no_retries_when_configured_so() {
        let error = answer(502, "bad gateway");
        let (firing, _) =
            fire_with(&schedule(2, 185), vec![error.clone(), answer(200, "{}")]).await;
        assert_eq!((firing.attempts, firing.outcome), (2, Outcome::Succeeded));
        let (firing, _) = fire_with(&schedule(0, 185), vec![error]).await;
        assert_eq!(firing.attempts, 1);
        assert!(
            matches!(firing.outcome, Outcome::Discarded(f) if f.error_code == 502 && f.error_message == "bad gateway")
        );
    }

    #[tokio::test(start_paused = true)]
    async fn an_event_lambda_does_not_accept_is_retried_by_schedulers_policy() {
        let refused = || Err::<Invocation, _>("connection refused".to_owned());
        let (firing, calls) = fire_with(&schedule(2, 3), vec![refused()]).await;
        assert_eq!(firing.attempts, 4);
        assert_eq!(
            firing.outcome,
            Outcome::Undelivered("connection refused".into())
        );
        let at: Vec<u64> = calls.iter().map(|(_, t)| t.as_secs()).collect();
        assert_eq!(at, [0, 60, 180, 420]);
        // Each delivery is a new attempt of the same scheduled time.
        for (n, (payload, _)) in calls.iter().enumerate() {
            let payload: serde_json::Value = serde_json::from_str(payload).expect("JSON");
            assert_eq!(payload["scheduled_time"], "2026-11-26T00:15:00Z");
            assert_eq!(payload["attempt"], (n + 1).to_string());
        }
        // Accepted at last: Lambda's own retries follow.
        let error = answer(200, r#"{"errorType":"E","errorMessage":"m"}"#);
        let (firing, _) = fire_with(&schedule(1, 3), vec![refused(), error]).await;
        assert_eq!(firing.attempts, 3);
        assert!(matches!(firing.outcome, Outcome::Discarded(_)));
    }

    #[test]
    fn error_messages_are_cut_at_one_kilobyte_on_a_character_boundary() {
        let long = format!("{}é and more", "x".repeat(1023));
        let body = serde_json::json!({"errorType": "E", "errorMessage": long}).to_string();
        let cut = failure(&Invocation { status: 200, body }, "id").expect("a failure");
        assert_eq!(cut.error_message, "x".repeat(1023));
        assert!(
            failure(
                &Invocation {
                    status: 200,
                    body: "{}".into()
                },
                "id"
            )
            .is_none()
        );
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

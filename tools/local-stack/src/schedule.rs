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
//! - **Lambda** owns the event once accepted: its own retries after a
//!   function error (`EventInvokeConfig.MaximumRetryAttempts`), then the
//!   function's `DeadLetterQueue`, as for any asynchronous invocation
//!   ([`crate::async_invoke`], shared with the Lambda Invoke API).
//!
//! Lambda waits about 1 minute before its first retry and 2 before its
//! second; Scheduler's backoff is of the same order. Locally every wait is a
//! multiple of a `delay` the caller gives (the runner uses
//! [`LOCAL_RETRY_DELAY`]): Lambda's n-th retry waits n × `delay` (`delay` = 60 s
//! gives Lambda's timing), Scheduler's n-th waits 2^(n-1) × `delay`.

use crate::async_invoke::{self, Config, DeadLetter};
use crate::elasticmq::LocalQueue;
use crate::emulator::Invocation;
use crate::template::Schedule;
use aws_sdk_sqs::Client;
use std::time::Duration;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use tokio::time::{Instant, sleep};

pub use crate::async_invoke::{ERROR_MESSAGE_LIMIT, Failure, LOCAL_RETRY_DELAY, failure};

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
    let dead_letter = match &schedule.dead_letter_queue {
        None => None,
        Some(id) => Some(DeadLetter {
            sqs: sqs.clone(),
            queue_url: queues
                .iter()
                .find(|q| q.spec.logical_id == *id)
                .ok_or_else(|| format!("{}: no local queue {id}", schedule.name))?
                .url
                .clone(),
        }),
    };
    let first = Instant::now();
    let max_age = Duration::from_secs(u64::from(schedule.retry_policy.maximum_event_age_s));
    let mut refused = 0_u32;
    // A new delivery while Lambda refuses the event; once it accepts one,
    // Lambda's own retries run the payload it accepted.
    let mut payload = self::payload(schedule, scheduled_time, 1, &execution_id());
    let answer = loop {
        match invoke(payload.as_bytes()) {
            Ok(answer) => break answer,
            Err(error) => {
                let wait = delay.saturating_mul(1 << refused.min(16));
                refused += 1;
                if refused > schedule.retry_policy.maximum_retry_attempts
                    || first.elapsed() + wait > max_age
                {
                    return Ok(Firing {
                        attempts: refused,
                        payload,
                        outcome: Outcome::Undelivered(error),
                    });
                }
                sleep(wait).await;
                payload = self::payload(schedule, scheduled_time, refused + 1, &execution_id());
            }
        }
    };
    let config = Config {
        retries: schedule.lambda_retries,
        dead_letter,
        delay,
    };
    let handled = async_invoke::handle(
        Ok(answer),
        payload.as_bytes(),
        &async_invoke::request_id(),
        &config,
        || std::future::ready(invoke(payload.as_bytes())),
    )
    .await?;
    let outcome = match handled.outcome {
        async_invoke::Outcome::Succeeded => Outcome::Succeeded,
        async_invoke::Outcome::DeadLettered(failure) => Outcome::DeadLettered(failure),
        async_invoke::Outcome::Discarded(failure) => Outcome::Discarded(failure),
    };
    Ok(Firing {
        attempts: refused + handled.attempts,
        payload,
        outcome,
    })
}

/// A random execution id, as Scheduler gives each delivery.
fn execution_id() -> String {
    async_invoke::request_id()
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
}

//! The template's `ScheduleV2` events fired on the local stack as EventBridge
//! Scheduler fires them: an asynchronous invocation with the schedule's
//! `Input`, Lambda's retries after a function error, and the event in the
//! function's `DeadLetterQueue` (with Lambda's error attributes) after the last.

mod support;

use aws_sdk_sqs::types::Message;
use local_stack::elasticmq::take_all;
use local_stack::emulator::Emulator;
use local_stack::local_aws::{NO_SERVER, function_env};
use local_stack::schedule::{Firing, Outcome, fire};
use local_stack::template::Schedule;
use std::time::Duration;
use support::{LocalQueues, servers, servers_env, start, template};

/// The time the schedule fires for in these tests: Nov 4, 00:15 UTC, long
/// before the clock.
fn scheduled_time() -> time::OffsetDateTime {
    time::OffsetDateTime::from_unix_timestamp(1_793_751_300).expect("a time")
}

fn daily_report() -> Schedule {
    template()
        .schedules()
        .unwrap_or_else(|e| panic!("{e}"))
        .into_iter()
        .find(|s| s.name == "DailyReport")
        .expect("template.yaml has a DailyReport schedule")
}

/// Fire `schedule` at `worker` (no wait between Lambda's retries), then take
/// every message from the function's dead-letter queue.
async fn fire_and_read_dead_letters(
    schedule: &Schedule,
    worker: &Emulator,
    queues: &LocalQueues,
) -> (Firing, Vec<Message>) {
    let firing = fire(
        schedule,
        scheduled_time(),
        &|payload| worker.invoke(payload),
        &queues.client,
        &queues.queues,
        Duration::ZERO,
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let dlq = queues.queue(
        schedule
            .dead_letter_queue
            .as_deref()
            .expect("a DeadLetterQueue"),
    );
    let letters = take_all(&queues.client, &dlq.url).await.expect("receive");
    (firing, letters)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_daily_report_ends_in_the_reports_dead_letter_queue_after_lambdas_retries() {
    let schedule = daily_report();
    let queues = LocalQueues::start(30).await;
    // DynamoDB where nothing listens: every report fails.
    let mut env = function_env(&[("AWS_ENDPOINT_URL_DYNAMODB", NO_SERVER)]);
    env.extend(queues.env());
    let worker = start(&schedule.function, &env);

    let (firing, letters) = fire_and_read_dead_letters(&schedule, &worker, &queues).await;

    assert_eq!(firing.attempts, 1 + schedule.lambda_retries, "{firing:?}");
    let Outcome::DeadLettered(failure) = &firing.outcome else {
        panic!("not dead-lettered: {firing:?}");
    };
    assert_eq!(letters.len(), 1, "{letters:?}");
    let letter = &letters[0];
    // The payload Lambda ran, the schedule's time in it: a replay of the
    // letter reports the day that failed (below).
    assert_eq!(letter.body(), Some(firing.payload.as_str()));
    let payload: serde_json::Value =
        serde_json::from_str(&firing.payload).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(payload["scheduled_time"], "2026-11-04T00:15:00Z");
    let attribute = |name: &str| {
        let value = letter
            .message_attributes()
            .and_then(|a| a.get(name))
            .unwrap_or_else(|| panic!("no attribute {name}: {letter:?}"));
        (
            value.data_type().to_owned(),
            value.string_value().unwrap_or_default().to_owned(),
        )
    };
    assert_eq!(attribute("ErrorCode"), ("Number".into(), "200".into()));
    assert_eq!(
        attribute("RequestID"),
        ("String".into(), failure.request_id.clone())
    );
    let (kind, message) = attribute("ErrorMessage");
    assert_eq!(kind, "String");
    assert!(!message.is_empty() && message.len() <= 1024, "{message}");
    assert_eq!(message, failure.error_message);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_succeeding_daily_report_is_invoked_once_and_dead_letters_nothing() {
    let schedule = daily_report();
    let (dynamodb, queues) = servers(&template(), None, 30).await;
    let worker = start(&schedule.function, &servers_env(&dynamodb, &queues));

    let (firing, letters) = fire_and_read_dead_letters(&schedule, &worker, &queues).await;

    assert_eq!((firing.attempts, &firing.outcome), (1, &Outcome::Succeeded));
    assert!(letters.is_empty(), "{letters:?}");
}

/// A dead letter replayed days later (an operator sending its body to the
/// function again) reports the day that failed, not the day before the
/// replay: the schedule's time travels in the payload.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replayed_dead_letter_reports_the_day_that_failed() {
    let schedule = daily_report();
    let queues = LocalQueues::start(30).await;
    let mut env = function_env(&[("AWS_ENDPOINT_URL_DYNAMODB", NO_SERVER)]);
    env.extend(queues.env());
    let failing = start(&schedule.function, &env);
    let (_, letters) = fire_and_read_dead_letters(&schedule, &failing, &queues).await;
    let body = letters
        .first()
        .and_then(|l| l.body())
        .unwrap_or_else(|| panic!("no dead letter: {letters:?}"))
        .to_owned();
    drop(failing);

    let (dynamodb, queues) = servers(&template(), None, 30).await;
    let worker = start(&schedule.function, &servers_env(&dynamodb, &queues));
    let answer = worker
        .invoke(body.as_bytes())
        .and_then(|a| a.json())
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(answer.get("errorType").is_none(), "{answer}");
    assert_eq!(answer["report_id"], "daily/2026-11-03", "{answer}");
    assert_eq!(answer["as_of"], "2026-11-04T00:15:00Z", "{answer}");
    assert_eq!(
        answer["recomputed"],
        serde_json::json!(["daily/2026-11-02", "daily/2026-11-01"]),
        "{answer}"
    );
}

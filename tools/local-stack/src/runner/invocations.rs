//! Samples sent straight to their function: each function's events (those
//! that go neither through a queue nor through a state machine), a Function
//! URL's through the URL itself; and each schedule of the template, fired
//! once.

use super::answers::summarize;
use super::plan::Plan;
use super::stack::Stack;
use crate::events::Sample;
use crate::expectations::{self, Context};
use crate::pool::Pool;
use crate::schedule;
use crate::template::{Function, Template};
use serde_json::Value;

/// Every function with samples of its own to invoke, a step each, in the
/// template's order; `stored` items stored so far (what a report covers).
pub(super) fn invoke_all(
    stack: &Stack,
    plan: &Plan,
    stored: usize,
    step: &mut usize,
    failures: &mut Vec<String>,
) -> Result<(), String> {
    for (function, samples) in plan.invoked.iter().filter(|(_, s)| !s.is_empty()) {
        *step += 1;
        invoke_samples(stack, function, samples, *step, stored, failures)?;
    }
    Ok(())
}

/// Invoke `function` with each of `samples` (step `step` of the
/// demonstration), print what came back and check it against the sample's
/// expectation, `stored` items being stored.
fn invoke_samples(
    stack: &Stack,
    function: &Function,
    samples: &[Sample],
    step: usize,
    stored: usize,
    failures: &mut Vec<String>,
) -> Result<(), String> {
    let pool = stack.function(&function.binary)?;
    println!(
        "\n{step}. {}: events/{}/",
        function.logical_id, function.binary
    );
    for sample in samples {
        let file = sample.file_name();
        let body = answer(stack, function, pool, sample)?;
        let output = pool.logs();
        let context = Context {
            stored_orders: stored,
            dead_letter_queue: true,
            output: &output,
        };
        let checked = expectations::check(&sample.expect, &sample.event, &body, &context);
        // A Function URL answer wraps the JSON in an HTTP response.
        let inner = expectations::answer_json(&sample.expect, &body).unwrap_or(body);
        println!("   {file}: {}", summarize(&inner));
        if let Err(e) = checked {
            println!("   {file}: NOT AS EXPECTED: {e}");
            failures.push(format!("{} {file}: {e}", function.binary));
        }
    }
    Ok(())
}

/// The answer of `function` to `sample`. A Function URL event (`rawPath`
/// and `body`) of a function with a URL goes through the URL itself, signed
/// as a caller signs: its HTTP answer is what the function's answer became.
fn answer(
    stack: &Stack,
    function: &Function,
    pool: &Pool,
    sample: &Sample,
) -> Result<Value, String> {
    let request = sample.event["rawPath"]
        .as_str()
        .and(sample.event["body"].as_str());
    Ok(match stack.function_url(&function.binary).zip(request) {
        Some((url, request)) => {
            let (status, text) = url.post(request)?;
            serde_json::json!({"statusCode": status, "body": text})
        }
        None => pool.invoke(&sample.text)?.json().unwrap_or(Value::Null),
    })
}

/// Fire each `ScheduleV2` event of the template once, now, as EventBridge
/// Scheduler would at its time (see [`crate::schedule`]; retries wait
/// [`schedule::LOCAL_RETRY_DELAY`] multiples instead of minutes).
pub(super) fn fire_schedules(
    stack: &Stack,
    template: &Template,
    runtime: &tokio::runtime::Runtime,
    step: usize,
    failures: &mut Vec<String>,
) -> Result<(), String> {
    let schedules = template.schedules()?;
    if schedules.is_empty() {
        println!("\n{step}. Schedules: template.yaml has none.");
        return Ok(());
    }
    println!("\n{step}. Schedules, fired once now (asynchronous invocations, Lambda's retries):");
    let sqs = stack.elasticmq.client();
    for schedule in schedules {
        let pool = stack.function(&schedule.function)?;
        let firing = runtime.block_on(schedule::fire(
            &schedule,
            time::OffsetDateTime::now_utc(),
            &|payload| pool.invoke(payload),
            &sqs,
            &stack.queues,
            schedule::LOCAL_RETRY_DELAY,
        ))?;
        println!(
            "   {} {} {} -> {} {}: {firing}",
            schedule.name,
            schedule.expression,
            schedule.timezone,
            schedule.function,
            firing.payload
        );
        if firing.outcome != schedule::Outcome::Succeeded {
            failures.push(format!("schedule {}: {firing}", schedule.name));
        }
    }
    Ok(())
}

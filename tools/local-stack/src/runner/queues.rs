//! The SQS batches of each SQS-fed function through its queue: their record
//! bodies sent to the queue of each `Type: SQS` event of the template, the
//! local event source mapping invoking the function, then what ended stored
//! ([`super::stored`]) and dead-lettered, each checked against what the
//! samples' expectations say.

use super::plan::{Plan, Queued};
use super::stack::Stack;
use super::{Options, QueueFlow, Summary};
use crate::elasticmq::{self, LocalQueue};
use crate::event_source;
use crate::events;
use crate::pool::Pool;
use crate::stored;
use crate::template::Redrive;
use serde_json::Value;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

/// Each SQS event source's flow, one step each, into `summary`; a line
/// saying so where the template has none.
pub(super) fn send_all(
    stack: &Stack,
    plan: &Plan,
    options: Options,
    runtime: &tokio::runtime::Runtime,
    step: &mut usize,
    summary: &mut Summary,
) -> Result<(), String> {
    if plan.queues.is_empty() {
        *step += 1;
        println!(
            "\n{step}. Queues: template.yaml has no SQS event source; nothing goes through a queue."
        );
    }
    for queued in &plan.queues {
        *step += 1;
        let flow = send_through(stack, plan, queued, options, runtime, *step, summary)?;
        summary.queues.push(flow);
    }
    Ok(())
}

/// The record bodies of `queued`'s samples through its queue and the local
/// event source mapping (step `step`); where each ended up.
fn send_through(
    stack: &Stack,
    plan: &Plan,
    queued: &Queued,
    options: Options,
    runtime: &tokio::runtime::Runtime,
    step: usize,
    summary: &mut Summary,
) -> Result<QueueFlow, String> {
    let source = &queued.source;
    let bodies = queued.bodies();
    let queue = stack.queue(&source.queue)?;
    let sqs = stack.elasticmq.client();
    println!(
        "\n{step}. {}: {} message bodies of the SQS batches in events/{}/ sent to {}",
        source.function,
        bodies.len(),
        source.function,
        queue.spec.name()
    );
    let dead_letter_queue = match &queue.spec.redrive {
        Some(redrive) => Some((redrive, dead_letter_depth(stack, redrive, runtime)?)),
        None => None,
    };
    runtime.block_on(elasticmq::send(&sqs, queue, &bodies, &source.function))?;
    let pool = stack.function(&source.function)?;
    let whole_batch_failures = drain(stack, queued, queue, pool, options)?;
    let items_stored = check_stored(stack, plan, queued, runtime, &mut summary.failures)?;
    let dead_lettered = match dead_letter_queue {
        Some((redrive, before)) => {
            let now = dead_letter_depth(stack, redrive, runtime)?;
            let dead = now.saturating_sub(before);
            report_dead_letters(stack, redrive, queued, dead, pool, &mut summary.failures)?;
            dead
        }
        None => 0,
    };
    if whole_batch_failures > 0 {
        summary.failures.push(format!(
            "{}: {whole_batch_failures} batches failed as a whole",
            source.function
        ));
    }
    Ok(QueueFlow {
        function: source.function.clone(),
        queue: source.queue.clone(),
        messages_sent: bodies.len(),
        items_stored,
        dead_lettered,
    })
}

/// Until `queue` is empty (within a bound: every failing message is
/// received `maxReceiveCount` times, one visibility timeout apart), its
/// messages delivered to `pool` by as many pollers as the mapping allows;
/// announced. How many batches failed as a whole.
fn drain(
    stack: &Stack,
    queued: &Queued,
    queue: &LocalQueue,
    pool: &Pool,
    options: Options,
) -> Result<usize, String> {
    let source = &queued.source;
    let receives = queue
        .spec
        .redrive
        .as_ref()
        .map_or(1, |r| r.max_receive_count);
    let bound = Duration::from_secs(
        60 + u64::from(receives + 1) * u64::from(options.visibility_timeout_s + 1),
    );
    let pollers = event_source::pollers(source, pool.capacity());
    let totals = event_source::drain_concurrently(
        &stack.elasticmq.endpoint(),
        queue,
        source,
        pollers,
        Instant::now() + bound,
        &|event| pool.invoke(event),
    )?;
    println!(
        "   local event source mapping (batch size {}, window {} s, {pollers} pollers): {} invocations, {} deliveries, {} deleted, {} left for retry",
        source.batch_size,
        source.batching_window_s,
        totals.invocations,
        totals.delivered,
        totals.deleted,
        totals.returned
    );
    Ok(totals.whole_batch_failures)
}

/// How many of the ids the expectations of `queued`'s samples say end
/// stored are the partition key of an item of a table of the template;
/// announced, with the trace that stored the first. A failure unless all.
fn check_stored(
    stack: &Stack,
    plan: &Plan,
    queued: &Queued,
    runtime: &tokio::runtime::Runtime,
    failures: &mut Vec<String>,
) -> Result<u64, String> {
    let function = &queued.source.function;
    if queued.samples.is_empty() {
        return Ok(0);
    }
    let expected: BTreeSet<String> = match events::stored_orders_through_queue(function) {
        Ok(ids) => ids.into_iter().collect(),
        Err(e) => {
            println!("   NOT AS EXPECTED: {e}");
            failures.push(format!("{function}: {e}"));
            return Ok(0);
        }
    };
    if expected.is_empty() {
        println!("   the expectations of events/{function}/ name no item to be stored");
        return Ok(0);
    }
    let found = runtime.block_on(stored::find(
        &stack.dynamodb.client(),
        &plan.tables,
        &expected,
    ))?;
    let where_found: Vec<String> = found
        .iter()
        .map(|(table, ids)| format!("{table} {}", ids.len()))
        .collect();
    let stored = stored::all(&found);
    println!(
        "   stored: {} of the {} items the expectations of events/{function}/ name ({})",
        stored.len(),
        expected.len(),
        if where_found.is_empty() {
            "in no table".to_owned()
        } else {
            where_found.join(", ")
        }
    );
    if let Some(url) = expected.first().and_then(|id| trace_naming(stack, id)) {
        println!(
            "   the trace that stored {}: {url}",
            expected.first().map_or("", String::as_str)
        );
    }
    let missing: Vec<&String> = expected.difference(&stored).collect();
    if !missing.is_empty() {
        failures.push(format!("{function}: not stored in any table: {missing:?}"));
    }
    Ok(stored.len() as u64)
}

/// The trace of the last span one of whose tags is `id`.
fn trace_naming(stack: &Stack, id: &str) -> Option<String> {
    stack.trace_of(|span| {
        span["tags"]
            .as_object()
            .is_some_and(|tags| tags.values().any(|tag| tag.as_str() == Some(id)))
    })
}

/// The messages in the dead-letter queue of `redrive`.
fn dead_letter_depth(
    stack: &Stack,
    redrive: &Redrive,
    runtime: &tokio::runtime::Runtime,
) -> Result<u64, String> {
    let dlq = stack.queue(&redrive.dead_letter_queue)?;
    runtime.block_on(elasticmq::depth(&stack.elasticmq.client(), &dlq.url))
}

/// The `dead` messages `queued`'s flow added to the dead-letter queue of
/// `redrive`, announced with why, from the log of the function's `pool`; a
/// failure unless as many as the records its samples declare invalid.
fn report_dead_letters(
    stack: &Stack,
    redrive: &Redrive,
    queued: &Queued,
    dead: u64,
    pool: &Pool,
    failures: &mut Vec<String>,
) -> Result<(), String> {
    let dlq = stack.queue(&redrive.dead_letter_queue)?;
    println!(
        "   {} got {dead} messages (moved by the function, or by SQS after {} failed deliveries); the reasons in the function's log:",
        dlq.spec.name(),
        redrive.max_receive_count
    );
    let reasons = failure_reasons(&pool.logs());
    if reasons.is_empty() {
        println!("     none logged");
    }
    for (class, reason) in reasons {
        println!("     {class}: {reason}");
    }
    let function = &queued.source.function;
    match queued.expected_dead_letters() {
        Some(expected) if expected as u64 != dead => failures.push(format!(
            "{function}: {} got {dead} messages, the records events/{function}/ declares invalid are {expected}",
            dlq.spec.name()
        )),
        Some(_) => {}
        None => println!(
            "   (not checked: a batch of events/{function}/ declares no invalid_records)"
        ),
    }
    Ok(())
}

/// The distinct (class, reason) pairs of the JSON log lines that give a
/// `reason` (a line without `class`: its `message`).
fn failure_reasons(logs: &str) -> Vec<(String, String)> {
    let mut reasons: Vec<(String, String)> = logs
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter_map(|line| {
            let reason = line["reason"].as_str()?.to_owned();
            let class = line["class"]
                .as_str()
                .or_else(|| line["message"].as_str())
                .unwrap_or("?");
            Some((class.to_owned(), reason))
        })
        .collect();
    reasons.sort();
    reasons.dedup();
    reasons
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_are_the_distinct_ones_logged() {
        let logs = [
            r#"{"level":"WARN","message":"record dead-lettered","class":"invalid","reason":"bad JSON"}"#,
            r#"{"level":"WARN","message":"record dead-lettered","class":"invalid","reason":"bad JSON"}"#,
            r#"{"level":"WARN","message":"gave up","reason":"timeout"}"#,
            r#"{"level":"INFO","message":"stored"}"#,
            "not JSON, reason: none",
        ]
        .join("\n");
        assert_eq!(
            failure_reasons(&logs),
            [
                ("gave up".to_owned(), "timeout".to_owned()),
                ("invalid".to_owned(), "bad JSON".to_owned()),
            ]
        );
    }
}

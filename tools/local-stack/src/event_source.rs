//! The local stand-in for Lambda's SQS event source mapping, which
//! `sam local` does not provide: poll a queue with the batch size and batching
//! window the template declares, invoke the function with the event Lambda
//! would send, and delete exactly the messages the function did not report in
//! `batchItemFailures`. The rest come back after the visibility timeout, and
//! after `maxReceiveCount` receives the queue's redrive policy moves them to
//! the dead-letter queue, as in AWS. Its [`SqsSource`] comes from
//! `Template::sqs_sources`, which refuses what Lambda would not create.

use crate::elasticmq::{LocalQueue, depth, error_text};
use crate::emulator::Invocation;
use crate::local_aws::REGION;
use crate::template::SqsSource;
use aws_sdk_sqs::Client;
use aws_sdk_sqs::types::{DeleteMessageBatchRequestEntry, Message, MessageSystemAttributeName};
use serde_json::{Value, json};
use std::collections::HashSet;
use std::time::{Duration, Instant};

/// SQS returns at most 10 messages per receive and deletes at most 10 per call.
const SQS_MAX_PER_CALL: usize = 10;

/// What one poll did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Delivery {
    /// Messages in the batch (0: nothing was received, no invocation).
    pub received: usize,
    /// Messages deleted: the function processed them.
    pub deleted: usize,
    /// Messages left in the queue: reported in `batchItemFailures`, or the
    /// whole batch when the invocation failed or answered something invalid.
    pub returned: usize,
    /// The invocation failed or its answer was invalid: nothing was deleted.
    pub whole_batch_failed: bool,
}

/// Totals of [`EventSource::drain`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    /// Invocations made.
    pub invocations: usize,
    /// Messages delivered, counting redeliveries.
    pub delivered: usize,
    /// Messages deleted after processing.
    pub deleted: usize,
    /// Deliveries left for a retry.
    pub returned: usize,
    /// Invocations that failed as a whole.
    pub whole_batch_failures: usize,
}

impl std::ops::AddAssign for Totals {
    fn add_assign(&mut self, other: Self) {
        self.invocations += other.invocations;
        self.delivered += other.delivered;
        self.deleted += other.deleted;
        self.returned += other.returned;
        self.whole_batch_failures += other.whole_batch_failures;
    }
}

/// Concurrent batches Lambda's SQS pollers invoke a function with when the
/// mapping sets no `ScalingConfig.MaximumConcurrency` (they start at five).
pub const DEFAULT_POLLERS: u32 = 5;

/// How many pollers drain `source` at once: its `MaximumConcurrency` (or
/// Lambda's starting five), at most `environments`, since a poller that holds
/// a batch while waiting for an environment would let its visibility timeout
/// run out.
pub fn pollers(source: &SqsSource, environments: usize) -> usize {
    let wanted = usize::try_from(source.maximum_concurrency.unwrap_or(DEFAULT_POLLERS))
        .unwrap_or(usize::MAX);
    wanted.min(environments).max(1)
}

/// [`EventSource::drain`] by `pollers` pollers at once, as Lambda runs several
/// batches of one mapping side by side: each in its own thread, with its own
/// runtime and SQS client for the ElasticMQ at `endpoint`. `invoke` must serve
/// concurrent invocations (a [`crate::pool::Pool`]). Totals are summed.
pub fn drain_concurrently(
    endpoint: &str,
    queue: &LocalQueue,
    source: &SqsSource,
    pollers: usize,
    deadline: Instant,
    invoke: &(dyn Fn(&str) -> Result<Invocation, String> + Sync),
) -> Result<Totals, String> {
    let poll = || -> Result<Totals, String> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("poller runtime: {e}"))?;
        let client = crate::elasticmq::client(endpoint);
        runtime.block_on(EventSource::new(&client, queue, source).drain(deadline, invoke))
    };
    std::thread::scope(|s| {
        let threads: Vec<_> = (0..pollers.max(1)).map(|_| s.spawn(poll)).collect();
        let mut totals = Totals::default();
        for thread in threads {
            totals += thread
                .join()
                .map_err(|_| "an event source poller panicked".to_owned())??;
        }
        Ok(totals)
    })
}

/// One event source mapping: a queue feeding a function.
pub struct EventSource<'a> {
    client: &'a Client,
    queue: &'a LocalQueue,
    source: &'a SqsSource,
}

impl<'a> EventSource<'a> {
    /// The mapping `source` from `queue` (the queue `source` names).
    pub fn new(client: &'a Client, queue: &'a LocalQueue, source: &'a SqsSource) -> Self {
        Self {
            client,
            queue,
            source,
        }
    }

    /// Receive one batch (waiting up to the batching window to fill it, or up
    /// to `wait` for a first message), invoke the function with it through
    /// `invoke`, and delete what it processed.
    ///
    /// `invoke` blocks until the function answers, as Lambda's poller waits
    /// for its invocation; call this from the only task of its runtime.
    pub async fn poll_once(
        &self,
        wait: Duration,
        invoke: &dyn Fn(&str) -> Result<Invocation, String>,
    ) -> Result<Delivery, String> {
        let batch = self.receive(wait).await?;
        if batch.is_empty() {
            return Ok(Delivery::default());
        }
        let event = self.event(&batch);
        let answer = invoke(&event.to_string())?;
        let ids: Vec<&str> = batch.iter().filter_map(|m| m.message_id()).collect();
        let verdict = verdict(&answer, &ids, self.source.report_batch_item_failures);
        let keep: HashSet<&str> = match &verdict {
            Verdict::Failed(ids) => ids.iter().map(String::as_str).collect(),
            Verdict::WholeBatch(_) => ids.iter().copied().collect(),
        };
        let done: Vec<&Message> = batch
            .iter()
            .filter(|m| m.message_id().is_some_and(|id| !keep.contains(id)))
            .collect();
        self.delete(&done).await?;
        Ok(Delivery {
            received: batch.len(),
            deleted: done.len(),
            returned: batch.len() - done.len(),
            whole_batch_failed: matches!(verdict, Verdict::WholeBatch(_)),
        })
    }

    /// Poll until the queue is empty (nothing visible, in flight or delayed),
    /// or until `deadline`, which is an error.
    pub async fn drain(
        &self,
        deadline: Instant,
        invoke: &dyn Fn(&str) -> Result<Invocation, String>,
    ) -> Result<Totals, String> {
        let mut totals = Totals::default();
        loop {
            if Instant::now() >= deadline {
                return Err(format!(
                    "{} was not empty by the deadline ({totals:?})",
                    self.queue.spec.name()
                ));
            }
            let delivery = self.poll_once(Duration::from_secs(1), invoke).await?;
            if delivery.received == 0 {
                if depth(self.client, &self.queue.url).await? == 0 {
                    return Ok(totals);
                }
                continue;
            }
            totals.invocations += 1;
            totals.delivered += delivery.received;
            totals.deleted += delivery.deleted;
            totals.returned += delivery.returned;
            totals.whole_batch_failures += usize::from(delivery.whole_batch_failed);
        }
    }

    /// Up to `BatchSize` messages: the first receive waits up to `wait`; with
    /// a batching window, further receives fill the batch until it is full or
    /// the window has passed.
    async fn receive(&self, wait: Duration) -> Result<Vec<Message>, String> {
        let wanted = usize::try_from(self.source.batch_size).unwrap_or(usize::MAX);
        let window = Duration::from_secs(u64::from(self.source.batching_window_s));
        let mut batch: Vec<Message> = Vec::new();
        let started = Instant::now();
        loop {
            let first = batch.is_empty();
            let wait_s = if first { wait.as_secs() } else { 0 };
            let received = self
                .client
                .receive_message()
                .queue_url(&self.queue.url)
                .max_number_of_messages(
                    i32::try_from((wanted - batch.len()).min(SQS_MAX_PER_CALL)).unwrap_or(10),
                )
                .wait_time_seconds(i32::try_from(wait_s).unwrap_or(20))
                .message_system_attribute_names(MessageSystemAttributeName::All)
                .message_attribute_names("All")
                .send()
                .await
                .map_err(|e| format!("receive from {}: {}", self.queue.url, error_text(&e)))?
                .messages
                .unwrap_or_default();
            let got = received.len();
            batch.extend(received);
            if batch.len() >= wanted || started.elapsed() >= window || (first && got == 0) {
                return Ok(batch);
            }
            if got == 0 {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }

    /// The event Lambda sends for `batch` (the shape of `sam local generate-event sqs receive-message`).
    fn event(&self, batch: &[Message]) -> Value {
        let records: Vec<Value> = batch
            .iter()
            .map(|m| {
                let attributes: serde_json::Map<String, Value> = m
                    .attributes()
                    .map(|a| {
                        a.iter()
                            .map(|(k, v)| (k.as_str().to_owned(), Value::from(v.as_str())))
                            .collect()
                    })
                    .unwrap_or_default();
                let message_attributes: serde_json::Map<String, Value> = m
                    .message_attributes()
                    .map(|a| {
                        a.iter()
                            .map(|(name, value)| {
                                (
                                    name.clone(),
                                    json!({
                                        "stringValue": value.string_value(),
                                        "stringListValues": [],
                                        "binaryListValues": [],
                                        "dataType": value.data_type(),
                                    }),
                                )
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                json!({
                    "messageId": m.message_id(),
                    "receiptHandle": m.receipt_handle(),
                    "body": m.body().unwrap_or_default(),
                    "attributes": attributes,
                    "messageAttributes": message_attributes,
                    "md5OfBody": m.md5_of_body(),
                    "eventSource": "aws:sqs",
                    "eventSourceARN": self.queue.arn,
                    "awsRegion": REGION,
                })
            })
            .collect();
        json!({ "Records": records })
    }

    /// Delete `messages`, ten per call; every one must be deleted.
    async fn delete(&self, messages: &[&Message]) -> Result<(), String> {
        for chunk in messages.chunks(SQS_MAX_PER_CALL) {
            let entries = chunk
                .iter()
                .enumerate()
                .map(|(i, m)| {
                    DeleteMessageBatchRequestEntry::builder()
                        .id(i.to_string())
                        .receipt_handle(m.receipt_handle().unwrap_or_default())
                        .build()
                        .map_err(|e| e.to_string())
                })
                .collect::<Result<Vec<_>, _>>()?;
            let output = self
                .client
                .delete_message_batch()
                .queue_url(&self.queue.url)
                .set_entries(Some(entries))
                .send()
                .await
                .map_err(|e| format!("delete from {}: {}", self.queue.url, error_text(&e)))?;
            if !output.failed.is_empty() {
                // ElasticMQ refuses the handle of a message visible again.
                let expired = output
                    .failed
                    .iter()
                    .any(|f| f.code == "ReceiptHandleIsInvalid");
                let hint = if expired {
                    " (the batch took longer than the queue's visibility timeout: its messages \
                     were visible again; give the queue a longer one)"
                } else {
                    ""
                };
                return Err(format!(
                    "delete from {}: {:?}{hint}",
                    self.queue.url, output.failed
                ));
            }
        }
        Ok(())
    }
}

/// What an answer means for a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Verdict {
    /// Delete every message but these (message ids).
    Failed(Vec<String>),
    /// Delete nothing; the reason.
    WholeBatch(String),
}

/// Lambda's rules for an answer to an SQS batch: a failed invocation fails
/// the whole batch. With `ReportBatchItemFailures`, an empty or `null` answer,
/// or an object whose `batchItemFailures` is absent, `null` or empty, means
/// every message succeeded; an answer that is not valid JSON, not an object
/// (`[]`, `"x"`, `5`), or names an `itemIdentifier` that is missing, empty,
/// not a string or not in the batch, fails the whole batch.
fn verdict(answer: &Invocation, batch_ids: &[&str], report_failures: bool) -> Verdict {
    let json = answer.json().ok();
    if answer.status != 200 {
        return Verdict::WholeBatch(format!("invocation answered HTTP {}", answer.status));
    }
    if let Some(kind) = json.as_ref().and_then(|j| j.get("errorType")) {
        return Verdict::WholeBatch(format!("function error {kind}"));
    }
    if !report_failures || answer.body.trim().is_empty() {
        return Verdict::Failed(Vec::new());
    }
    let response = match json {
        None => return Verdict::WholeBatch("the answer is not JSON".into()),
        Some(Value::Null) => return Verdict::Failed(Vec::new()),
        Some(Value::Object(response)) => response,
        Some(other) => {
            return Verdict::WholeBatch(format!(
                "the answer is not a batch response object: {}",
                short(&other.to_string())
            ));
        }
    };
    let failures = match response.get("batchItemFailures") {
        None | Some(Value::Null) => return Verdict::Failed(Vec::new()),
        Some(Value::Array(failures)) => failures,
        Some(other) => {
            return Verdict::WholeBatch(format!(
                "batchItemFailures is {}",
                short(&other.to_string())
            ));
        }
    };
    let mut failed = Vec::new();
    for failure in failures {
        match failure.get("itemIdentifier").and_then(Value::as_str) {
            Some(id) if batch_ids.contains(&id) => failed.push(id.to_owned()),
            _ => {
                return Verdict::WholeBatch(format!(
                    "invalid batch item failure {}",
                    short(&failure.to_string())
                ));
            }
        }
    }
    Verdict::Failed(failed)
}

/// At most 100 characters of a function's answer, for a reason.
fn short(text: &str) -> String {
    match text.char_indices().nth(100) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(status: u16, body: &str) -> Invocation {
        Invocation {
            status,
            body: body.to_owned(),
        }
    }

    const IDS: [&str; 3] = ["a", "b", "c"];

    #[test]
    fn reported_failures_are_kept_and_the_rest_deleted() {
        let body = r#"{"batchItemFailures":[{"itemIdentifier":"b"}]}"#;
        assert_eq!(
            verdict(&answer(200, body), &IDS, true),
            Verdict::Failed(vec!["b".into()])
        );
        // Lambda: an empty or null list, an empty or null response: all succeeded.
        for empty in [
            r#"{"batchItemFailures":[]}"#,
            r#"{"batchItemFailures":null}"#,
            "{}",
            "null",
            "",
            " \n",
        ] {
            assert_eq!(
                verdict(&answer(200, empty), &IDS, true),
                Verdict::Failed(vec![])
            );
        }
    }

    #[test]
    fn invalid_answers_and_errors_fail_the_whole_batch() {
        for (status, body) in [
            (
                200,
                r#"{"errorType":"Runtime.ExitError","errorMessage":"x"}"#,
            ),
            (500, "oops"),
            (200, "not json"),
            (200, r#"{"batchItemFailures":[{"itemIdentifier":""}]}"#),
            (200, r#"{"batchItemFailures":[{"itemIdentifier":"z"}]}"#),
            (200, r#"{"batchItemFailures":[{}]}"#),
            (200, r#"{"batchItemFailures":"b"}"#),
            (200, r#"{"batchItemFailures":[{"itemIdentifier":null}]}"#),
            (200, r#"{"batchItemFailures":[{"itemId":"b"}]}"#),
            (200, r#"{"batchItemFailures":[{"itemIdentifier":5}]}"#),
            (200, r#"{"batchItemFailures":["b"]}"#),
            // Not the documented object: Lambda fails the whole batch.
            (200, "[]"),
            (200, r#"[{"itemIdentifier":"b"}]"#),
            (200, r#""x""#),
            (200, "5"),
            (200, "true"),
        ] {
            assert!(
                matches!(
                    verdict(&answer(status, body), &IDS, true),
                    Verdict::WholeBatch(_)
                ),
                "{status} {body}"
            );
        }
    }

    #[test]
    fn without_reporting_a_success_deletes_everything() {
        let body = r#"{"batchItemFailures":[{"itemIdentifier":"b"}]}"#;
        assert_eq!(
            verdict(&answer(200, body), &IDS, false),
            Verdict::Failed(vec![])
        );
        assert!(matches!(
            verdict(&answer(200, r#"{"errorType":"E"}"#), &IDS, false),
            Verdict::WholeBatch(_)
        ));
    }
}

//! SQS batch in, partial batch failures out.
//!
//! The rule: a record is acknowledged (left out of `batchItemFailures`) only when
//! its order is known to be stored, written now, found already stored, or found
//! in the cache of orders this container stored, or when the record is known to
//! be in the dead-letter queue.
//!
//! A record that no later delivery can fix (an invalid order, a different order
//! stored under its id: [`RecordFailure::is_permanent`]) is sent to the
//! dead-letter queue by the function itself, with its reason in message
//! attributes (`dead_letter.rs`), and acknowledged once the send succeeded.
//! Only if the send is impossible or fails (retried like a store write, fewer
//! times, within the deadline) is the record reported failed, so SQS delivers
//! it again and its redrive policy remains the fallback: never lost. A send
//! whose answer is lost (cut off by the attempt timeout or the deadline) may
//! have reached the queue all the same; its record is reported failed too.
//! Every send of a record's dead letter is the same letter, with the
//! record's `messageId` as `SourceMessageId` and, from a FIFO queue, as
//! deduplication id: SQS drops the repeat (FIFO, within its 5-minute
//! deduplication window), a consumer can (standard).
//!
//! Everything else, store errors, the deadline, a panic, an order stored by
//! a newer release (a `hash_version` this one does not know, after a
//! rollback), is reported failed as well, since a later delivery may
//! succeed. Standard and FIFO queues alike: the reason
//! travels with the message, and no delivery is spent on a record that cannot
//! succeed (SQS would redeliver it `maxReceiveCount` times, a visibility
//! timeout apart). On a FIFO queue this also keeps a bad message from holding
//! its group: reported failed, it would fail the rest of its group with it,
//! each of those counting a receive, so after `maxReceiveCount` deliveries the
//! valid messages behind it would reach the dead-letter queue too.
//!
//! Records run in *lanes*: on a standard queue each record is its own lane; on a
//! FIFO queue each message group is one lane, processed in order, and once a
//! record of a group fails (is reported failed), the later records of that
//! group fail unprocessed (order is kept; other groups go on). A dead-lettered
//! record does not stop its group.
//!
//! `WRITE_CONCURRENCY` is the environment's budget, not a batch's: at most that
//! many records are being written (stored or dead-lettered) at once, across
//! every invocation in flight. On Lambda Managed Instances one environment
//! serves several batches at once (`shared::concurrency`); they share the
//! budget, first come first served (a fair semaphore), so N batches never
//! open N times the connections or overrun the table's share. Two batches
//! carrying the same order both find it stored: one writes it, the other's
//! conditional write finds it `AlreadyStored` (or the cache has it), and both
//! acknowledge it. No lock is held across an await: the cache's and the
//! outcomes' are taken and released between awaits.
//!
//! The batch must be answered by the invocation's [`Deadline`] (the shared
//! rule); the retries of `retry.rs` stop there too, and a record not stored (or
//! dead-lettered) by then fails as `timeout`. A lane keeps each record's
//! outcome as soon as it has it, so a lane the deadline cuts off keeps the
//! records it finished: one already stored or in the dead-letter queue stays
//! acknowledged (reported failed, a dead-lettered one would be sent again).
//!
//! CPU work on the tokio thread: the one exception to "CPU-bound work runs on
//! the Rayon pool" in this function is per record, on the lane's task: parsing
//! and validating the body ([`order::parse`], at most 64 KiB) and the SHA-256
//! content hash of the order's canonical form (about 12 KB for the largest
//! valid order). Measured roughly (release build, x86_64): about 1 µs for a
//! typical 250-byte order, about 70 µs for the largest 64 KiB body, of which
//! the hash is under 6 µs. Lambda's 6 MB payload limit bounds a whole batch to
//! about 10 ms. Handing each record to the pool would cost a hand-off and a
//! wake-up of the same order as the work itself, for no gain: nothing else
//! waits on this thread but the batch's own writes, which resume between
//! records.

use crate::cache::StoredOrders;
use crate::config::Config;
use crate::dead_letter::{DeadLetter, DeadLetters};
use crate::error::{Error, RecordFailure};
use crate::order;
use crate::retry::{Backoff, GaveUp};
use crate::store::{OrderStore, PutOutcome};
use aws_lambda_events::sqs::{SqsBatchResponse, SqsEvent, SqsMessage};
use futures::{FutureExt, StreamExt};
use lambda_runtime::LambdaEvent;
use shared::invocation::Deadline;
use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, PoisonError};
use tokio::sync::Semaphore;
use tokio::time::Instant;
use tracing::Instrument;

/// What happened to one record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Written to the store now.
    Stored,
    /// The store already had this exact order.
    AlreadyStored,
    /// This container stored it recently (cache hit): no request made.
    DuplicateSkipped,
    /// Failed for good and sent to the dead-letter queue: acknowledged.
    DeadLettered(RecordFailure),
    /// Not acknowledged.
    Failed(RecordFailure),
}

impl Outcome {
    /// The outcome's name, and the failure's class when there is one: what
    /// a record's span says.
    fn names(&self) -> (&'static str, Option<&'static str>) {
        match self {
            Self::Stored => ("stored", None),
            Self::AlreadyStored => ("already_stored", None),
            Self::DuplicateSkipped => ("duplicate_skipped", None),
            Self::DeadLettered(failure) => ("dead_lettered", Some(failure.class())),
            Self::Failed(failure) => ("failed", Some(failure.class())),
        }
    }
}

/// The outcome of every record of a batch, in the batch's order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BatchReport {
    /// `(messageId, outcome)` per record.
    pub outcomes: Vec<(String, Outcome)>,
}

impl BatchReport {
    /// The response for Lambda: every failed record's message id.
    pub fn response(&self) -> SqsBatchResponse {
        let mut response = SqsBatchResponse::default();
        for (id, outcome) in &self.outcomes {
            if matches!(outcome, Outcome::Failed(_)) {
                response.add_failure(id.clone());
            }
        }
        response
    }

    /// Records with this outcome.
    pub fn count(&self, wanted: impl Fn(&Outcome) -> bool) -> usize {
        self.outcomes.iter().filter(|(_, o)| wanted(o)).count()
    }

    /// Failed records.
    pub fn failed(&self) -> impl Iterator<Item = (&str, &RecordFailure)> {
        self.outcomes.iter().filter_map(|(id, o)| match o {
            Outcome::Failed(f) => Some((id.as_str(), f)),
            _ => None,
        })
    }

    /// Records sent to the dead-letter queue.
    pub fn dead_lettered(&self) -> impl Iterator<Item = (&str, &RecordFailure)> {
        self.outcomes.iter().filter_map(|(id, o)| match o {
            Outcome::DeadLettered(f) => Some((id.as_str(), f)),
            _ => None,
        })
    }
}

/// Attempts of one dead-letter send. Fewer than a store write's: a record
/// whose send keeps failing is reported failed and simply comes back (or is
/// moved by SQS's redrive), so the batch need not wait long for it.
const DEAD_LETTER_ATTEMPTS: u32 = 3;
/// The SQS system attribute holding the producer's X-Ray trace header.
const TRACE_HEADER: &str = "AWSTraceHeader";

/// The handler's state, created once at cold start.
#[derive(Debug)]
pub struct Handler<S, D> {
    store: S,
    dead_letters: D,
    cache: StoredOrders,
    write_concurrency: usize,
    /// The environment's write budget: `write_concurrency` permits shared by
    /// every invocation in flight.
    writes: Semaphore,
    backoff: Backoff,
    dead_letter_backoff: Backoff,
    metrics_namespace: String,
}

impl<S: OrderStore, D: DeadLetters> Handler<S, D> {
    /// A handler writing orders through `store` and records that fail for
    /// good to `dead_letters`, configured by `config`.
    pub fn new(store: S, dead_letters: D, config: &Config) -> Self {
        Self {
            store,
            dead_letters,
            cache: StoredOrders::new(config.cache_capacity),
            write_concurrency: config.write_concurrency,
            writes: Semaphore::new(config.write_concurrency),
            backoff: Backoff::default(),
            dead_letter_backoff: Backoff {
                max_attempts: DEAD_LETTER_ATTEMPTS,
                ..Backoff::default()
            },
            metrics_namespace: config.metrics_namespace.clone(),
        }
    }

    /// The store, for tools and tests.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// The dead-letter queue, for tools and tests.
    pub fn dead_letters(&self) -> &D {
        &self.dead_letters
    }

    /// Orders in the cache now.
    pub fn cache_len(&self) -> usize {
        self.cache.len()
    }

    /// The Lambda entry point.
    pub async fn handle(&self, event: LambdaEvent<SqsEvent>) -> Result<SqsBatchResponse, Error> {
        let deadline = Deadline::from_context(&event.context);
        let report = self.process(&event.payload.records, deadline).await?;
        // The message id and the reason; never the body.
        for (message_id, failure) in report.dead_lettered() {
            tracing::warn!(message_id, class = failure.class(), reason = %failure, "record dead-lettered");
        }
        for (message_id, failure) in report.failed() {
            tracing::warn!(message_id, class = failure.class(), reason = %failure, "record failed");
        }
        self.emit_metrics(&report);
        Ok(report.response())
    }

    /// Process `records`, finishing by `deadline`: what is not stored by then
    /// fails as [`RecordFailure::Timeout`].
    pub async fn process(
        &self,
        records: &[SqsMessage],
        deadline: Deadline,
    ) -> Result<BatchReport, Error> {
        let missing = records
            .iter()
            .filter(|r| r.message_id.as_deref().is_none_or(str::is_empty))
            .count();
        if missing > 0 {
            tracing::error!(
                missing,
                records = records.len(),
                "batch has records without a messageId"
            );
            return Err(Error::MissingMessageId(missing));
        }
        // The retries and the lanes wait on tokio's timers (paused in tests).
        let deadline = Instant::from_std(deadline.instant());
        let (fifo, lanes) = lanes(records);
        // Filled in by the lanes record by record: what a lane finished before
        // the deadline cut it off is kept.
        let finished: Mutex<Vec<Option<Outcome>>> = Mutex::new(vec![None; records.len()]);
        let mut running = futures::stream::iter(
            lanes
                .into_iter()
                .map(|lane| self.run_lane(records, lane, fifo, deadline, &finished)),
        )
        .buffer_unordered(self.write_concurrency);
        while let Ok(Some(())) = tokio::time::timeout_at(deadline, running.next()).await {}
        drop(running);
        let outcomes = finished
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner);
        Ok(BatchReport {
            outcomes: records
                .iter()
                .zip(outcomes)
                .map(|(record, outcome)| {
                    (
                        record.message_id.clone().unwrap_or_default(),
                        outcome.unwrap_or(Outcome::Failed(RecordFailure::Timeout)),
                    )
                })
                .collect(),
        })
    }

    /// Records of one lane, in order, each outcome put in `finished` as soon
    /// as it is known; in FIFO mode the first record reported failed blocks
    /// the rest.
    async fn run_lane(
        &self,
        records: &[SqsMessage],
        lane: Vec<usize>,
        fifo: bool,
        deadline: Instant,
        finished: &Mutex<Vec<Option<Outcome>>>,
    ) {
        let mut blocked = false;
        for index in lane {
            let outcome = if blocked {
                Outcome::Failed(RecordFailure::Blocked)
            } else {
                // Waits its turn in the environment's budget; the batch's
                // deadline cuts off the wait like the write.
                let Ok(_permit) = self.writes.acquire().await else {
                    // Never closed: the handler owns it.
                    return;
                };
                // A panic fails this record only: the others keep their outcomes.
                AssertUnwindSafe(self.process_one(&records[index], fifo, deadline))
                    .catch_unwind()
                    .await
                    .unwrap_or_else(|panic| {
                        Outcome::Failed(RecordFailure::Panic(panic_message(panic.as_ref())))
                    })
            };
            blocked = fifo && matches!(outcome, Outcome::Failed(_));
            // Never contended: a batch's lanes run on one task, between awaits.
            finished.lock().unwrap_or_else(PoisonError::into_inner)[index] = Some(outcome);
        }
    }

    /// One record, in a span of its own: its message and order ids (never
    /// the body) and its outcome; linked to the producer's trace when the
    /// message carries one that is not this invocation's.
    async fn process_one(&self, record: &SqsMessage, fifo: bool, deadline: Instant) -> Outcome {
        let span = tracing::info_span!(
            "record",
            message_id = record.message_id.as_deref().unwrap_or_default(),
            order_id = tracing::field::Empty,
            outcome = tracing::field::Empty,
            failure = tracing::field::Empty,
        );
        shared::traces::link(
            &span,
            record.attributes.get(TRACE_HEADER).map(String::as_str),
        );
        let outcome = async {
            match self.store_one(record, deadline).await {
                Outcome::Failed(failure) if failure.is_permanent() => {
                    self.dead_letter(record, failure, fifo, deadline).await
                }
                outcome => outcome,
            }
        }
        .instrument(span.clone())
        .await;
        let (name, failure) = outcome.names();
        span.record("outcome", name);
        span.record("failure", failure);
        outcome
    }

    /// Send `record`, which failed for good, to the dead-letter queue:
    /// [`Outcome::DeadLettered`] once it is there, else still failed.
    async fn dead_letter(
        &self,
        record: &SqsMessage,
        failure: RecordFailure,
        fifo: bool,
        deadline: Instant,
    ) -> Outcome {
        let message_id = record.message_id.as_deref().unwrap_or_default();
        let letter = match DeadLetter::new(record, &failure, fifo) {
            Ok(letter) => letter,
            Err(unsendable) => {
                tracing::warn!(message_id, reason = %unsendable, "not dead-lettered: reported failed, for SQS's redrive");
                return Outcome::Failed(failure);
            }
        };
        // Attempts made and answered: one cut off before its answer may have
        // reached the queue all the same.
        let (made, answered) = (AtomicU32::new(0), AtomicU32::new(0));
        let sent = self
            .dead_letter_backoff
            .run(deadline, || {
                made.fetch_add(1, Ordering::Relaxed);
                async {
                    let answer = self.dead_letters.send(&letter).await;
                    answered.fetch_add(1, Ordering::Relaxed);
                    answer
                }
            })
            .await;
        match sent {
            Ok(()) => Outcome::DeadLettered(failure),
            Err(gave_up) => {
                let reason = match gave_up {
                    GaveUp::Failed(e) => e.message,
                    GaveUp::Deadline(_) => "the invocation's deadline came first".to_owned(),
                };
                let perhaps_sent = made.into_inner() > answered.into_inner();
                tracing::warn!(
                    message_id,
                    reason,
                    perhaps_sent,
                    "dead-letter send failed: reported failed (a repeat is the same letter)"
                );
                Outcome::Failed(failure)
            }
        }
    }

    /// Validate `record` and store its order.
    async fn store_one(&self, record: &SqsMessage, deadline: Instant) -> Outcome {
        let order = match order::parse(record.body.as_deref().unwrap_or_default()) {
            Ok(order) => order,
            Err(invalid) => return Outcome::Failed(RecordFailure::Invalid(invalid)),
        };
        let id = order.order.order_id.as_str();
        tracing::Span::current().record("order_id", id);
        let outcome = if self.cache.contains(id, &order.content_hash) {
            Outcome::DuplicateSkipped
        } else {
            match self
                .backoff
                .run(deadline, || self.store.put_order(&order))
                .await
            {
                Ok(PutOutcome::Written) => Outcome::Stored,
                Ok(PutOutcome::AlreadyStored) => Outcome::AlreadyStored,
                Ok(PutOutcome::Conflict) => Outcome::Failed(RecordFailure::Conflict),
                // Not permanent: SQS delivers it again, for the newer release
                // (the log line of the failure names the version).
                Ok(PutOutcome::NewerVersion(version)) => {
                    Outcome::Failed(RecordFailure::NewerHashVersion(version))
                }
                Err(GaveUp::Failed(e)) => Outcome::Failed(RecordFailure::Store(e.message)),
                Err(GaveUp::Deadline(_)) => Outcome::Failed(RecordFailure::Timeout),
            }
        };
        if !matches!(outcome, Outcome::Failed(_)) {
            self.cache.insert(id, order.content_hash);
            // In processing order: a FIFO group's lines come in the group's order.
            let message_id = record.message_id.as_deref().unwrap_or_default();
            tracing::debug!(message_id, order_id = id, outcome = ?outcome, "order stored");
        }
        outcome
    }

    fn emit_metrics(&self, report: &BatchReport) {
        let mut emf = shared::metrics::Emf::new(&self.metrics_namespace, "order-processor");
        emf.count("RecordsReceived", report.outcomes.len() as u64)
            .count(
                "RecordsStored",
                report.count(|o| *o == Outcome::Stored) as u64,
            )
            .count(
                "DuplicatesSkipped",
                report.count(|o| *o == Outcome::DuplicateSkipped) as u64,
            )
            .count(
                "DuplicatesInStore",
                report.count(|o| *o == Outcome::AlreadyStored) as u64,
            )
            .count("RecordsDeadLettered", report.dead_lettered().count() as u64)
            .count("RecordsFailed", report.failed().count() as u64);
        let failed = report.failed().map(|(_, f)| ("Failed", f));
        let dead_lettered = report.dead_lettered().map(|(_, f)| ("DeadLettered", f));
        let mut by_class: Vec<(String, u64)> = Vec::new();
        for (what, failure) in failed.chain(dead_lettered) {
            let name = format!("{what}_{}", failure.class());
            match by_class.iter_mut().find(|(known, _)| *known == name) {
                Some((_, n)) => *n += 1,
                None => by_class.push((name, 1)),
            }
        }
        for (name, n) in by_class {
            emf.count(name, n);
        }
        emf.count("CacheEntries", self.cache.len() as u64)
            .bytes("Rss", shared::memory::snapshot().rss_bytes)
            .count("ColdStart", u64::from(shared::invocation::is_cold_start()));
        emf.emit();
    }
}

/// Whether the batch is from a FIFO queue, and its lanes (indices into `records`).
fn lanes(records: &[SqsMessage]) -> (bool, Vec<Vec<usize>>) {
    let group = |r: &SqsMessage| r.attributes.get("MessageGroupId").cloned();
    // A FIFO queue's name ends in `.fifo`. `MessageGroupId` alone does not tell:
    // standard queues with fair queuing carry it too, without FIFO's ordering.
    let fifo = records.iter().any(|r| {
        r.event_source_arn
            .as_deref()
            .is_some_and(|arn| arn.ends_with(".fifo"))
    });
    if !fifo {
        return (false, (0..records.len()).map(|i| vec![i]).collect());
    }
    let mut lanes: Vec<Vec<usize>> = Vec::new();
    // At most one entry per record of the batch (SQS sends at most 10,000).
    let mut lane_of_group: HashMap<Option<String>, usize> = HashMap::new();
    for (index, record) in records.iter().enumerate() {
        let lane = *lane_of_group.entry(group(record)).or_insert_with(|| {
            lanes.push(Vec::new());
            lanes.len() - 1
        });
        lanes[lane].push(index);
    }
    (true, lanes)
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    let message = panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "non-string panic payload".to_owned());
    message.chars().take(160).collect()
}

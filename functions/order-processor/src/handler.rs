//! SQS batch in, partial batch failures out.
//!
//! The rule: a record is acknowledged (left out of `batchItemFailures`) only when
//! its order is known to be stored: written now, found already stored, or found
//! in the cache of orders this container stored. Everything else, invalid
//! orders, conflicts, store errors, the deadline, a panic, is reported failed,
//! so SQS delivers it again and, after `maxReceiveCount`, moves it to the
//! dead-letter queue.
//!
//! Records run in *lanes*: on a standard queue each record is its own lane; on a
//! FIFO queue each message group is one lane, processed in order, and once a
//! record of a group fails, the later records of that group fail unprocessed
//! (order is kept; other groups go on). Up to `WRITE_CONCURRENCY` lanes run at
//! once.

use crate::cache::StoredOrders;
use crate::config::Config;
use crate::order::{self, Invalid};
use crate::retry::{Backoff, GaveUp};
use crate::store::{OrderStore, PutOutcome};
use aws_lambda_events::sqs::{SqsBatchResponse, SqsEvent, SqsMessage};
use futures::{FutureExt, StreamExt};
use lambda_runtime::{Error, LambdaEvent};
use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::time::Duration;
use tokio::time::Instant;

/// Time budget when the invocation names no deadline (only outside Lambda).
const UNKNOWN_DEADLINE_BUDGET: Duration = Duration::from_secs(30);
/// Most time kept back from the deadline to answer the runtime.
const MAX_DEADLINE_MARGIN: Duration = Duration::from_secs(1);

/// Why a record failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// The body is not a valid order.
    Invalid(Invalid),
    /// A different order is stored under this `order_id`.
    Conflict,
    /// The store refused or kept failing.
    Store(String),
    /// The invocation's deadline came before the write finished.
    Timeout,
    /// Processing panicked.
    Panic(String),
    /// An earlier record of the same FIFO message group failed.
    Blocked,
}

impl Failure {
    /// Short class for metrics and logs.
    pub fn class(&self) -> &'static str {
        match self {
            Failure::Invalid(invalid) => invalid.class(),
            Failure::Conflict => "conflict",
            Failure::Store(_) => "store",
            Failure::Timeout => "timeout",
            Failure::Panic(_) => "panic",
            Failure::Blocked => "fifo_blocked",
        }
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Invalid(invalid) => invalid.fmt(f),
            Failure::Conflict => {
                f.write_str("a different order is already stored under this order_id")
            }
            Failure::Store(message) => write!(f, "not stored: {message}"),
            Failure::Timeout => f.write_str("not stored before the invocation's deadline"),
            Failure::Panic(message) => write!(f, "processing panicked: {message}"),
            Failure::Blocked => f.write_str("an earlier message of its FIFO group failed"),
        }
    }
}

/// What happened to one record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Written to the store now.
    Stored,
    /// The store already had this exact order.
    AlreadyStored,
    /// This container stored it recently (cache hit): no request made.
    DuplicateSkipped,
    /// Not acknowledged.
    Failed(Failure),
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
    pub fn failed(&self) -> impl Iterator<Item = (&str, &Failure)> {
        self.outcomes.iter().filter_map(|(id, o)| match o {
            Outcome::Failed(f) => Some((id.as_str(), f)),
            _ => None,
        })
    }
}

/// The batch cannot be answered record by record.
#[derive(Debug, thiserror::Error)]
#[error(
    "{0} record(s) without a messageId: they cannot be reported one by one, so the whole batch fails and SQS delivers it again"
)]
pub struct MissingMessageId(usize);

/// The handler's state, created once at cold start.
#[derive(Debug)]
pub struct Handler<S> {
    store: S,
    cache: StoredOrders,
    write_concurrency: usize,
    backoff: Backoff,
    metrics_namespace: String,
}

impl<S: OrderStore> Handler<S> {
    /// A handler writing through `store`, configured by `config`.
    pub fn new(store: S, config: &Config) -> Self {
        Self {
            store,
            cache: StoredOrders::new(config.cache_capacity),
            write_concurrency: config.write_concurrency,
            backoff: Backoff::default(),
            metrics_namespace: config.metrics_namespace.clone(),
        }
    }

    /// The store, for tools and tests.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// Orders in the cache now.
    pub fn cache_len(&self) -> usize {
        self.cache.len()
    }

    /// The Lambda entry point.
    pub async fn handle(&self, event: LambdaEvent<SqsEvent>) -> Result<SqsBatchResponse, Error> {
        let deadline = deadline_of(event.context.deadline);
        let report = self.process(&event.payload.records, deadline).await?;
        for (message_id, failure) in report.failed() {
            // The message id and the reason; never the body.
            tracing::warn!(message_id, class = failure.class(), reason = %failure, "record failed");
        }
        self.emit_metrics(&report);
        Ok(report.response())
    }

    /// Process `records`, finishing before `deadline`.
    pub async fn process(
        &self,
        records: &[SqsMessage],
        deadline: Instant,
    ) -> Result<BatchReport, MissingMessageId> {
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
            return Err(MissingMessageId(missing));
        }
        let (fifo, lanes) = lanes(records);
        let mut outcomes: Vec<Option<Outcome>> = vec![None; records.len()];
        let mut running = futures::stream::iter(
            lanes
                .into_iter()
                .map(|lane| self.run_lane(records, lane, fifo, deadline)),
        )
        .buffer_unordered(self.write_concurrency);
        while let Ok(Some(finished)) = tokio::time::timeout_at(deadline, running.next()).await {
            for (index, outcome) in finished {
                outcomes[index] = Some(outcome);
            }
        }
        Ok(BatchReport {
            outcomes: records
                .iter()
                .zip(outcomes)
                .map(|(record, outcome)| {
                    (
                        record.message_id.clone().unwrap_or_default(),
                        outcome.unwrap_or(Outcome::Failed(Failure::Timeout)),
                    )
                })
                .collect(),
        })
    }

    /// Records of one lane, in order; in FIFO mode the first failure blocks the rest.
    async fn run_lane(
        &self,
        records: &[SqsMessage],
        lane: Vec<usize>,
        fifo: bool,
        deadline: Instant,
    ) -> Vec<(usize, Outcome)> {
        let mut finished = Vec::with_capacity(lane.len());
        let mut blocked = false;
        for index in lane {
            let outcome = if blocked {
                Outcome::Failed(Failure::Blocked)
            } else {
                // A panic fails this record only: the others keep their outcomes.
                AssertUnwindSafe(self.process_one(&records[index], deadline))
                    .catch_unwind()
                    .await
                    .unwrap_or_else(|panic| {
                        Outcome::Failed(Failure::Panic(panic_message(panic.as_ref())))
                    })
            };
            blocked = fifo && matches!(outcome, Outcome::Failed(_));
            finished.push((index, outcome));
        }
        finished
    }

    async fn process_one(&self, record: &SqsMessage, deadline: Instant) -> Outcome {
        let order = match order::parse(record.body.as_deref().unwrap_or_default()) {
            Ok(order) => order,
            Err(invalid) => return Outcome::Failed(Failure::Invalid(invalid)),
        };
        let id = order.order.order_id.as_str();
        if self.cache.contains(id, &order.content_hash) {
            return Outcome::DuplicateSkipped;
        }
        match self
            .backoff
            .run(deadline, || self.store.put_order(&order))
            .await
        {
            Ok(PutOutcome::Written) => {
                self.cache.insert(id, order.content_hash);
                Outcome::Stored
            }
            Ok(PutOutcome::AlreadyStored) => {
                self.cache.insert(id, order.content_hash);
                Outcome::AlreadyStored
            }
            Ok(PutOutcome::Conflict) => Outcome::Failed(Failure::Conflict),
            Err(GaveUp::Failed(e)) => Outcome::Failed(Failure::Store(e.message)),
            Err(GaveUp::Deadline(_)) => Outcome::Failed(Failure::Timeout),
        }
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
            .count("RecordsFailed", report.failed().count() as u64);
        let mut by_class: Vec<(&str, u64)> = Vec::new();
        for (_, failure) in report.failed() {
            match by_class
                .iter_mut()
                .find(|(class, _)| *class == failure.class())
            {
                Some((_, n)) => *n += 1,
                None => by_class.push((failure.class(), 1)),
            }
        }
        for (class, n) in by_class {
            emf.count(format!("Failed_{class}"), n);
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
    let fifo = records.iter().any(|r| group(r).is_some());
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

/// The instant to finish by: the invocation's deadline (Unix epoch ms) less a
/// margin to send the answer (a tenth of the time left, at most a second).
pub fn deadline_of(deadline_epoch_ms: u64) -> Instant {
    let left = shared::invocation::time_left(deadline_epoch_ms).unwrap_or(UNKNOWN_DEADLINE_BUDGET);
    Instant::now() + left - (left / 10).min(MAX_DEADLINE_MARGIN)
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    let message = panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "non-string panic payload".to_owned());
    message.chars().take(160).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::fake::MemoryStore;
    use std::collections::HashMap;
    use std::sync::atomic::Ordering;
    use std::time::{SystemTime, UNIX_EPOCH};

    fn config() -> Config {
        Config::from_env(&[("TABLE_NAME", "orders"), ("CACHE_CAPACITY", "100")]).expect("config")
    }

    fn handler(store: MemoryStore) -> Handler<MemoryStore> {
        Handler::new(store, &config())
    }

    fn order_body(id: &str, customer: &str) -> String {
        format!(
            r#"{{"order_id":"{id}","customer_id":"{customer}","items":[{{"sku":"A-1","quantity":2,"unit_price_cents":250}}],"total_cents":500,"currency":"EUR","created_at":"2026-11-20T09:15:00Z"}}"#
        )
    }

    fn record(id: &str, body: Option<String>, group: Option<&str>) -> SqsMessage {
        let mut m = SqsMessage::default();
        m.message_id = Some(id.to_owned());
        m.body = body;
        if let Some(group) = group {
            m.attributes = HashMap::from([("MessageGroupId".to_owned(), group.to_owned())]);
        }
        m
    }

    fn soon() -> Instant {
        Instant::now() + Duration::from_secs(10)
    }

    fn outcome_of<'a>(report: &'a BatchReport, id: &str) -> &'a Outcome {
        &report
            .outcomes
            .iter()
            .find(|(m, _)| m == id)
            .expect("record")
            .1
    }

    fn class_of(report: &BatchReport, id: &str) -> Option<&'static str> {
        match outcome_of(report, id) {
            Outcome::Failed(f) => Some(f.class()),
            _ => None,
        }
    }

    #[tokio::test]
    async fn mixed_batch_acknowledges_exactly_the_stored_orders() {
        let h = handler(MemoryStore {
            panic_on: Some("o-boom".into()),
            ..MemoryStore::default()
        });
        // A conflicting order is already stored under o-9.
        h.process(
            &[record("m0", Some(order_body("o-9", "cust-a")), None)],
            soon(),
        )
        .await
        .expect("seed");
        let records = [
            record("m1", Some(order_body("o-1", "c-1")), None),
            record("m2", Some("{not json".into()), None),
            record("m3", Some(r#"{"order_id":"o-3"}"#.into()), None),
            record("m4", Some(String::new()), None),
            record("m5", None, None),
            record("m6", Some(order_body("o-1", "c-1")), None), // duplicate in the batch
            record("m7", Some(order_body("o-9", "cust-b")), None), // conflicting duplicate
            record("m8", Some(order_body("o-boom", "c-1")), None), // the store panics
            record("m9", Some(order_body("o-2", "c-2")), None),
        ];
        let report = h.process(&records, soon()).await.expect("report");
        // o-1 twice in one batch: one delivery writes, its twin finds it stored.
        let twins = [outcome_of(&report, "m1"), outcome_of(&report, "m6")];
        assert_eq!(
            twins.iter().filter(|o| ***o == Outcome::Stored).count(),
            1,
            "{twins:?}"
        );
        assert!(twins.iter().all(|o| matches!(
            o,
            Outcome::Stored | Outcome::AlreadyStored | Outcome::DuplicateSkipped
        )));
        assert_eq!(class_of(&report, "m2"), Some("invalid_json"));
        assert_eq!(class_of(&report, "m3"), Some("schema"));
        assert_eq!(class_of(&report, "m4"), Some("empty_body"));
        assert_eq!(class_of(&report, "m5"), Some("empty_body"));
        assert_eq!(class_of(&report, "m7"), Some("conflict"));
        assert_eq!(class_of(&report, "m8"), Some("panic"));
        assert_eq!(*outcome_of(&report, "m9"), Outcome::Stored);
        let failed: Vec<_> = report
            .response()
            .batch_item_failures
            .into_iter()
            .map(|f| f.item_identifier)
            .collect();
        assert_eq!(failed, ["m2", "m3", "m4", "m5", "m7", "m8"]);
        // Stored: o-9 (seed), o-1, o-2; the conflicting o-9 did not overwrite.
        assert_eq!(h.store().stored(), 3);
    }

    #[tokio::test]
    async fn a_redelivery_is_skipped_by_the_cache() {
        let h = handler(MemoryStore::default());
        let records: Vec<_> = (0..5)
            .map(|i| {
                record(
                    &format!("m{i}"),
                    Some(order_body(&format!("o-{i}"), "c")),
                    None,
                )
            })
            .collect();
        h.process(&records, soon()).await.expect("first");
        let calls = h.store().calls.load(Ordering::SeqCst);
        let again = h.process(&records, soon()).await.expect("again");
        assert_eq!(again.count(|o| *o == Outcome::DuplicateSkipped), 5);
        assert_eq!(
            h.store().calls.load(Ordering::SeqCst),
            calls,
            "no store call for cached orders"
        );
        assert!(again.response().batch_item_failures.is_empty());
    }

    #[tokio::test]
    async fn fifo_failure_blocks_the_rest_of_its_group_only() {
        let h = handler(MemoryStore::default());
        let records = [
            record("a1", Some(order_body("o-a1", "c")), Some("A")),
            record("b1", Some(order_body("o-b1", "c")), Some("B")),
            record("a2", Some("bad".into()), Some("A")),
            record("b2", Some(order_body("o-b2", "c")), Some("B")),
            record("a3", Some(order_body("o-a3", "c")), Some("A")),
            record("b3", Some(order_body("o-b3", "c")), Some("B")),
        ];
        let report = h.process(&records, soon()).await.expect("report");
        assert_eq!(*outcome_of(&report, "a1"), Outcome::Stored);
        assert_eq!(class_of(&report, "a2"), Some("invalid_json"));
        assert_eq!(class_of(&report, "a3"), Some("fifo_blocked"));
        for id in ["b1", "b2", "b3"] {
            assert_eq!(*outcome_of(&report, id), Outcome::Stored, "{id}");
        }
        // o-a3 was never attempted.
        assert_eq!(h.store().stored(), 4);
        let failed: Vec<_> = report
            .response()
            .batch_item_failures
            .into_iter()
            .map(|f| f.item_identifier)
            .collect();
        assert_eq!(failed, ["a2", "a3"]);
    }

    #[tokio::test]
    async fn fifo_panic_blocks_its_group() {
        let h = handler(MemoryStore {
            panic_on: Some("o-a1".into()),
            ..MemoryStore::default()
        });
        let records = [
            record("a1", Some(order_body("o-a1", "c")), Some("A")),
            record("a2", Some(order_body("o-a2", "c")), Some("A")),
            record("b1", Some(order_body("o-b1", "c")), Some("B")),
        ];
        let report = h.process(&records, soon()).await.expect("report");
        assert_eq!(class_of(&report, "a1"), Some("panic"));
        assert_eq!(class_of(&report, "a2"), Some("fifo_blocked"));
        assert_eq!(*outcome_of(&report, "b1"), Outcome::Stored);
    }

    #[tokio::test]
    async fn empty_and_all_failed_batches() {
        let h = handler(MemoryStore::default());
        let report = h.process(&[], soon()).await.expect("empty");
        assert!(report.response().batch_item_failures.is_empty());
        let records: Vec<_> = (0..4)
            .map(|i| record(&format!("m{i}"), Some(format!("garbage {i}")), None))
            .collect();
        let report = h.process(&records, soon()).await.expect("all failed");
        assert_eq!(report.response().batch_item_failures.len(), 4);
        assert_eq!(h.store().calls.load(Ordering::SeqCst), 0);
    }

    #[tokio::test]
    async fn a_record_without_message_id_fails_the_whole_batch() {
        let h = handler(MemoryStore::default());
        let mut nameless = record("x", Some(order_body("o-1", "c")), None);
        nameless.message_id = None;
        let err = h
            .process(
                &[record("m1", Some(order_body("o-2", "c")), None), nameless],
                soon(),
            )
            .await
            .expect_err("must not answer record by record");
        assert!(err.to_string().contains("1 record(s) without a messageId"));
        let mut empty_id = record("", Some(order_body("o-3", "c")), None);
        empty_id.message_id = Some(String::new());
        assert!(h.process(&[empty_id], soon()).await.is_err());
    }

    #[tokio::test(start_paused = true)]
    async fn transient_errors_are_retried_and_permanent_ones_fail_the_record() {
        let h = handler(MemoryStore {
            transient_failures: 3.into(),
            broken_on: Some("o-broken".into()),
            ..MemoryStore::default()
        });
        let records = [
            record("m1", Some(order_body("o-1", "c")), None),
            record("m2", Some(order_body("o-broken", "c")), None),
        ];
        let report = h.process(&records, soon()).await.expect("report");
        assert_eq!(*outcome_of(&report, "m1"), Outcome::Stored);
        assert_eq!(class_of(&report, "m2"), Some("store"));
    }

    #[tokio::test(start_paused = true)]
    async fn the_deadline_fails_what_is_not_stored() {
        let h = handler(MemoryStore {
            transient_failures: usize::MAX.into(),
            ..MemoryStore::default()
        });
        let deadline = Instant::now() + Duration::from_millis(500);
        let records = [record("m1", Some(order_body("o-1", "c")), None)];
        let report = h.process(&records, deadline).await.expect("report");
        assert!(matches!(class_of(&report, "m1"), Some("timeout" | "store")));
        assert!(Instant::now() <= deadline + Duration::from_millis(1));
    }

    #[tokio::test]
    async fn handle_answers_lambda_with_the_failures() {
        let h = handler(MemoryStore::default());
        let mut event = SqsEvent::default();
        event.records = vec![
            record("m1", Some(order_body("o-1", "c")), None),
            record("m2", Some("nope".into()), None),
        ];
        let mut context = lambda_runtime::Context::default();
        context.deadline = u64::try_from(
            (SystemTime::now() + Duration::from_secs(5))
                .duration_since(UNIX_EPOCH)
                .expect("clock")
                .as_millis(),
        )
        .expect("ms");
        let response = h
            .handle(LambdaEvent::new(event, context))
            .await
            .expect("response");
        let failed: Vec<_> = response
            .batch_item_failures
            .into_iter()
            .map(|f| f.item_identifier)
            .collect();
        assert_eq!(failed, ["m2"]);
    }

    #[test]
    fn deadline_keeps_a_margin() {
        let now_ms = u64::try_from(
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .expect("clock")
                .as_millis(),
        )
        .expect("ms");
        let d = deadline_of(now_ms + 2_000);
        let left = d - Instant::now();
        assert!(
            left <= Duration::from_millis(1_800) && left >= Duration::from_millis(1_700),
            "{left:?}"
        );
        let past = deadline_of(now_ms.saturating_sub(5_000));
        assert!(past <= Instant::now());
    }
}

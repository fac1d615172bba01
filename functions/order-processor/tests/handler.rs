//! The handler's batch semantics through `Handler::process` and
//! `Handler::handle`, with the in-memory store of `order_processor_testkit::store` and
//! dead-letter queue of `order_processor_testkit::dead_letters`: which records are
//! acknowledged, dead-lettered or reported failed, the cache, FIFO lanes,
//! panics, retries and the deadline.

use aws_lambda_events::sqs::{SqsBatchResponse, SqsEvent, SqsMessage};
use lambda_runtime::{Diagnostic, LambdaEvent};
use order_processor::config::Config;
use order_processor::dead_letter::{DeadLetter, DeadLetters, Fifo, attr};
use order_processor::error::Error;
use order_processor::handler::{BatchReport, Handler, Outcome};
use order_processor::store::StoreError;
use order_processor_testkit::dead_letters::{self, MemoryDeadLetters};
use order_processor_testkit::store::MemoryOrders;
use shared::invocation::Deadline;
use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::time::Instant;

type TestHandler = Handler<MemoryOrders, MemoryDeadLetters>;

fn config() -> Config {
    Config::from_env(&[
        ("TABLE_NAME", "orders"),
        ("CACHE_CAPACITY", "100"),
        ("DEAD_LETTER_QUEUE_URL", dead_letters::QUEUE_URL),
    ])
    .expect("config")
}

fn handler(store: MemoryOrders) -> TestHandler {
    Handler::new(store, MemoryDeadLetters::new(), &config())
}

/// A handler whose every dead-letter send fails.
fn handler_without_dead_letters(store: MemoryOrders) -> TestHandler {
    let down = MemoryDeadLetters::failing(StoreError::transient("SQS unreachable"));
    Handler::new(store, down, &config())
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
        m.event_source_arn = Some("arn:aws:sqs:us-east-1:123456789012:orders.fifo".to_owned());
    }
    m
}

/// A record of a standard queue with fair queuing: it carries a
/// `MessageGroupId`, but its queue is not FIFO.
fn fair_record(id: &str, body: Option<String>, group: &str) -> SqsMessage {
    let mut m = record(id, body, Some(group));
    m.event_source_arn = Some("arn:aws:sqs:us-east-1:123456789012:orders".to_owned());
    m
}

fn soon() -> Deadline {
    Deadline::at(std::time::Instant::now() + Duration::from_secs(10))
}

fn outcome_of<'a>(report: &'a BatchReport, id: &str) -> &'a Outcome {
    &report
        .outcomes
        .iter()
        .find(|(m, _)| m == id)
        .expect("record")
        .1
}

/// The class of a record reported failed.
fn class_of(report: &BatchReport, id: &str) -> Option<&'static str> {
    match outcome_of(report, id) {
        Outcome::Failed(f) => Some(f.class()),
        _ => None,
    }
}

/// The class of a record sent to the dead-letter queue.
fn dead_letter_class(report: &BatchReport, id: &str) -> Option<&'static str> {
    match outcome_of(report, id) {
        Outcome::DeadLettered(f) => Some(f.class()),
        _ => None,
    }
}

/// The source message ids of the dead letters sent, in order.
fn dead_lettered_ids(h: &TestHandler) -> Vec<String> {
    h.dead_letters()
        .sent()
        .iter()
        .map(|l| {
            l.attribute(attr::SOURCE_MESSAGE_ID)
                .unwrap_or_default()
                .to_owned()
        })
        .collect()
}

/// The message ids a response reports in `batchItemFailures`, in order.
fn failed_ids(response: SqsBatchResponse) -> Vec<String> {
    response
        .batch_item_failures
        .into_iter()
        .map(|f| f.item_identifier)
        .collect()
}

#[tokio::test]
async fn mixed_batch_acknowledges_exactly_the_stored_orders() {
    let h = handler(MemoryOrders::new().panic_on("o-boom"));
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
    // Invalid and conflicting: in the dead-letter queue, acknowledged.
    assert_eq!(dead_letter_class(&report, "m2"), Some("invalid_json"));
    assert_eq!(dead_letter_class(&report, "m3"), Some("schema"));
    assert_eq!(dead_letter_class(&report, "m7"), Some("conflict"));
    // No body to send (SQS refuses empty messages): reported failed.
    assert_eq!(class_of(&report, "m4"), Some("empty_body"));
    assert_eq!(class_of(&report, "m5"), Some("empty_body"));
    assert_eq!(class_of(&report, "m8"), Some("panic"));
    assert_eq!(*outcome_of(&report, "m9"), Outcome::Stored);
    let failed = failed_ids(report.response());
    assert_eq!(failed, ["m4", "m5", "m8"]);
    let mut dead = dead_lettered_ids(&h);
    dead.sort();
    assert_eq!(dead, ["m2", "m3", "m7"]);
    // Stored: o-9 (seed), o-1, o-2; the conflicting o-9 did not overwrite.
    assert_eq!(h.store().stored(), 3);
}

#[tokio::test]
async fn a_dead_letter_carries_the_body_the_attributes_and_the_reason() {
    let h = handler(MemoryOrders::new());
    let mut bad = record("m1", Some(r#"{"order_id":"o-1"}"#.into()), None);
    let mut trace = aws_lambda_events::sqs::SqsMessageAttribute::default();
    trace.data_type = Some("String".into());
    trace.string_value = Some("t-42".into());
    bad.message_attributes.insert("trace".into(), trace);
    let report = h.process(&[bad], soon()).await.expect("report");
    assert!(report.response().batch_item_failures.is_empty());
    let sent = h.dead_letters().sent();
    let [letter] = sent.as_slice() else {
        panic!("one dead letter: {sent:?}");
    };
    assert_eq!(letter.body, r#"{"order_id":"o-1"}"#);
    assert_eq!(letter.attribute("trace"), Some("t-42"));
    assert_eq!(letter.attribute(attr::FAILURE_CLASS), Some("schema"));
    assert_eq!(
        letter.attribute(attr::FAILURE_REASON),
        Some("not a valid order: missing field `customer_id` at line 1 column 18")
    );
    assert_eq!(letter.attribute(attr::SOURCE_MESSAGE_ID), Some("m1"));
    assert_eq!(letter.fifo, None);
}

#[tokio::test(start_paused = true)]
async fn when_the_dead_letter_queue_fails_invalid_records_are_reported_failed() {
    let h = handler_without_dead_letters(MemoryOrders::new());
    let records = [
        record("m1", Some(order_body("o-1", "c")), None),
        record("m2", Some("{not json".into()), None),
        record("m3", Some(order_body("o-3", "c")), None),
    ];
    let report = h.process(&records, soon()).await.expect("report");
    assert_eq!(class_of(&report, "m2"), Some("invalid_json"));
    assert_eq!(failed_ids(report.response()), ["m2"]);
    assert_eq!(h.store().stored(), 2);
    // Tried again, a few times, within the deadline.
    assert_eq!(h.dead_letters().calls(), 3);
}

#[tokio::test]
async fn a_redelivery_is_skipped_by_the_cache() {
    let h = handler(MemoryOrders::new());
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
    let calls = h.store().calls();
    let again = h.process(&records, soon()).await.expect("again");
    assert_eq!(again.count(|o| *o == Outcome::DuplicateSkipped), 5);
    assert_eq!(h.store().calls(), calls, "no store call for cached orders");
    assert!(again.response().batch_item_failures.is_empty());
}

/// Group A: a valid order, a poison message, two valid orders; group B
/// interleaved.
fn fifo_batch() -> [SqsMessage; 7] {
    [
        record("a1", Some(order_body("o-a1", "c")), Some("A")),
        record("b1", Some(order_body("o-b1", "c")), Some("B")),
        record("a2", Some("bad".into()), Some("A")),
        record("b2", Some(order_body("o-b2", "c")), Some("B")),
        record("a3", Some(order_body("o-a3", "c")), Some("A")),
        record("b3", Some(order_body("o-b3", "c")), Some("B")),
        record("a4", Some(order_body("o-a4", "c")), Some("A")),
    ]
}

#[tokio::test]
async fn fifo_poison_message_is_dead_lettered_and_its_group_goes_on() {
    let h = handler(MemoryOrders::new());
    let report = h.process(&fifo_batch(), soon()).await.expect("report");
    assert_eq!(dead_letter_class(&report, "a2"), Some("invalid_json"));
    for id in ["a1", "a3", "a4", "b1", "b2", "b3"] {
        assert_eq!(*outcome_of(&report, id), Outcome::Stored, "{id}");
    }
    assert!(report.response().batch_item_failures.is_empty());
    assert_eq!(h.store().stored(), 6);
    let sent = h.dead_letters().sent();
    let [letter] = sent.as_slice() else {
        panic!("one dead letter: {sent:?}");
    };
    assert_eq!(letter.body, "bad");
    assert_eq!(
        letter.fifo,
        Some(Fifo {
            group_id: "A".into(),
            deduplication_id: "a2".into()
        })
    );
}

#[tokio::test(start_paused = true)]
async fn fifo_poison_message_blocks_its_group_when_it_cannot_be_dead_lettered() {
    let h = handler_without_dead_letters(MemoryOrders::new());
    let report = h.process(&fifo_batch(), soon()).await.expect("report");
    assert_eq!(*outcome_of(&report, "a1"), Outcome::Stored);
    assert_eq!(class_of(&report, "a2"), Some("invalid_json"));
    assert_eq!(class_of(&report, "a3"), Some("fifo_blocked"));
    assert_eq!(class_of(&report, "a4"), Some("fifo_blocked"));
    for id in ["b1", "b2", "b3"] {
        assert_eq!(*outcome_of(&report, id), Outcome::Stored, "{id}");
    }
    // o-a3 and o-a4 were never attempted.
    assert_eq!(h.store().stored(), 4);
    let failed = failed_ids(report.response());
    assert_eq!(failed, ["a2", "a3", "a4"]);
}

#[tokio::test(start_paused = true)]
async fn fifo_transient_failure_still_blocks_its_group() {
    let h = handler(MemoryOrders::new().fail_order("o-a1", StoreError::transient("throttled")));
    let report = h.process(&fifo_batch(), soon()).await.expect("report");
    assert_eq!(class_of(&report, "a1"), Some("store"));
    for id in ["a2", "a3", "a4"] {
        assert_eq!(class_of(&report, id), Some("fifo_blocked"), "{id}");
    }
    for id in ["b1", "b2", "b3"] {
        assert_eq!(*outcome_of(&report, id), Outcome::Stored, "{id}");
    }
    assert_eq!(h.dead_letters().calls(), 0, "a2 was never looked at");
}

#[tokio::test]
async fn a_fair_standard_queue_is_not_fifo_despite_its_group_ids() {
    let h = handler(MemoryOrders::new().fail_order("o-a1", StoreError::transient("throttled")));
    let records = [
        fair_record("a1", Some(order_body("o-a1", "c")), "A"),
        fair_record("a2", Some(order_body("o-a2", "c")), "A"),
        fair_record("a3", Some("garbage".to_owned()), "A"),
    ];
    let report = h.process(&records, soon()).await.expect("report");
    assert_eq!(class_of(&report, "a1"), Some("store"));
    assert_eq!(*outcome_of(&report, "a2"), Outcome::Stored, "not blocked");
    let sent = h.dead_letters().sent();
    assert_eq!(sent.len(), 1);
    assert!(
        sent[0].fifo.is_none(),
        "no group or deduplication id for a standard queue"
    );
}

#[tokio::test]
async fn fifo_panic_blocks_its_group() {
    let h = handler(MemoryOrders::new().panic_on("o-a1"));
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

#[tokio::test(start_paused = true)]
async fn empty_and_all_invalid_batches() {
    let h = handler(MemoryOrders::new());
    let report = h.process(&[], soon()).await.expect("empty");
    assert!(report.response().batch_item_failures.is_empty());
    let records: Vec<_> = (0..4)
        .map(|i| record(&format!("m{i}"), Some(format!("garbage {i}")), None))
        .collect();
    let report = h.process(&records, soon()).await.expect("all invalid");
    assert!(report.response().batch_item_failures.is_empty());
    assert_eq!(report.dead_lettered().count(), 4);
    assert_eq!(h.dead_letters().sent().len(), 4);
    assert_eq!(h.store().calls(), 0);
    let h = handler_without_dead_letters(MemoryOrders::new());
    let report = h.process(&records, soon()).await.expect("all failed");
    assert_eq!(report.response().batch_item_failures.len(), 4);
}

#[tokio::test]
async fn a_record_without_message_id_fails_the_whole_batch() {
    let h = handler(MemoryOrders::new());
    let mut nameless = record("x", Some(order_body("o-1", "c")), None);
    nameless.message_id = None;
    let err = h
        .process(
            &[record("m1", Some(order_body("o-2", "c")), None), nameless],
            soon(),
        )
        .await
        .expect_err("must not answer record by record");
    assert_eq!(err, Error::MissingMessageId(1));
    assert!(err.to_string().contains("1 record(s) without a messageId"));
    assert_eq!(Diagnostic::from(err).error_type, "MissingMessageId");
    let mut empty_id = record("", Some(order_body("o-3", "c")), None);
    empty_id.message_id = Some(String::new());
    assert!(h.process(&[empty_id], soon()).await.is_err());
}

#[tokio::test(start_paused = true)]
async fn transient_errors_are_retried_and_permanent_ones_fail_the_record() {
    let h = handler(
        MemoryOrders::new()
            .fail_first(3, StoreError::transient("throttled"))
            .fail_order("o-broken", StoreError::permanent("validation exception")),
    );
    let records = [
        record("m1", Some(order_body("o-1", "c")), None),
        record("m2", Some(order_body("o-broken", "c")), None),
    ];
    let report = h.process(&records, soon()).await.expect("report");
    assert_eq!(*outcome_of(&report, "m1"), Outcome::Stored);
    assert_eq!(class_of(&report, "m2"), Some("store"));
}

#[tokio::test(start_paused = true)]
async fn a_store_call_that_never_answers_is_cut_off_and_retried() {
    let h = handler(MemoryOrders::new().hang_first(1));
    let records = [record("m1", Some(order_body("o-1", "c")), None)];
    let report = h.process(&records, soon()).await.expect("report");
    assert_eq!(*outcome_of(&report, "m1"), Outcome::Stored);
    assert_eq!(h.store().calls(), 2);
}

#[tokio::test(start_paused = true)]
async fn the_deadline_fails_what_is_not_stored() {
    let h = handler(MemoryOrders::new().fail_first(usize::MAX, StoreError::transient("throttled")));
    let deadline = Instant::now() + Duration::from_millis(500);
    let records = [record("m1", Some(order_body("o-1", "c")), None)];
    let report = h
        .process(&records, Deadline::at(deadline.into_std()))
        .await
        .expect("report");
    assert!(matches!(class_of(&report, "m1"), Some("timeout" | "store")));
    assert!(Instant::now() <= deadline + Duration::from_millis(1));
}

#[tokio::test]
async fn handle_answers_lambda_with_the_failures() {
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
    // The invalid m2 is dead-lettered, or reported failed when it cannot be.
    for (h, expected) in [
        (handler(MemoryOrders::new()), &[] as &[&str]),
        (handler_without_dead_letters(MemoryOrders::new()), &["m2"]),
    ] {
        let response = h
            .handle(LambdaEvent::new(event.clone(), context.clone()))
            .await
            .expect("response");
        assert_eq!(failed_ids(response), expected);
    }
}

/// A dead-letter queue that takes every letter and answers `late` after the
/// send (tokio's clock moved on by that much, as by a slow answer).
struct LateAnswers {
    queue: MemoryDeadLetters,
    late: Duration,
}

impl DeadLetters for LateAnswers {
    async fn send(&self, letter: &DeadLetter) -> Result<(), StoreError> {
        tokio::time::advance(self.late).await;
        self.queue.send(letter).await
    }
}

/// A dead-letter queue that takes every letter and never answers: the sender
/// cannot tell whether the letter arrived.
struct LostAnswers(MemoryDeadLetters);

impl DeadLetters for LostAnswers {
    async fn send(&self, letter: &DeadLetter) -> Result<(), StoreError> {
        self.0.send(letter).await?;
        std::future::pending().await
    }
}

/// A record in the dead-letter queue stays acknowledged when the deadline
/// cuts its FIFO group off after it: only the records not finished by then
/// are reported failed.
#[tokio::test(start_paused = true)]
async fn fifo_a_dead_lettered_record_stays_acknowledged_when_its_group_runs_out_of_time() {
    let deadline = Instant::now() + Duration::from_millis(500);
    // The dead-letter queue answers OK half a millisecond after the deadline.
    // tokio's timers tick in whole milliseconds: when the group goes on to
    // a2, the batch's deadline has fired and the timer of a2's write (due at
    // that instant) has not, so the batch stops first. On Lambda which of
    // the two fires first is a race.
    let late = Duration::from_micros(500_500);
    let h = Handler::new(
        MemoryOrders::new().hang_first(usize::MAX),
        LateAnswers {
            queue: MemoryDeadLetters::new(),
            late,
        },
        &config(),
    );
    let records = [
        record("a1", Some("bad".into()), Some("A")),
        record("a2", Some(order_body("o-a2", "c")), Some("A")),
        record("a3", Some(order_body("o-a3", "c")), Some("A")),
    ];
    let report = h
        .process(&records, Deadline::at(deadline.into_std()))
        .await
        .expect("report");
    assert_eq!(h.dead_letters().queue.sent().len(), 1);
    assert_eq!(
        dead_letter_class(&report, "a1"),
        Some("invalid_json"),
        "{report:?}"
    );
    assert_eq!(failed_ids(report.response()), ["a2", "a3"]);
}

/// A dead letter whose answer is lost (it may or may not have arrived) leaves
/// its record reported failed, so SQS delivers it again. Every send of it,
/// then and on the next delivery, is the same letter: the same
/// `SourceMessageId`, and from a FIFO queue the same deduplication id, so
/// SQS (FIFO) or a consumer (standard) can drop the repeats.
#[tokio::test(start_paused = true)]
async fn a_dead_letter_whose_answer_is_lost_is_reported_failed_and_sent_again_alike() {
    let fifo = [
        record("a1", Some("bad".into()), Some("A")),
        record("a2", Some(order_body("o-a2", "c")), Some("A")),
    ];
    let standard = [record("m1", Some("bad".into()), None)];
    let lost = Handler::new(
        MemoryOrders::new(),
        LostAnswers(MemoryDeadLetters::new()),
        &config(),
    );
    let report = lost.process(&fifo, soon()).await.expect("report");
    assert_eq!(class_of(&report, "a1"), Some("invalid_json"));
    assert_eq!(failed_ids(report.response()), ["a1", "a2"]);
    let report = lost.process(&standard, soon()).await.expect("report");
    assert_eq!(failed_ids(report.response()), ["m1"]);
    // Every attempt was cut off, perhaps after SQS took the letter.
    let sent = lost.dead_letters().0.sent();
    assert_eq!(sent.len(), 6, "three attempts each");
    // SQS delivers both again, and this time the answers come.
    let answered = handler(MemoryOrders::new());
    for batch in [&fifo[..], &standard[..]] {
        let report = answered.process(batch, soon()).await.expect("report");
        assert!(
            report.response().batch_item_failures.is_empty(),
            "{report:?}"
        );
    }
    let again = answered.dead_letters().sent();
    let [a1, m1] = again.as_slice() else {
        panic!("two dead letters: {again:?}");
    };
    assert_eq!(
        a1.fifo,
        Some(Fifo {
            group_id: "A".into(),
            deduplication_id: "a1".into()
        })
    );
    assert_eq!(a1.attribute(attr::SOURCE_MESSAGE_ID), Some("a1"));
    assert_eq!(m1.attribute(attr::SOURCE_MESSAGE_ID), Some("m1"));
    assert_eq!(m1.fifo, None);
    for letter in &sent {
        assert!(
            letter == a1 || letter == m1,
            "a different letter: {letter:?}"
        );
    }
}

/// A handler whose environment may write `writes` orders at once.
fn handler_with_writes(store: MemoryOrders, writes: &'static str) -> TestHandler {
    let config = Config::from_env(&[
        ("TABLE_NAME", "orders"),
        ("CACHE_CAPACITY", "100"),
        ("DEAD_LETTER_QUEUE_URL", dead_letters::QUEUE_URL),
        ("WRITE_CONCURRENCY", writes),
    ])
    .expect("config");
    Handler::new(store, MemoryDeadLetters::new(), &config)
}

/// `batches` batches of `per_batch` records, as Lambda Managed Instances
/// delivers them to one environment at once: every batch carries the shared
/// orders `o-shared-0..shared` (duplicates across batches) and orders of its
/// own.
fn overlapping_batches(batches: usize, per_batch: usize, shared: usize) -> Vec<Vec<SqsMessage>> {
    (0..batches)
        .map(|b| {
            (0..per_batch)
                .map(|i| {
                    let order = match i < shared {
                        true => format!("o-shared-{i}"),
                        false => format!("o-{b}-{i}"),
                    };
                    record(&format!("m-{b}-{i}"), Some(order_body(&order, "c")), None)
                })
                .collect()
        })
        .collect()
}

#[tokio::test]
async fn concurrent_batches_share_one_write_budget() {
    let store = MemoryOrders::new().delay(Duration::from_millis(10));
    let h = handler_with_writes(store, "3");
    let batches = overlapping_batches(8, 10, 0);
    let reports =
        futures::future::join_all(batches.iter().map(|records| h.process(records, soon()))).await;
    for report in reports {
        assert_eq!(
            failed_ids(report.expect("report").response()),
            Vec::<String>::new()
        );
    }
    assert_eq!(h.store().stored(), 80);
    // 8 batches of 10 would have had 8 x 3 writes in flight with a budget
    // per batch; the environment's budget holds all of them to 3.
    assert_eq!(h.store().peak_in_flight(), 3);
}

#[tokio::test]
async fn the_same_orders_in_concurrent_batches_are_stored_once_and_never_lost() {
    // Duplicates across 8 batches in flight together, and a store that
    // throttles its first 20 calls: every record is acknowledged only once
    // its order is in the store, no order is written twice, and nothing the
    // store never got is acknowledged.
    let store = MemoryOrders::new()
        .delay(Duration::from_millis(2))
        .fail_first(20, StoreError::transient("throttled"));
    let h = handler_with_writes(store, "4");
    let batches = overlapping_batches(8, 10, 4);
    let reports =
        futures::future::join_all(batches.iter().map(|records| h.process(records, soon()))).await;
    let mut stored = 0;
    for (records, report) in batches.iter().zip(reports) {
        let report = report.expect("report");
        assert_eq!(report.outcomes.len(), records.len());
        for (id, outcome) in &report.outcomes {
            assert!(
                matches!(
                    outcome,
                    Outcome::Stored | Outcome::AlreadyStored | Outcome::DuplicateSkipped
                ),
                "{id}: {outcome:?}"
            );
            stored += usize::from(*outcome == Outcome::Stored);
        }
    }
    // 4 shared orders and 6 own ones per batch: each written exactly once.
    assert_eq!(h.store().stored(), 4 + 8 * 6);
    assert_eq!(
        stored,
        4 + 8 * 6,
        "one Written per order, the rest found it"
    );
}

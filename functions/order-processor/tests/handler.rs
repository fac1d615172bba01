//! The handler's batch semantics through `Handler::process` and
//! `Handler::handle`, with the in-memory store of `testkit::store`: which
//! records are acknowledged, the cache, FIFO lanes, panics, retries and the
//! deadline.

use aws_lambda_events::sqs::{SqsBatchResponse, SqsEvent, SqsMessage};
use lambda_runtime::{Diagnostic, LambdaEvent};
use order_processor::config::Config;
use order_processor::error::Error;
use order_processor::handler::{BatchReport, Handler, Outcome};
use order_processor::store::StoreError;
use shared::invocation::Deadline;
use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use testkit::store::MemoryOrders;
use tokio::time::Instant;

fn config() -> Config {
    Config::from_env(&[("TABLE_NAME", "orders"), ("CACHE_CAPACITY", "100")]).expect("config")
}

fn handler(store: MemoryOrders) -> Handler<MemoryOrders> {
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

fn class_of(report: &BatchReport, id: &str) -> Option<&'static str> {
    match outcome_of(report, id) {
        Outcome::Failed(f) => Some(f.class()),
        _ => None,
    }
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
    assert_eq!(class_of(&report, "m2"), Some("invalid_json"));
    assert_eq!(class_of(&report, "m3"), Some("schema"));
    assert_eq!(class_of(&report, "m4"), Some("empty_body"));
    assert_eq!(class_of(&report, "m5"), Some("empty_body"));
    assert_eq!(class_of(&report, "m7"), Some("conflict"));
    assert_eq!(class_of(&report, "m8"), Some("panic"));
    assert_eq!(*outcome_of(&report, "m9"), Outcome::Stored);
    let failed = failed_ids(report.response());
    assert_eq!(failed, ["m2", "m3", "m4", "m5", "m7", "m8"]);
    // Stored: o-9 (seed), o-1, o-2; the conflicting o-9 did not overwrite.
    assert_eq!(h.store().stored(), 3);
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

#[tokio::test]
async fn fifo_failure_blocks_the_rest_of_its_group_only() {
    let h = handler(MemoryOrders::new());
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
    let failed = failed_ids(report.response());
    assert_eq!(failed, ["a2", "a3"]);
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

#[tokio::test]
async fn empty_and_all_failed_batches() {
    let h = handler(MemoryOrders::new());
    let report = h.process(&[], soon()).await.expect("empty");
    assert!(report.response().batch_item_failures.is_empty());
    let records: Vec<_> = (0..4)
        .map(|i| record(&format!("m{i}"), Some(format!("garbage {i}")), None))
        .collect();
    let report = h.process(&records, soon()).await.expect("all failed");
    assert_eq!(report.response().batch_item_failures.len(), 4);
    assert_eq!(h.store().calls(), 0);
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
    let h = handler(MemoryOrders::new());
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
    let failed = failed_ids(response);
    assert_eq!(failed, ["m2"]);
}

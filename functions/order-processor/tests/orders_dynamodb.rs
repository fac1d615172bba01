//! The order processor's handler against DynamoDB Local (started on a free
//! loopback port, its table created from template.yaml, stopped afterwards).

mod support;

use local_stack::dynamodb_local::{self, DynamoDbLocal};
use local_stack::jvm::Compiler;
use order_processor::config::Config;
use order_processor::dynamodb::DynamoStore;
use order_processor::handler::{Handler, Outcome};
use order_processor_testkit::dead_letters::{self, MemoryDeadLetters};
use shared::invocation::Deadline;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};
use support::{expected_hashes, sample_records, scratch, stored_hashes};

const TABLE: &str = "OrdersTable";

async fn create_tables(ddb: &DynamoDbLocal) {
    let created = dynamodb_local::create_tables(&support::template(), &ddb.client())
        .await
        .expect("tables");
    assert_eq!(created, [TABLE, "ReportsTable"]);
}

fn handler(endpoint: &str) -> Handler<DynamoStore, MemoryDeadLetters> {
    let config = Config::from_env(&[
        ("TABLE_NAME", TABLE),
        ("DEAD_LETTER_QUEUE_URL", dead_letters::QUEUE_URL),
    ])
    .expect("config");
    Handler::new(
        DynamoStore::new(dynamodb_local::client(endpoint), TABLE),
        MemoryDeadLetters::new(),
        &config,
    )
}

fn within(seconds: u64) -> Deadline {
    Deadline::at(Instant::now() + Duration::from_secs(seconds))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_orders_are_stored_once_and_redelivery_writes_nothing() {
    let ddb = DynamoDbLocal::start(
        &scratch("dynamodb-thousand").with_extension("log"),
        Compiler::Quick,
    )
    .expect("DynamoDB Local");
    create_tables(&ddb).await;
    let records = sample_records(0..1_000);

    let container = handler(&ddb.endpoint());
    for batch in records.chunks(10) {
        let report = container.process(batch, within(20)).await.expect("report");
        assert_eq!(report.count(|o| *o == Outcome::Stored), 10, "{report:?}");
    }
    let requests = container.store().requests();
    eprintln!(
        "DynamoDB requests per batch of 10, first delivery: {:.1}",
        requests as f64 / 100.0
    );
    assert_eq!(
        requests, 1_000,
        "one conditional PutItem per order, no retries when healthy"
    );
    assert_eq!(
        stored_hashes(&ddb.client(), TABLE).await,
        expected_hashes(0..1_000)
    );

    // Redelivered to the same container: the cache answers, DynamoDB is not asked.
    for batch in records.chunks(10) {
        let report = container.process(batch, within(20)).await.expect("report");
        assert_eq!(report.count(|o| *o == Outcome::DuplicateSkipped), 10);
    }
    assert_eq!(container.store().requests(), 1_000);
    eprintln!("DynamoDB requests per batch of 10, redelivery to a warm container: 0.0");

    // Redelivered to a new container: DynamoDB's condition rejects every write.
    let cold = handler(&ddb.endpoint());
    for batch in records.chunks(10) {
        let report = cold.process(batch, within(20)).await.expect("report");
        assert_eq!(
            report.count(|o| *o == Outcome::AlreadyStored),
            10,
            "{report:?}"
        );
    }
    assert_eq!(
        stored_hashes(&ddb.client(), TABLE).await,
        expected_hashes(0..1_000)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outage_fails_exactly_the_affected_messages_and_replay_completes_the_set() {
    let data = scratch("dynamodb-outage");
    std::fs::create_dir_all(&data).expect("data dir");
    let port = local_stack::process::free_port().expect("port");
    let ddb = DynamoDbLocal::start_on(port, Some(&data), &data.join("first.log"), Compiler::Quick)
        .expect("DynamoDB Local");
    create_tables(&ddb).await;
    let container = handler(&ddb.endpoint());
    let records = sample_records(0..1_000);
    let (before, during, after) = (0..300, 300..400, 400..1_000);

    for batch in records[before.clone()].chunks(10) {
        let report = container.process(batch, within(20)).await.expect("report");
        assert!(report.response().batch_item_failures.is_empty());
    }

    let (port, db_path, _) = ddb.kill();
    let mut failed = BTreeSet::new();
    for batch in records[during.clone()].chunks(10) {
        // A short deadline: the retries give up when it comes.
        let report = container.process(batch, within(2)).await.expect("report");
        for (id, failure) in report.failed() {
            assert!(
                matches!(failure.class(), "store" | "timeout"),
                "{id}: {failure}"
            );
            failed.insert(id.to_owned());
        }
        assert_eq!(
            report.count(|o| !matches!(o, Outcome::Failed(_))),
            0,
            "nothing is acknowledged while DynamoDB is down"
        );
    }
    let affected: BTreeSet<_> = during.clone().map(|n| format!("msg-{n}")).collect();
    assert_eq!(
        failed, affected,
        "exactly the messages sent during the outage failed"
    );

    let ddb = DynamoDbLocal::start_on(
        port,
        db_path.as_deref(),
        &data.join("second.log"),
        Compiler::Quick,
    )
    .expect("restart");
    for batch in records[after.clone()].chunks(10) {
        let report = container.process(batch, within(20)).await.expect("report");
        assert!(
            report.response().batch_item_failures.is_empty(),
            "{report:?}"
        );
    }
    // SQS would deliver the failed messages again: replay them.
    for batch in records[during].chunks(10) {
        let report = container.process(batch, within(20)).await.expect("report");
        assert!(
            report.response().batch_item_failures.is_empty(),
            "{report:?}"
        );
    }
    assert_eq!(
        stored_hashes(&ddb.client(), TABLE).await,
        expected_hashes(0..1_000),
        "no loss, no duplicate, same content"
    );
}

/// An order stored by the first release (no `hash_version`, the version 0
/// hash) is recognised when delivered again; one stored with a version this
/// release does not know (a newer release's, after a rollback) is reported
/// failed for a newer release to decide, never dead-lettered nor overwritten.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stored_items_are_compared_in_their_own_hash_version() {
    use aws_sdk_dynamodb::types::AttributeValue;
    use order_processor::order::content_hash;
    use shared::orders::attr;
    let ddb = DynamoDbLocal::start(
        &scratch("dynamodb-hash-version").with_extension("log"),
        Compiler::Quick,
    )
    .expect("DynamoDB Local");
    create_tables(&ddb).await;
    let records = sample_records(0..2);
    let orders: Vec<_> = (0..2)
        .map(|n| {
            order_processor::order::validate(order_processor_testkit::orders::order(n))
                .expect("valid")
        })
        .collect();
    let v0 = content_hash::hash(&orders[0].order, orders[0].created_at_ms, 0).expect("v0");
    let mut first_release = order_processor::dynamodb::item(&orders[0]);
    first_release.remove(attr::HASH_VERSION);
    first_release.insert(attr::CONTENT_HASH.into(), AttributeValue::S(hex(&v0)));
    let mut newer = order_processor::dynamodb::item(&orders[1]);
    newer.insert(attr::HASH_VERSION.into(), AttributeValue::N("99".into()));
    for item in [first_release, newer.clone()] {
        ddb.client()
            .put_item()
            .table_name(TABLE)
            .set_item(Some(item))
            .send()
            .await
            .expect("put");
    }
    let report = handler(&ddb.endpoint())
        .process(&records, within(20))
        .await
        .expect("report");
    assert_eq!(report.outcomes[0].1, Outcome::AlreadyStored, "{report:?}");
    assert!(
        matches!(&report.outcomes[1].1, Outcome::Failed(f) if f.class() == "unknown_hash_version"),
        "{report:?}"
    );
    let stored = ddb
        .client()
        .get_item()
        .table_name(TABLE)
        .key(
            attr::ORDER_ID,
            AttributeValue::S(orders[1].order.order_id.clone()),
        )
        .send()
        .await
        .expect("get")
        .item
        .expect("item");
    assert_eq!(stored, newer, "not overwritten");
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

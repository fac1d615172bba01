//! The Arrow worker against DynamoDB Local, over orders written through the
//! order processor's own store: one full scan, segments + merge, and a
//! straightforward reference computation (money per group and currency) all
//! agree; malformed items are skipped and counted; the daily report reads
//! only its day (through the day index) and lands in the reports table.

use arrow_worker::answer::{Answer, Group};
use arrow_worker::aws::AwsStore;
use arrow_worker::config::Config;
use arrow_worker::dynamodb::{DynamoTables, report_attr};
use arrow_worker::handler::Handler;
use arrow_worker::query::{GroupBy, MAX_LIMIT, Query, Segment};
use aws_sdk_dynamodb::types::AttributeValue;
use e2e::LocalDynamoDb;
use futures::future::join_all;
use order_processor::dynamodb::DynamoStore as OrderStore;
use order_processor::order::{ValidOrder, validate};
use order_processor::store::{OrderStore as _, PutOutcome};
use std::collections::BTreeMap;

const ORDERS: u64 = 3_000;
const ORDERS_TABLE: &str = "OrdersTable";
const REPORTS_TABLE: &str = "ReportsTable";

/// Sample orders `step` minutes apart (the samples wrap around after 30 days).
fn valid_orders(step: u64) -> Vec<ValidOrder> {
    (0..ORDERS)
        .map(|n| {
            validate(order_processor_testkit::orders::order(n * step))
                .expect("sample orders are valid")
        })
        .collect()
}

async fn write_orders(ddb: &LocalDynamoDb, orders: &[ValidOrder]) {
    let store = OrderStore::new(ddb.server.client(), ORDERS_TABLE);
    for chunk in orders.chunks(50) {
        for outcome in join_all(chunk.iter().map(|o| store.put_order(o))).await {
            assert_eq!(outcome.expect("put"), PutOutcome::Written);
        }
    }
    // Items the worker must skip, not crash on: a missing total, a total of
    // the wrong type, a negative quantity.
    let client = ddb.server.client();
    let broken = [
        ("bad-1", "total_cents", None),
        (
            "bad-2",
            "total_cents",
            Some(AttributeValue::S("lots".into())),
        ),
        (
            "bad-3",
            "total_quantity",
            Some(AttributeValue::N("-2".into())),
        ),
    ];
    for (id, attribute, value) in broken {
        let mut item = order_processor::dynamodb::item(&orders[0]);
        item.insert("order_id".into(), AttributeValue::S(id.into()));
        match value {
            Some(v) => item.insert(attribute.into(), v),
            None => item.remove(attribute),
        };
        client
            .put_item()
            .table_name(ORDERS_TABLE)
            .set_item(Some(item))
            .send()
            .await
            .expect("put malformed item");
    }
}

/// Per group and currency: orders, and the sum, min and max of their totals.
type Summary = Vec<(String, String, u64, u64, u64, u64)>;

fn reference(orders: &[ValidOrder], group_by: GroupBy, window: (i64, i64)) -> Summary {
    let mut groups: BTreeMap<(String, String), (u64, u64, u64, u64)> = BTreeMap::new();
    for o in orders
        .iter()
        .filter(|o| (window.0..window.1).contains(&o.created_at_ms))
    {
        let key = match group_by {
            GroupBy::Customer => o.order.customer_id.clone(),
            GroupBy::Currency => o.order.currency.clone(),
            GroupBy::Day => o.order.created_at[..10].to_owned(),
        };
        let g = groups
            .entry((key, o.order.currency.clone()))
            .or_insert((0, 0, u64::MAX, 0));
        g.0 += 1;
        g.1 += o.order.total_cents;
        g.2 = g.2.min(o.order.total_cents);
        g.3 = g.3.max(o.order.total_cents);
    }
    groups
        .into_iter()
        .map(|((k, c), (n, s, lo, hi))| (k, c, n, s, lo, hi))
        .collect()
}

fn summary(groups: &[Group]) -> Summary {
    groups
        .iter()
        .flat_map(|g| {
            g.money.iter().map(|m| {
                (
                    g.key.clone(),
                    m.currency.clone(),
                    m.count,
                    m.total_cents.sum,
                    m.total_cents.min,
                    m.total_cents.max,
                )
            })
        })
        .collect()
}

fn worker(ddb: &LocalDynamoDb, workers: usize) -> Handler<AwsStore> {
    let env = [
        ("TABLE_NAME", ORDERS_TABLE),
        ("REPORTS_TABLE", REPORTS_TABLE),
    ];
    let config = Config::from_env(&env).expect("config");
    let tables = DynamoTables::new(ddb.server.client(), ORDERS_TABLE, REPORTS_TABLE);
    Handler::new(AwsStore::new(tables, None, None), config, workers, None)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn segments_and_merge_equal_a_full_scan_and_the_reference() {
    let ddb = LocalDynamoDb::start().await;
    let orders = valid_orders(1);
    write_orders(&ddb, &orders).await;
    let w = worker(&ddb, 2);

    for (group_by, from, to) in [
        (GroupBy::Customer, None, None),
        (
            GroupBy::Day,
            Some("2026-11-01T12:00:00Z"),
            Some("2026-11-02T18:00:00Z"),
        ),
        (GroupBy::Currency, Some("2026-11-02T00:00:00Z"), None),
    ] {
        let query = Query {
            group_by,
            from: from.map(str::to_owned),
            to: to.map(str::to_owned),
            limit: Some(MAX_LIMIT),
        };
        let window = query.window().expect("window");
        let expected = reference(
            &orders,
            group_by,
            (
                window.from_ms.unwrap_or(i64::MIN),
                window.to_ms.unwrap_or(i64::MAX),
            ),
        );
        let full = w.aggregate(query.clone(), None).await.expect("full scan");
        assert_eq!(summary(&full.groups), expected, "{group_by:?}");
        if group_by == GroupBy::Customer {
            // The sample customers pay in two currencies each: never summed.
            assert!(full.groups.iter().all(|g| g.money.len() == 2));
        }
        assert_eq!(full.rows.scanned, ORDERS + 3);
        assert_eq!(full.rows.skipped.missing_field, 1);
        assert_eq!(full.rows.skipped.wrong_type, 1);
        assert_eq!(full.rows.skipped.out_of_range, 1);

        let total_segments = 5;
        let mut partials: Vec<Answer> = Vec::new();
        for segment in 0..total_segments {
            let part = w
                .aggregate(
                    query.clone(),
                    Some(Segment {
                        segment,
                        total_segments,
                    }),
                )
                .await
                .expect("segment");
            partials.push(part);
        }
        let merged = arrow_worker::merge::merge(partials).expect("merge");
        assert_eq!(merged.groups, full.groups, "{group_by:?}");
        assert_eq!(merged.rows, full.rows);
    }
    eprintln!(
        "analytics over {ORDERS} orders in DynamoDB Local: full scan == 5 segments + merge == reference"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daily_report_reads_only_its_day_and_is_stored_as_an_item() {
    let ddb = LocalDynamoDb::start().await;
    // 3,000 orders 15 minutes apart: 30 days, about 100 orders a day.
    let orders = valid_orders(15);
    write_orders(&ddb, &orders).await;
    let w = worker(&ddb, 2);
    let day = "2026-11-12";
    let from = time::macros::datetime!(2026-11-12 00:00 UTC).unix_timestamp() * 1_000;
    let window = (from, from + 86_400_000);
    let days: std::collections::BTreeSet<&str> =
        orders.iter().map(|o| &o.order.created_at[..10]).collect();
    assert_eq!(days.len(), 30, "the table holds 30 days");
    let of_the_day = orders
        .iter()
        .filter(|o| (window.0..window.1).contains(&o.created_at_ms))
        .count() as u64;

    let event = lambda_runtime::LambdaEvent::new(
        serde_json::json!({"operation": "daily_report", "day": day}),
        lambda_runtime::Context::default(),
    );
    let body = w.handle(event).await.expect("report");
    assert_eq!(body["report_id"], format!("daily/{day}"));
    let answer: Answer = serde_json::from_value({
        let mut b = body.clone();
        if let Some(fields) = b.as_object_mut() {
            for extra in ["report_id", "as_of", "final", "recomputed", "fanned_out"] {
                fields.remove(extra);
            }
        }
        b
    })
    .expect("an answer");
    let expected = reference(&orders, GroupBy::Currency, window);
    assert_eq!(summary(&answer.groups), expected);
    // Only the day's orders were read: no scan of the other 29 days.
    assert_eq!(answer.rows.scanned, of_the_day);
    assert_eq!(answer.rows.matched, of_the_day);
    // The same answer as the scan-and-filter it replaces.
    let query = Query {
        group_by: GroupBy::Currency,
        from: Some(format!("{day}T00:00:00Z")),
        to: Some("2026-11-13T00:00:00Z".into()),
        limit: None,
    };
    let scanned = w.aggregate(query, None).await.expect("full scan");
    assert_eq!(scanned.groups, answer.groups);
    assert_eq!(scanned.rows.scanned, ORDERS + 3);
    eprintln!(
        "daily report of {day}: read {} items of {} in the table",
        answer.rows.scanned,
        ORDERS + 3
    );

    let stored = ddb
        .server
        .client()
        .get_item()
        .table_name(REPORTS_TABLE)
        .key(
            report_attr::REPORT_ID,
            AttributeValue::S(format!("daily/{day}")),
        )
        .send()
        .await
        .expect("get report");
    let text = stored
        .item()
        .and_then(|i| i.get(report_attr::BODY))
        .and_then(|v| v.as_s().ok())
        .expect("report body");
    let saved: Answer = serde_json::from_str(text).expect("saved answer");
    assert_eq!(saved.groups, answer.groups);
}

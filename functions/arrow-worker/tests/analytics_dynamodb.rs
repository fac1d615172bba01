//! The Arrow worker against DynamoDB Local, over order items in the table's
//! shared schema (`shared::orders`, what the order processor writes): one
//! full scan, segments + merge, and a straightforward reference computation
//! (money per group and currency, from the items' attributes) all agree;
//! malformed items are skipped and counted; the daily report reads only its
//! day (through the day index) and lands in the reports table.

mod support;

use arrow_worker::answer::{Answer, Group};
use arrow_worker::aws::AwsStore;
use arrow_worker::columns::Item;
use arrow_worker::config::Config;
use arrow_worker::dynamodb::{DynamoTables, report_attr};
use arrow_worker::handler::Handler;
use arrow_worker::query::{GroupBy, MAX_LIMIT, Query, Segment};
use aws_sdk_dynamodb::types::AttributeValue;
use shared::orders::attr;
use std::collections::BTreeMap;
use support::{LocalDynamoDb, ORDERS_TABLE, sample_order, write_items};

const ORDERS: u64 = 3_000;
const REPORTS_TABLE: &str = "ReportsTable";

/// Sample orders `step` minutes apart (they wrap around after 30 days), of
/// 50 customers: `cust-NNN` for order `n * step` is its number modulo 50, so
/// (currencies going round four) each customer pays in two currencies.
fn order_items(step: u64) -> Vec<Item> {
    (0..ORDERS)
        .map(|n| sample_order(n * step, &format!("cust-{:03}", (n * step) % 50)))
        .collect()
}

async fn write_orders(ddb: &LocalDynamoDb, orders: &[Item]) {
    let client = ddb.server.client();
    write_items(&client, orders.to_vec()).await;
    // Items the worker must skip, not crash on: a missing total, a total of
    // the wrong type, a negative quantity.
    let broken = [
        ("bad-1", attr::TOTAL_CENTS, None),
        (
            "bad-2",
            attr::TOTAL_CENTS,
            Some(AttributeValue::S("lots".into())),
        ),
        (
            "bad-3",
            attr::TOTAL_QUANTITY,
            Some(AttributeValue::N("-2".into())),
        ),
    ];
    for (id, attribute, value) in broken {
        let mut item = orders[0].clone();
        item.insert(attr::ORDER_ID.into(), AttributeValue::S(id.into()));
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

/// A string attribute of an item this test wrote.
fn text<'a>(item: &'a Item, name: &str) -> &'a str {
    item.get(name)
        .and_then(|v| v.as_s().ok())
        .unwrap_or_else(|| panic!("no string {name} in {item:?}"))
}

/// A number attribute of an item this test wrote.
fn number<T: std::str::FromStr>(item: &Item, name: &str) -> T {
    item.get(name)
        .and_then(|v| v.as_n().ok())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no number {name} in {item:?}"))
}

/// The UTC day (`YYYY-MM-DD`) of an item's `created_at_ms`, by `time`'s
/// calendar (not the worker's `day_of`).
fn utc_day(item: &Item) -> String {
    let ms: i64 = number(item, attr::CREATED_AT_MS);
    time::OffsetDateTime::from_unix_timestamp(ms.div_euclid(1_000))
        .unwrap_or_else(|e| panic!("{ms} ms: {e}"))
        .date()
        .to_string()
}

/// Per group and currency: orders, and the sum, min and max of their totals.
type Summary = Vec<(String, String, u64, u64, u64, u64)>;

fn reference(orders: &[Item], group_by: GroupBy, window: (i64, i64)) -> Summary {
    let mut groups: BTreeMap<(String, String), (u64, u64, u64, u64)> = BTreeMap::new();
    for o in orders
        .iter()
        .filter(|o| (window.0..window.1).contains(&number(o, attr::CREATED_AT_MS)))
    {
        let currency = text(o, attr::CURRENCY);
        let key = match group_by {
            GroupBy::Customer => text(o, attr::CUSTOMER_ID).to_owned(),
            GroupBy::Currency => currency.to_owned(),
            GroupBy::Day => utc_day(o),
        };
        let total: u64 = number(o, attr::TOTAL_CENTS);
        let g = groups
            .entry((key, currency.to_owned()))
            .or_insert((0, 0, u64::MAX, 0));
        g.0 += 1;
        g.1 += total;
        g.2 = g.2.min(total);
        g.3 = g.3.max(total);
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
    let orders = order_items(1);
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
            // The customers pay in two currencies each: never summed.
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
    let orders = order_items(15);
    write_orders(&ddb, &orders).await;
    let w = worker(&ddb, 2);
    let day = "2026-11-12";
    let from = time::macros::datetime!(2026-11-12 00:00 UTC).unix_timestamp() * 1_000;
    let window = (from, from + 86_400_000);
    let days: std::collections::BTreeSet<String> = orders.iter().map(utc_day).collect();
    assert_eq!(days.len(), 30, "the table holds 30 days");
    let of_the_day = orders
        .iter()
        .filter(|o| (window.0..window.1).contains(&number(o, attr::CREATED_AT_MS)))
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

/// The reports table's conditional write, on DynamoDB Local: a replay of an
/// older run never replaces a later report, a final report is never replaced
/// by one that is not, and an item written before `as_of_ms` existed is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_report_replayed_out_of_order_never_replaces_a_later_or_final_one() {
    use arrow_worker::store::{Report, Saved};
    let ddb = LocalDynamoDb::start().await;
    let tables = DynamoTables::new(ddb.server.client(), ORDERS_TABLE, REPORTS_TABLE);
    let id = "daily/2026-11-21";
    let report = |as_of_ms: i64, is_final: bool| Report {
        id: id.into(),
        body: format!("{{\"as_of_ms\":{as_of_ms}}}"),
        as_of: format!("at {as_of_ms}"),
        as_of_ms,
        is_final,
    };
    let stored = || async {
        let item = ddb
            .server
            .client()
            .get_item()
            .table_name(REPORTS_TABLE)
            .key(report_attr::REPORT_ID, AttributeValue::S(id.into()))
            .send()
            .await
            .expect("get report")
            .item
            .expect("a report");
        let is_final = item.get(report_attr::FINAL).and_then(|v| v.as_bool().ok());
        (
            text(&item, report_attr::AS_OF).to_owned(),
            *is_final.expect("final"),
        )
    };
    // Written before `as_of_ms` existed: replaced by any report.
    ddb.server
        .client()
        .put_item()
        .table_name(REPORTS_TABLE)
        .item(report_attr::REPORT_ID, AttributeValue::S(id.into()))
        .item(report_attr::AS_OF, AttributeValue::S("old".into()))
        .item(report_attr::FINAL, AttributeValue::Bool(true))
        .send()
        .await
        .expect("an item of before");
    let save = |r: Report| {
        let tables = &tables;
        async move { tables.save_report(&r).await.expect("saved or kept") }
    };
    assert_eq!(save(report(2_000, false)).await, Saved::Written);
    assert_eq!(save(report(1_000, false)).await, Saved::Kept, "older");
    assert_eq!(stored().await, ("at 2000".to_owned(), false));
    assert_eq!(
        save(report(2_000, false)).await,
        Saved::Written,
        "the same run"
    );
    assert_eq!(save(report(3_000, true)).await, Saved::Written, "the last");
    assert_eq!(save(report(4_000, false)).await, Saved::Kept, "final stays");
    assert_eq!(save(report(1_000, true)).await, Saved::Kept, "older final");
    assert_eq!(stored().await, ("at 3000".to_owned(), true));
    assert_eq!(
        save(report(3_000, true)).await,
        Saved::Written,
        "the last again"
    );
}

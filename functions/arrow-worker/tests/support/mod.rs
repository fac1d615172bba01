//! What the Arrow worker's end-to-end flows share, on top of the generic
//! harness (`testkit`, re-exported): the state machine that fans it out, the
//! worker behind a local Lambda Invoke API, order items written to the local
//! orders table. Each test binary uses part of it.
#![allow(dead_code)]

pub use testkit::*;

use arrow_worker::columns::Item;
use aws_sdk_dynamodb::types::{PutRequest, WriteRequest};
use futures::StreamExt;

/// The state machine that fans the Arrow worker out (`template.yaml`).
pub const REPORT: &str = "OrdersReportStateMachine";

/// The orders table (`template.yaml`).
pub const ORDERS_TABLE: &str = "OrdersTable";

/// The Arrow worker (two environments, waiting past them) with `env`, behind
/// a Lambda Invoke API, as the local state machine calls it: the pool and
/// the API (stopped on drop).
pub fn worker_behind_invoke_api(
    env: &[(&str, &str)],
) -> (
    std::sync::Arc<local_stack::pool::Pool>,
    local_stack::lambda_api::LambdaApi,
) {
    use local_stack::lambda_api::{LambdaApi, Served};
    use local_stack::pool::{Overflow, Size};
    let size = Size {
        environments: 2,
        overflow: Overflow::Wait,
    };
    let pool = std::sync::Arc::new(pool(&template(), "arrow-worker", env, size));
    let api = LambdaApi::start(vec![Served {
        names: vec!["ArrowWorkerFunction".into(), "arrow-worker".into()],
        pool: std::sync::Arc::clone(&pool),
    }])
    .unwrap_or_else(|e| panic!("{e}"));
    (pool, api)
}

/// Write `items` (order items in the table's schema, `shared::orders::attr`:
/// what the order processor stores) to the orders table, 25 per
/// `BatchWriteItem`, 16 requests at a time, again for any item DynamoDB
/// leaves unprocessed. A batch write replaces an item of the same key, so
/// the ids must be distinct.
pub async fn write_items(client: &aws_sdk_dynamodb::Client, items: Vec<Item>) {
    let batches: Vec<Vec<WriteRequest>> = items
        .into_iter()
        .map(|item| {
            let put = PutRequest::builder()
                .set_item(Some(item))
                .build()
                .expect("put request");
            WriteRequest::builder().put_request(put).build()
        })
        .collect::<Vec<_>>()
        .chunks(25)
        .map(<[WriteRequest]>::to_vec)
        .collect();
    futures::stream::iter(batches)
        .for_each_concurrent(16, |mut batch| {
            let client = client.clone();
            async move {
                while !batch.is_empty() {
                    let output = client
                        .batch_write_item()
                        .request_items(ORDERS_TABLE, batch)
                        .send()
                        .await
                        .unwrap_or_else(|e| {
                            panic!(
                                "BatchWriteItem: {}",
                                aws_sdk_dynamodb::error::DisplayErrorContext(e)
                            )
                        });
                    batch = output
                        .unprocessed_items
                        .and_then(|mut tables| tables.remove(ORDERS_TABLE))
                        .unwrap_or_default();
                }
            }
        })
        .await;
}

/// The currencies of [`sample_order`], in turn.
pub const CURRENCIES: [&str; 4] = ["EUR", "USD", "GBP", "JPY"];

/// Order `n` of a deterministic sample, placed by `customer`, as an item in
/// the table's schema (`shared::orders::attr`): id `ord-{n:08}`, currency
/// `CURRENCIES[n % 4]`, created `n` minutes after
/// `arrow_worker_testkit::orders::START_MS` (wrapping after 30 days), 1 to 4
/// lines of 1 to 5 units at 0.99 to 100.98 each, and its key in the by-day
/// index (`shared::orders::day_shard`), so that the daily report finds it.
/// The money, units, currency and time of the order processor's sample order
/// `n` (its own test crate), built here so that no test of this function
/// depends on that function's crates.
pub fn sample_order(n: u64, customer: &str) -> Item {
    use arrow_worker_testkit::orders::{START_MS, keyed, order_item};
    let (total_cents, quantity) = (0..=n % 4).fold((0, 0), |(total, units), line| {
        let quantity = 1 + (n + line) % 5;
        let unit_price_cents = 99 + (n * 31 + line * 17) % 10_000;
        (total + quantity * unit_price_cents, units + quantity)
    });
    let minutes = i64::try_from(n % (30 * 24 * 60)).unwrap_or(0);
    let ms = START_MS + minutes * 60_000;
    let currency = CURRENCIES[(n % 4) as usize];
    let item = order_item(customer, currency, ms, total_cents, quantity);
    keyed(item, format!("ord-{n:08}"), ms)
}

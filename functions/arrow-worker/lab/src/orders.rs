//! The orders of the lab's tables: order `n` of customer `n / 5`, stored as
//! the order processor stores it, created at a time that depends on `n`
//! alone, so that a plan can name the day a range of orders ends on.

use aws_sdk_dynamodb::types::AttributeValue;
use shared::orders::{attr, day_shard};
use std::collections::HashMap;

/// Orders per customer.
pub const ORDERS_PER_CUSTOMER: u64 = 5;
/// 2026-11-01T00:00:00Z in milliseconds: the first order's time.
const START_MS: i64 = 1_793_491_200_000;
const MINUTE_MS: i64 = 60_000;
const CURRENCIES: [&str; 4] = ["EUR", "USD", "GBP", "JPY"];

/// When order `n` was created, ms since the epoch: a minute after order
/// `n - 1`, over 30 days from 2026-11-01; or, given a day (`day_start_s`, a
/// UTC midnight), on that day, spread over its seconds.
pub fn created_at_ms(n: u64, day_start_s: Option<i64>) -> i64 {
    match day_start_s {
        None => START_MS + i64::try_from(n % (30 * 24 * 60)).unwrap_or(0) * MINUTE_MS,
        Some(day) => {
            let second = i64::try_from(n.wrapping_mul(7_919) % 86_400).unwrap_or(0);
            (day + second) * 1_000
        }
    }
}

/// The UTC day (`YYYY-MM-DD`) order `n` was created on, without a day given.
pub fn day_of(n: u64) -> String {
    let seconds = created_at_ms(n, None) / 1_000;
    time::OffsetDateTime::from_unix_timestamp(seconds)
        .map(|t| t.date().to_string())
        .unwrap_or_default()
}

/// Order `n` created at `ms` as the orders table holds it.
pub fn stored(n: u64, ms: i64) -> HashMap<String, AttributeValue> {
    let num = |v: u64| AttributeValue::N(v.to_string());
    let s = |v: &str| AttributeValue::S(v.to_owned());
    let order_id = format!("lab-{n:09}");
    let lines: Vec<(u64, u64)> = (0..=(n % 4))
        .map(|k| (1 + (n + k) % 5, 99 + (n * 31 + k * 17) % 10_000))
        .collect();
    let items = lines
        .iter()
        .enumerate()
        .map(|(k, &(quantity, price))| {
            AttributeValue::M(HashMap::from([
                (
                    attr::SKU.to_owned(),
                    s(&format!("SKU-{}", (n * 7 + k as u64) % 100)),
                ),
                (attr::QUANTITY.to_owned(), num(quantity)),
                (attr::UNIT_PRICE_CENTS.to_owned(), num(price)),
            ]))
        })
        .collect();
    let mut item = HashMap::from([
        (attr::ORDER_ID.to_owned(), s(&order_id)),
        (
            attr::CUSTOMER_ID.to_owned(),
            s(&format!("cust-{:07}", n / ORDERS_PER_CUSTOMER)),
        ),
        (attr::ITEMS.to_owned(), AttributeValue::L(items)),
        (
            attr::TOTAL_CENTS.to_owned(),
            num(lines.iter().map(|(q, p)| q * p).sum()),
        ),
        (
            attr::TOTAL_QUANTITY.to_owned(),
            num(lines.iter().map(|(q, _)| q).sum()),
        ),
        (attr::CURRENCY.to_owned(), s(CURRENCIES[(n % 4) as usize])),
        (
            attr::CREATED_AT_MS.to_owned(),
            AttributeValue::N(ms.to_string()),
        ),
        (attr::CONTENT_HASH.to_owned(), s(&format!("{n:064x}"))),
        (attr::HASH_VERSION.to_owned(), num(1)),
    ]);
    if let Some(key) = day_shard(&order_id, ms) {
        item.insert(attr::DAY_SHARD.to_owned(), AttributeValue::S(key));
    }
    item
}

/// PutItem calls in flight at once.
const AT_ONCE: usize = 200;

/// Write orders `from..to` into `table` with `client`, created as
/// [`created_at_ms`] says (on the day starting at `day_start_s`, if given).
pub async fn write(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
    (from, to): (u64, u64),
    day_start_s: Option<i64>,
) -> Result<(), String> {
    let orders: Vec<u64> = (from..to).collect();
    for chunk in orders.chunks(AT_ONCE) {
        let puts = chunk.iter().map(|&n| {
            client
                .put_item()
                .table_name(table)
                .set_item(Some(stored(n, created_at_ms(n, day_start_s))))
                .send()
        });
        for outcome in futures::future::join_all(puts).await {
            outcome.map_err(|e| {
                format!(
                    "writing the orders: {}",
                    aws_sdk_dynamodb::error::DisplayErrorContext(e)
                )
            })?;
        }
    }
    Ok(())
}

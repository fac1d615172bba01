//! Order items as the order processor stores them, for tests and benchmarks.

use crate::columns::Item;
use aws_sdk_dynamodb::types::AttributeValue;
use shared::orders::attr;
use std::collections::HashMap;

/// 2026-11-01T00:00:00Z in milliseconds: generated orders start here.
pub const START_MS: i64 = 1_793_491_200_000;
/// A day in milliseconds.
pub const DAY_MS: i64 = 86_400_000;
const CURRENCIES: [&str; 3] = ["EUR", "USD", "JPY"];

/// An item with the attributes the analytics read.
pub fn order_item(customer: &str, currency: &str, ms: i64, total: u64, qty: u64) -> Item {
    HashMap::from([
        (attr::CUSTOMER_ID.into(), AttributeValue::S(customer.into())),
        (attr::CURRENCY.into(), AttributeValue::S(currency.into())),
        (
            attr::CREATED_AT_MS.into(),
            AttributeValue::N(ms.to_string()),
        ),
        (
            attr::TOTAL_CENTS.into(),
            AttributeValue::N(total.to_string()),
        ),
        (
            attr::TOTAL_QUANTITY.into(),
            AttributeValue::N(qty.to_string()),
        ),
    ])
}

/// `n` orders over `customers` customers and 30 days, deterministic for a `seed`.
pub fn items(n: usize, customers: u64, seed: u64) -> Vec<Item> {
    let mut rng = fastrand::Rng::with_seed(seed);
    (0..n)
        .map(|i| {
            let mut item = order_item(
                &format!("cust-{:06}", rng.u64(0..customers.max(1))),
                CURRENCIES[rng.usize(0..CURRENCIES.len())],
                START_MS + rng.i64(0..30 * DAY_MS),
                rng.u64(1..1_000_000),
                rng.u64(1..50),
            );
            item.insert(
                attr::ORDER_ID.into(),
                AttributeValue::S(format!("ord-{seed}-{i:08}")),
            );
            item
        })
        .collect()
}

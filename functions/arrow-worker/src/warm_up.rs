//! The cold-start warm-up: the pipeline run once over a few synthetic orders,
//! so that its code and lazily initialised state (item conversion, Arrow
//! kernels, JSON) are paged in at cold start rather than during the first
//! invocation. Runs on the main thread while the arena pre-warm faults in
//! memory on its own thread.

use crate::aggregate::{AggregateError, aggregate};
use crate::columns::{Item, to_batch};
use crate::query::{GroupBy, Window};
use aws_sdk_dynamodb::types::AttributeValue;
use shared::orders::attr;

/// Synthetic orders the warm-up aggregates: enough for several groups of
/// every grouping, few enough to take about a millisecond.
const ORDERS: u64 = 256;
/// Customers among the synthetic orders.
const CUSTOMERS: u64 = 16;
/// Days the synthetic orders spread over.
const DAYS: i64 = 30;
/// 2026-11-01T00:00:00Z in milliseconds: the first synthetic order's day.
const FIRST_DAY_MS: i64 = 1_793_491_200_000;
/// A day in milliseconds.
const DAY_MS: i64 = 86_400_000;
/// Currencies of the synthetic orders.
const CURRENCIES: [&str; 3] = ["EUR", "USD", "JPY"];

/// Run every grouping of the pipeline (items to a batch, aggregation, the
/// groups as JSON) over [`ORDERS`] synthetic orders.
pub fn run() -> Result<(), AggregateError> {
    let items = synthetic_orders();
    let window = Window {
        from_ms: Some(0),
        to_ms: Some(i64::MAX),
    };
    for group_by in [GroupBy::Customer, GroupBy::Day, GroupBy::Currency] {
        let (batch, _) = to_batch(&items, group_by);
        let (groups, _) = aggregate(vec![batch], window)?;
        std::hint::black_box(serde_json::to_vec(&groups).ok());
    }
    Ok(())
}

/// Well-formed order items with the attributes the analytics read, keys out
/// of order (so the sort has work to do), deterministic.
fn synthetic_orders() -> Vec<Item> {
    (0..ORDERS)
        .map(|i| {
            let created_at_ms = FIRST_DAY_MS + (i as i64 * 2_654_435_761) % (DAYS * DAY_MS);
            Item::from([
                (
                    attr::CUSTOMER_ID.into(),
                    AttributeValue::S(format!("cust-{:06}", (i * 7) % CUSTOMERS)),
                ),
                (
                    attr::CURRENCY.into(),
                    AttributeValue::S(CURRENCIES[(i % 3) as usize].into()),
                ),
                (
                    attr::CREATED_AT_MS.into(),
                    AttributeValue::N(created_at_ms.to_string()),
                ),
                (
                    attr::TOTAL_CENTS.into(),
                    AttributeValue::N((1 + (i * 7_919) % 999_999).to_string()),
                ),
                (
                    attr::TOTAL_QUANTITY.into(),
                    AttributeValue::N((1 + i % 49).to_string()),
                ),
            ])
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::columns::read;

    #[test]
    fn the_synthetic_orders_are_well_formed_and_the_warm_up_runs() {
        let items = synthetic_orders();
        assert_eq!(items.len() as u64, ORDERS);
        for group_by in [GroupBy::Customer, GroupBy::Day, GroupBy::Currency] {
            let (batch, skipped) = to_batch(&items, group_by);
            assert_eq!(batch.num_rows() as u64, ORDERS);
            assert_eq!(skipped.total(), 0);
        }
        let days: std::collections::BTreeSet<_> = items
            .iter()
            .filter_map(|item| read(item, GroupBy::Day).ok())
            .map(|row| row.key)
            .collect();
        assert!(days.len() > 10, "{days:?}");
        run().expect("warm-up");
    }
}

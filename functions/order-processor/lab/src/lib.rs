//! What the order processor's lab probes (`examples/`) share: the SQS
//! batches they send.

use order_processor_testkit::orders;
use serde_json::{Value, json};

/// An SQS event of `count` valid orders from order `first` on, each of
/// `items` items (1 keeps the sample order's own).
pub fn batch(first: u64, count: u64, items: usize) -> Value {
    let records = orders::records(first..first + count, |n| {
        let mut order = orders::order(n);
        if items > 1 {
            let item = order.items[0].clone();
            order.items = vec![item; items];
            order.total_cents = order
                .items
                .iter()
                .map(|i| u64::from(i.quantity) * i.unit_price_cents)
                .sum();
        }
        serde_json::to_string(&order).unwrap_or_default()
    });
    json!({ "Records": records })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_batches_are_valid_orders_of_that_many_items() {
        let event = batch(7, 10, 100);
        let records = event["Records"].as_array().expect("records");
        assert_eq!(records.len(), 10);
        for record in records {
            let body = record["body"].as_str().expect("body");
            let order = order_processor::order::parse(body).expect("valid");
            assert_eq!(order.order.items.len(), 100);
        }
    }

    #[test]
    fn batches_from_different_orders_share_no_order() {
        let ids = |event: &Value| -> Vec<String> {
            event["Records"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|r| r["body"].as_str().map(str::to_owned))
                .collect()
        };
        let (first, second) = (batch(0, 10, 1), batch(10, 10, 1));
        assert_eq!(ids(&first).len(), 10);
        assert!(ids(&first).iter().all(|body| !ids(&second).contains(body)));
    }
}

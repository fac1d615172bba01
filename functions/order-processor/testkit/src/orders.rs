//! Deterministic sample orders for tests, benchmarks and the local demo.

use order_processor::order::{Item, Order};

const CURRENCIES: [&str; 4] = ["EUR", "USD", "GBP", "JPY"];
/// 2026-11-01T00:00:00Z in seconds.
const START: i64 = 1_793_491_200;

/// The `n`-th sample order: 50 customers, 4 currencies, 1 to 4 items, spread
/// over 30 days. Always valid.
pub fn order(n: u64) -> Order {
    let items: Vec<Item> = (0..=(n % 4))
        .map(|k| Item {
            sku: format!("SKU-{}", (n * 7 + k) % 100),
            quantity: u32::try_from(1 + (n + k) % 5).unwrap_or(1),
            unit_price_cents: 99 + (n * 31 + k * 17) % 10_000,
        })
        .collect();
    let total_cents = items
        .iter()
        .map(|i| u64::from(i.quantity) * i.unit_price_cents)
        .sum();
    let at = START + i64::try_from(n % (30 * 24 * 60)).unwrap_or(0) * 60;
    let created_at = time::OffsetDateTime::from_unix_timestamp(at)
        .ok()
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_else(|| "2026-11-01T00:00:00Z".to_owned());
    Order {
        order_id: format!("ord-{n:08}"),
        customer_id: format!("cust-{:03}", n % 50),
        items,
        total_cents,
        currency: CURRENCIES[usize::try_from(n % 4).unwrap_or(0)].to_owned(),
        created_at,
    }
}

/// The `n`-th sample order as a message body.
pub fn body(n: u64) -> String {
    serde_json::to_string(&order(n)).unwrap_or_default()
}

/// Standard-queue SQS records `msg-N` for `range`, with bodies from `body`
/// (e.g. [`body`]).
pub fn records(
    range: std::ops::Range<u64>,
    body: impl Fn(u64) -> String,
) -> Vec<aws_lambda_events::sqs::SqsMessage> {
    range
        .map(|n| {
            let mut m = aws_lambda_events::sqs::SqsMessage::default();
            m.message_id = Some(format!("msg-{n}"));
            m.body = Some(body(n));
            m
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_are_valid_and_distinct() {
        let a = order_processor::order::parse(&body(1)).expect("valid");
        let b = order_processor::order::parse(&body(2)).expect("valid");
        assert_ne!(a.content_hash, b.content_hash);
        for n in 0..2_000 {
            order_processor::order::parse(&body(n)).unwrap_or_else(|e| panic!("sample {n}: {e}"));
        }
    }
}

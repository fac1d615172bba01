//! The Arrow kernels' aggregation: groups in key order with their statistics,
//! money per currency, a half-open time window, nothing in nothing out.

use arrow_array::RecordBatch;
use arrow_worker::aggregate::aggregate;
use arrow_worker::answer::{Money, Stats};
use arrow_worker::columns::to_batch;
use arrow_worker::query::{GroupBy, Window};
use arrow_worker_testkit::orders::order_item;

fn batch(rows: &[(&str, i64, u64, u64)]) -> RecordBatch {
    let items: Vec<_> = rows
        .iter()
        .map(|(c, ms, t, q)| order_item(c, "EUR", *ms, *t, *q))
        .collect();
    to_batch(&items, GroupBy::Customer).0
}

fn eur(count: u64, sum: u64, min: u64, max: u64) -> Vec<Money> {
    vec![Money {
        currency: "EUR".into(),
        count,
        total_cents: Stats::new(count, sum, min, max),
    }]
}

const ALL: Window = Window {
    from_ms: None,
    to_ms: None,
};

#[test]
fn groups_come_in_key_order_with_their_statistics() {
    let batches = vec![
        batch(&[("b", 0, 10, 1), ("a", 5, 4, 2)]),
        batch(&[("b", 9, 30, 3)]),
    ];
    let (groups, matched) = aggregate(batches, ALL).unwrap();
    assert_eq!(matched, 3);
    let keys: Vec<_> = groups.iter().map(|g| g.key.as_str()).collect();
    assert_eq!(keys, ["a", "b"]);
    let b = &groups[1];
    assert_eq!(b.count, 2);
    assert_eq!(b.money, eur(2, 40, 10, 30));
    assert_eq!(b.money[0].total_cents.mean, 20.0);
    assert_eq!((b.quantity.sum, b.quantity.min, b.quantity.max), (4, 1, 3));
}

#[test]
fn the_window_is_half_open() {
    let batches = vec![batch(&[
        ("a", 99, 1, 1),
        ("a", 100, 2, 1),
        ("a", 199, 4, 1),
        ("a", 200, 8, 1),
    ])];
    let window = Window {
        from_ms: Some(100),
        to_ms: Some(200),
    };
    let (groups, matched) = aggregate(batches, window).unwrap();
    assert_eq!(matched, 2);
    assert_eq!(groups[0].money, eur(2, 6, 2, 4));
}

#[test]
fn nothing_in_nothing_out() {
    assert_eq!(aggregate(Vec::new(), ALL).unwrap().1, 0);
    let window = Window {
        from_ms: Some(1_000),
        to_ms: None,
    };
    let (groups, matched) = aggregate(vec![batch(&[("a", 1, 1, 1)])], window).unwrap();
    assert!(groups.is_empty());
    assert_eq!(matched, 0);
}

#[test]
fn money_in_different_currencies_never_adds_up() {
    let items = [
        order_item("a", "JPY", 1, 5_000, 1),
        order_item("a", "EUR", 2, 100, 2),
        order_item("b", "EUR", 3, 7, 1),
        order_item("a", "EUR", 4, 300, 3),
    ];
    for group_by in [GroupBy::Customer, GroupBy::Day] {
        let (groups, matched) = aggregate(vec![to_batch(&items, group_by).0], ALL).unwrap();
        assert_eq!(matched, 4);
        let money = |g: usize| -> Vec<(String, u64, u64)> {
            groups[g]
                .money
                .iter()
                .map(|m| (m.currency.clone(), m.count, m.total_cents.sum))
                .collect()
        };
        let a = [("EUR".into(), 2, 400), ("JPY".into(), 1, 5_000)];
        match group_by {
            GroupBy::Customer => {
                assert_eq!((groups[0].count, money(0)), (3, a.to_vec()));
                assert_eq!(groups[0].quantity, Stats::new(3, 6, 1, 3));
                assert_eq!(money(1), [("EUR".into(), 1, 7)]);
            }
            _ => {
                // One day: every order, money still per currency.
                assert_eq!(groups.len(), 1);
                assert_eq!(money(0), [("EUR".into(), 3, 407), ("JPY".into(), 1, 5_000)]);
            }
        }
    }
    let (by_currency, _) = aggregate(vec![to_batch(&items, GroupBy::Currency).0], ALL).unwrap();
    let keys: Vec<_> = by_currency
        .iter()
        .map(|g| (g.key.as_str(), g.money.len()))
        .collect();
    assert_eq!(keys, [("EUR", 1), ("JPY", 1)]);
}

#[test]
fn an_order_without_a_valid_currency_is_skipped_in_every_grouping() {
    let mut missing = order_item("a", "EUR", 1, 100, 1);
    missing.remove("currency");
    let items = [
        missing,
        order_item("a", "eur", 1, 100, 1),
        order_item("a", "EUR", 1, 5, 1),
    ];
    for group_by in [GroupBy::Customer, GroupBy::Day, GroupBy::Currency] {
        let (batch, skipped) = to_batch(&items, group_by);
        assert_eq!(
            (
                batch.num_rows(),
                skipped.missing_field,
                skipped.out_of_range
            ),
            (1, 1, 1)
        );
    }
}

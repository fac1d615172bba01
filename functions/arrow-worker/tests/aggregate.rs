//! The Arrow kernels' aggregation: groups in key order with their statistics,
//! a half-open time window, nothing in nothing out.

use arrow_array::RecordBatch;
use arrow_worker::aggregate::aggregate;
use arrow_worker::columns::to_batch;
use arrow_worker::query::{GroupBy, Window};
use testkit::arrow::order_item;

fn batch(rows: &[(&str, i64, u64, u64)]) -> RecordBatch {
    let items: Vec<_> = rows
        .iter()
        .map(|(c, ms, t, q)| order_item(c, "EUR", *ms, *t, *q))
        .collect();
    to_batch(&items, GroupBy::Customer).0
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
    assert_eq!(
        (
            b.count,
            b.total_cents.sum,
            b.total_cents.min,
            b.total_cents.max
        ),
        (2, 40, 10, 30)
    );
    assert_eq!(b.total_cents.mean, 20.0);
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
    assert_eq!(groups[0].total_cents.sum, 6);
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

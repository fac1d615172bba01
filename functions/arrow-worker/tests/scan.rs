//! The scan: every page of the requested segments, read concurrently, turned
//! into batches; malformed items counted; `MAX_ROWS` enforced. (Stopping at
//! the deadline: the unit tests of `scan.rs`.)

use arrow_worker::budget::RowBudget;
use arrow_worker::query::GroupBy;
use arrow_worker::scan::scan;
use arrow_worker::store::Source;
use arrow_worker_testkit::orders::{self as arrow, MemoryStore};
use shared::invocation::Deadline;
use std::collections::HashMap;

/// A deadline no test reaches.
fn far() -> Deadline {
    Deadline::at(std::time::Instant::now() + std::time::Duration::from_secs(3_600))
}

#[tokio::test]
async fn every_segment_is_read_once_and_malformed_items_are_counted() {
    let mut items = arrow::items(50, 7, 3);
    items.push(HashMap::new());
    let store = MemoryStore::new(items, 8);
    let scanned = scan(
        &store,
        Source::segments(4),
        GroupBy::Customer,
        Some(&RowBudget::new(1_000)),
        far(),
        Vec::new,
    )
    .await
    .unwrap();
    let rows: usize = scanned.collected.iter().map(|b| b.num_rows()).sum();
    assert_eq!(rows, 50);
    assert_eq!(scanned.rows.scanned, 51);
    assert_eq!(scanned.rows.skipped.missing_field, 1);
    assert!(scanned.pages >= 4);
}

#[tokio::test]
async fn too_many_rows_is_a_clear_error() {
    let store = MemoryStore::new(arrow::items(50, 7, 3), 8);
    let err = scan(
        &store,
        Source::segments(1),
        GroupBy::Day,
        Some(&RowBudget::new(20)),
        far(),
        Vec::new,
    )
    .await
    .unwrap_err();
    assert!(err.to_string().contains("more than 20 rows"), "{err}");
}

#[tokio::test]
async fn concurrent_scans_share_the_environments_rows_and_the_later_is_busy() {
    // Each of two scans of 50 rows fits a budget of 80 alone; together they
    // do not: the one that finds the rest held is refused (Busy) and gives
    // back what it held, the other finishes, and a scan after both fits.
    let store = MemoryStore::new(arrow::items(50, 7, 3), 5)
        .with_page_latency(std::time::Duration::from_millis(5));
    let budget = RowBudget::new(80);
    let read = || {
        scan(
            &store,
            Source::segments(1),
            GroupBy::Day,
            Some(&budget),
            far(),
            Vec::new,
        )
    };
    let (first, second) = tokio::join!(read(), read());
    let (done, busy) = match (first, second) {
        (Ok(done), Err(busy)) | (Err(busy), Ok(done)) => (done, busy),
        other => panic!("expected one scan done and one busy: {other:?}"),
    };
    assert!(busy.to_string().starts_with("busy:"), "{busy}");
    assert_eq!(done.held.rows(), 50, "the finished scan holds its rows");
    assert_eq!(budget.in_use(), 50, "the busy one gave its rows back");
    drop(done);
    assert_eq!(budget.in_use(), 0);
    let again = read().await.expect("alone it fits");
    assert_eq!(again.rows.scanned, 50);
}

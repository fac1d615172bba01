//! Reading orders: every page of the requested sources (scan segments, or the
//! shards of one day in the day index), concurrently, each page turned into an
//! Arrow batch as it arrives (the raw items of a page are dropped before the
//! next one is requested).
//!
//! The conversion of a page runs here, on the scan's task, not on the Rayon
//! pool: it is linear in one page (DynamoDB returns at most 1 MB a page), far
//! shorter than the request that fetched it, and doing it at once frees the
//! page's items before the next request. Handing each page to the pool would
//! add a hop per page and keep the items alive longer; the CPU-heavy step, the
//! aggregation over all rows, does run on the pool (see `handler.rs`).

use crate::answer::Rows;
use crate::columns::to_batch;
use crate::query::GroupBy;
use crate::store::{Source, Store, StoreError};
use arrow_array::RecordBatch;
use futures::future::try_join_all;
use std::sync::atomic::{AtomicU64, Ordering};

/// What a scan read.
#[derive(Debug, Default)]
pub struct Scanned {
    /// Well-formed rows, one batch per non-empty page.
    pub batches: Vec<RecordBatch>,
    /// Items read and skipped (`matched` is left to the aggregation).
    pub rows: Rows,
    /// Pages read.
    pub pages: u64,
}

/// Why a scan stopped.
#[derive(Debug, thiserror::Error)]
pub enum ScanError {
    /// DynamoDB failed (after the SDK's retries).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The segment holds more rows than one invocation may hold in memory.
    #[error(
        "more than {0} rows (MAX_ROWS) in one invocation: fan out over more segments (see the state machine in template.yaml)"
    )]
    TooManyRows(u64),
}

/// Read `sources` concurrently, keyed by `group_by`, stopping with an error
/// once more than `max_rows` items were read.
pub async fn scan<S: Store>(
    store: &S,
    sources: impl IntoIterator<Item = Source>,
    group_by: GroupBy,
    max_rows: u64,
) -> Result<Scanned, ScanError> {
    let read = AtomicU64::new(0);
    let read = &read;
    let parts = try_join_all(sources.into_iter().map(|source| async move {
        let mut part = Scanned::default();
        let mut start = None;
        loop {
            let page = store.read_page(&source, start).await?;
            let items = page.items.len() as u64;
            if read.fetch_add(items, Ordering::Relaxed) + items > max_rows {
                return Err(ScanError::TooManyRows(max_rows));
            }
            let (batch, skipped) = to_batch(&page.items, group_by);
            part.pages += 1;
            // Every count here is at most `max_rows` (checked above), so
            // these additions cannot overflow; if they did, there were too many.
            let page_rows = Rows {
                scanned: items,
                matched: 0,
                skipped,
            };
            part.rows
                .add(&page_rows)
                .map_err(|_| ScanError::TooManyRows(max_rows))?;
            if batch.num_rows() > 0 {
                part.batches.push(batch);
            }
            match page.next {
                Some(next) => start = Some(next),
                None => return Ok(part),
            }
        }
    }))
    .await?;
    let mut all = Scanned::default();
    for part in parts {
        all.batches.extend(part.batches);
        all.rows
            .add(&part.rows)
            .map_err(|_| ScanError::TooManyRows(max_rows))?;
        all.pages += part.pages;
    }
    Ok(all)
}

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
//!
//! A scan stops at the invocation's [`Deadline`]: no page is requested once
//! it is past, and a page request still unanswered then is abandoned. The
//! invocation then fails with `DeadlineTooShort` while it can still answer,
//! instead of being stopped by Lambda with nothing said (a timeout also costs
//! the execution environment: the next invocation is a cold start).

use crate::answer::Rows;
use crate::budget::{Held, Refused, RowBudget};
use crate::columns::to_batch;
use crate::query::GroupBy;
use crate::store::{Source, Store, StoreError};
use arrow_array::RecordBatch;
use futures::future::try_join_all;
use shared::invocation::Deadline;
use std::sync::atomic::{AtomicU64, Ordering};

/// What a scan does with the rows of each page, as it arrives.
pub trait Collect: Send {
    /// The error a page can end the scan with.
    type Error: From<ScanError> + Send;
    /// Take the well-formed rows of one page (a non-empty batch).
    fn page(&mut self, batch: RecordBatch) -> Result<(), Self::Error>;
    /// Take what the reading of another source collected.
    fn join(&mut self, other: Self) -> Result<(), Self::Error>;
}

/// Keep every page's batch, for an aggregation over all of them at the end
/// (memory follows the rows: bound the scan with `max_rows`).
impl Collect for Vec<RecordBatch> {
    type Error = ScanError;

    fn page(&mut self, batch: RecordBatch) -> Result<(), ScanError> {
        self.push(batch);
        Ok(())
    }

    fn join(&mut self, other: Self) -> Result<(), ScanError> {
        self.extend(other);
        Ok(())
    }
}

/// What a scan read.
#[derive(Debug, Default)]
pub struct Scanned<C> {
    /// What the pages' rows were collected into.
    pub collected: C,
    /// Items read and skipped (`matched` is left to the aggregation).
    pub rows: Rows,
    /// Pages read.
    pub pages: u64,
    /// The rows reserved in the environment's budget for what was
    /// collected: keep it until the collected rows are dropped.
    pub held: Held,
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
    /// Other requests in flight in this environment (Lambda Managed
    /// Instances) hold the rest of the rows it may hold at once.
    #[error(
        "busy: other requests in this environment hold {held} of its {limit} rows (MAX_ROWS); try again shortly"
    )]
    Busy {
        /// Rows held by every request when this one was refused.
        held: u64,
        /// The environment's budget.
        limit: u64,
    },
    /// The invocation's deadline came before the last page.
    #[error(
        "the scan stopped at the invocation's deadline after {pages} page(s), {rows} row(s): fan out over more segments (the state machine's total_segments) or raise the function's Timeout (template.yaml)"
    )]
    Deadline {
        /// Pages read by then.
        pages: u64,
        /// Items read by then.
        rows: u64,
    },
}

/// Read `sources` concurrently, keyed by `group_by`, each page's rows handed
/// to a collector (one per source, made by `collector`, joined at the end);
/// stopping with an error once the rows read do not fit in `budget` (if
/// given: `TooManyRows` past it alone, `Busy` when other requests hold the
/// rest) or at `deadline`.
pub async fn scan<S: Store, C: Collect>(
    store: &S,
    sources: impl IntoIterator<Item = Source>,
    group_by: GroupBy,
    budget: Option<&RowBudget>,
    deadline: Deadline,
    collector: impl Fn() -> C + Sync,
) -> Result<Scanned<C>, C::Error> {
    let limit = budget.map_or(u64::MAX, RowBudget::limit);
    let (read, pages) = (AtomicU64::new(0), AtomicU64::new(0));
    let (read, pages, collector) = (&read, &pages, &collector);
    let late = || ScanError::Deadline {
        pages: pages.load(Ordering::Relaxed),
        rows: read.load(Ordering::Relaxed),
    };
    let finish_by = tokio::time::Instant::from_std(deadline.instant());
    let parts = try_join_all(sources.into_iter().map(|source| async move {
        let mut part = Scanned {
            collected: collector(),
            rows: Rows::default(),
            pages: 0,
            held: Held::default(),
        };
        let mut start = None;
        loop {
            // Checked before each request too: a store that answers at once
            // never lets the timeout below see the deadline.
            if deadline.is_past() {
                return Err(late().into());
            }
            let page = tokio::time::timeout_at(finish_by, store.read_page(&source, start))
                .await
                .map_err(|_| late())?
                .map_err(ScanError::from)?;
            pages.fetch_add(1, Ordering::Relaxed);
            let items = page.items.len() as u64;
            if read
                .fetch_add(items, Ordering::Relaxed)
                .saturating_add(items)
                > limit
            {
                return Err(ScanError::TooManyRows(limit).into());
            }
            if let Some(budget) = budget {
                budget
                    .reserve(&mut part.held, items)
                    .map_err(|refused| match refused {
                        Refused::TooMany => ScanError::TooManyRows(limit),
                        Refused::Busy => ScanError::Busy {
                            held: budget.in_use(),
                            limit,
                        },
                    })?;
            }
            let (batch, skipped) = to_batch(&page.items, group_by);
            drop(page.items);
            part.pages += 1;
            let page_rows = Rows {
                scanned: items,
                matched: 0,
                skipped,
            };
            // Counts past 64 bits: far more rows than any scan holds.
            part.rows
                .add(&page_rows)
                .map_err(|_| ScanError::TooManyRows(limit))?;
            if batch.num_rows() > 0 {
                part.collected.page(batch)?;
            }
            match page.next {
                Some(next) => start = Some(next),
                None => return Ok::<_, C::Error>(part),
            }
        }
    }))
    .await?;
    let mut all = Scanned {
        collected: collector(),
        rows: Rows::default(),
        pages: 0,
        held: Held::default(),
    };
    for part in parts {
        all.held.join(part.held);
        all.collected.join(part.collected)?;
        all.rows
            .add(&part.rows)
            .map_err(|_| ScanError::TooManyRows(limit))?;
        all.pages += part.pages;
    }
    Ok(all)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::columns::Item;
    use crate::store::{FanOutError, ObjectError, Page, PutMode, Report};
    use std::time::{Duration, Instant};

    /// A table of empty pages, each naming a next one, up to `pages` requests
    /// (then the last); with `hangs`, no request is ever answered.
    #[derive(Default)]
    struct Endless {
        hangs: bool,
        pages: u64,
        requests: AtomicU64,
    }

    impl Store for Endless {
        async fn read_page(&self, _: &Source, _: Option<Item>) -> Result<Page, StoreError> {
            let n = self.requests.fetch_add(1, Ordering::Relaxed) + 1;
            if self.hangs {
                std::future::pending::<()>().await;
            }
            let next = (n < self.pages).then(Item::new);
            Ok(Page {
                items: Vec::new(),
                next,
            })
        }

        async fn save_report(&self, _: &Report) -> Result<crate::store::Saved, StoreError> {
            Ok(crate::store::Saved::Written)
        }

        async fn put_object(&self, _: &str, _: Vec<u8>, _: PutMode) -> Result<(), ObjectError> {
            Ok(())
        }

        async fn get_object(&self, _: &str, _: usize) -> Result<Vec<u8>, ObjectError> {
            Ok(Vec::new())
        }

        async fn start_fan_out(&self, _: &str, _: String) -> Result<(), FanOutError> {
            Ok(())
        }
    }

    fn in_ms(ms: u64) -> Deadline {
        Deadline::at(Instant::now() + Duration::from_millis(ms))
    }

    #[tokio::test]
    async fn paging_stops_at_the_deadline() {
        // Far more pages than 50 ms can read: only the deadline ends the scan.
        let store = Endless {
            pages: u64::MAX,
            ..Endless::default()
        };
        let result = scan(
            &store,
            Source::segments(2),
            GroupBy::Day,
            Some(&RowBudget::new(10)),
            in_ms(50),
            Vec::new,
        )
        .await;
        let Err(ScanError::Deadline { pages, rows }) = result else {
            panic!("{result:?}");
        };
        assert!(pages > 0 && rows == 0, "{pages} pages, {rows} rows");
        assert_eq!(pages, store.requests.load(Ordering::Relaxed));
        // The same table, shorter, is read to its end.
        let store = Endless {
            pages: 5,
            ..Endless::default()
        };
        let scanned = scan(
            &store,
            Source::segments(1),
            GroupBy::Day,
            Some(&RowBudget::new(10)),
            in_ms(60_000),
            Vec::new,
        )
        .await;
        assert_eq!(scanned.map(|s| s.pages).ok(), Some(5));
    }

    #[tokio::test]
    async fn a_request_unanswered_at_the_deadline_is_abandoned() {
        let store = Endless {
            hangs: true,
            ..Endless::default()
        };
        let budget = RowBudget::new(10);
        let scan = scan(
            &store,
            Source::segments(3),
            GroupBy::Day,
            Some(&budget),
            in_ms(50),
            Vec::new,
        );
        let result = tokio::time::timeout(Duration::from_secs(10), scan).await;
        assert!(
            matches!(result, Ok(Err(ScanError::Deadline { pages: 0, rows: 0 }))),
            "{result:?}"
        );
        assert_eq!(store.requests.load(Ordering::Relaxed), 3);
    }

    #[tokio::test]
    async fn a_past_deadline_requests_nothing() {
        let store = Endless::default();
        let result = scan(
            &store,
            Source::segments(4),
            GroupBy::Day,
            Some(&RowBudget::new(10)),
            in_ms(0),
            Vec::new,
        )
        .await;
        assert!(
            matches!(result, Err(ScanError::Deadline { pages: 0, rows: 0 })),
            "{result:?}"
        );
        assert_eq!(store.requests.load(Ordering::Relaxed), 0);
    }
}

//! The rows this environment's scans hold in memory at once (`MAX_ROWS`).
//!
//! A scan keeps every page's rows until its aggregation is done, so memory
//! follows the rows held. On demand one invocation runs at a time; on Lambda
//! Managed Instances several share the environment's memory, so `MAX_ROWS` is
//! the environment's budget, shared by every scan in flight: each page's rows
//! are reserved as the page arrives and given back when the request ends.
//!
//! A scan that would pass `MAX_ROWS` alone fails with `TooManyRows` (fan out);
//! one that finds the rest of the budget held by other requests fails at once
//! with `Busy` and gives back what it held, instead of waiting for rows while
//! holding rows (two scans could then wait on each other) or taking memory
//! the environment does not have (an out-of-memory kill ends every request in
//! flight). `Busy` is retried: by the state machine's `Retry`, or the caller.

use std::sync::Arc;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, TryAcquireError};

/// The environment's budget of rows held at once.
#[derive(Debug, Clone)]
pub struct RowBudget {
    limit: u64,
    free: Arc<Semaphore>,
}

/// Rows a request holds; given back when dropped.
#[derive(Debug, Default)]
pub struct Held(Option<OwnedSemaphorePermit>);

/// Why rows could not be reserved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// The request alone would hold more than the budget.
    TooMany,
    /// Other requests hold the rest of the budget now.
    Busy,
}

impl RowBudget {
    /// A budget of `limit` rows (at most tokio's largest semaphore).
    pub fn new(limit: u64) -> Self {
        let permits = usize::try_from(limit)
            .unwrap_or(usize::MAX)
            .min(Semaphore::MAX_PERMITS);
        Self {
            limit: permits as u64,
            free: Arc::new(Semaphore::new(permits)),
        }
    }

    /// The budget's size.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// Rows held by every request now.
    pub fn in_use(&self) -> u64 {
        self.limit - self.free.available_permits() as u64
    }

    /// Add `rows` to what `held` holds, without waiting.
    pub fn reserve(&self, held: &mut Held, rows: u64) -> Result<(), Refused> {
        if rows == 0 {
            return Ok(());
        }
        let mine = held.rows();
        if mine.saturating_add(rows) > self.limit {
            return Err(Refused::TooMany);
        }
        let wanted = u32::try_from(rows).map_err(|_| Refused::TooMany)?;
        let permit = match Arc::clone(&self.free).try_acquire_many_owned(wanted) {
            Ok(permit) => permit,
            Err(TryAcquireError::NoPermits | TryAcquireError::Closed) => {
                return Err(Refused::Busy);
            }
        };
        match &mut held.0 {
            Some(all) => all.merge(permit),
            none => *none = Some(permit),
        }
        Ok(())
    }
}

impl Held {
    /// Hold what `other` holds too.
    pub fn join(&mut self, other: Held) {
        match (&mut self.0, other.0) {
            (Some(mine), Some(theirs)) => mine.merge(theirs),
            (mine @ None, theirs) => *mine = theirs,
            (Some(_), None) => {}
        }
    }

    /// Rows held.
    pub fn rows(&self) -> u64 {
        self.0.as_ref().map_or(0, |p| p.num_permits() as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_share_the_budget_and_give_it_back_when_done() {
        let budget = RowBudget::new(100);
        let (mut first, mut second) = (Held::default(), Held::default());
        budget.reserve(&mut first, 60).expect("room");
        budget.reserve(&mut first, 10).expect("room");
        assert_eq!((first.rows(), budget.in_use()), (70, 70));
        // Alone the second would fit; beside the first it does not.
        assert_eq!(budget.reserve(&mut second, 40), Err(Refused::Busy));
        assert_eq!(second.rows(), 0, "a refusal holds nothing");
        budget.reserve(&mut second, 30).expect("the rest");
        assert_eq!(budget.in_use(), 100);
        drop(first);
        assert_eq!(budget.in_use(), 30);
        budget.reserve(&mut second, 40).expect("given back");
        // More than the whole budget is too many, whoever holds the rest.
        assert_eq!(budget.reserve(&mut second, 31), Err(Refused::TooMany));
        drop(second);
        assert_eq!(budget.in_use(), 0);
    }
}

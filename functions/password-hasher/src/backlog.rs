//! The work this environment has accepted and not finished: what a new
//! request waits behind.
//!
//! On Lambda Managed Instances several requests share one Rayon pool. A
//! request's estimate alone ([`crate::calibration`]) says how long it takes on
//! an idle pool; with others in progress it ends, at the latest, once all the
//! work accepted before it and its own is done (the pool never idles while
//! work waits). So a request is accepted only if its estimate plus the
//! backlog fits before its deadline, and it adds its estimate to the backlog
//! until it finishes (or its invocation is dropped). On-demand the backlog is
//! always empty when a request arrives, and the rule is the one of an idle
//! pool.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Estimated time of the work accepted and not finished, in nanoseconds.
#[derive(Debug, Default)]
pub struct Backlog {
    nanos: AtomicU64,
}

/// A request's share of the backlog, removed when dropped.
#[derive(Debug)]
#[must_use = "the work leaves the backlog when this is dropped"]
pub struct Admitted<'a> {
    backlog: &'a Backlog,
    nanos: u64,
}

impl Backlog {
    /// The estimated time of the work accepted and not finished.
    pub fn queued(&self) -> Duration {
        Duration::from_nanos(self.nanos.load(Ordering::Acquire))
    }

    /// Accept `estimate` if, behind the queued work, it would be done within
    /// `budget`: the ticket on success, else the queued work it would wait
    /// behind. Atomic: two requests never both take the same room.
    pub fn admit(&self, estimate: Duration, budget: Duration) -> Result<Admitted<'_>, Duration> {
        let nanos = u64::try_from(estimate.as_nanos()).unwrap_or(u64::MAX);
        let budget = u64::try_from(budget.as_nanos()).unwrap_or(u64::MAX);
        self.nanos
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |queued| {
                let done_by = queued.checked_add(nanos)?;
                (done_by <= budget).then_some(done_by)
            })
            .map(|_| Admitted {
                backlog: self,
                nanos,
            })
            .map_err(Duration::from_nanos)
    }
}

impl Drop for Admitted<'_> {
    fn drop(&mut self) {
        self.backlog.nanos.fetch_sub(self.nanos, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn work_is_admitted_while_it_fits_behind_the_queue_and_leaves_it_when_done() {
        let backlog = Backlog::default();
        let first = backlog.admit(60 * MS, 100 * MS).expect("fits alone");
        assert_eq!(backlog.queued(), 60 * MS);
        // Alone it would fit; behind the first it would not.
        assert_eq!(backlog.admit(50 * MS, 100 * MS).unwrap_err(), 60 * MS);
        let second = backlog.admit(40 * MS, 100 * MS).expect("fits behind");
        assert_eq!(backlog.queued(), 100 * MS);
        drop(first);
        assert_eq!(backlog.queued(), 40 * MS);
        drop(second);
        assert_eq!(backlog.queued(), Duration::ZERO);
        let _third = backlog
            .admit(50 * MS, 100 * MS)
            .expect("an empty queue again");
    }
}

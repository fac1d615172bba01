//! Where orders are read from and answers written to: the [`Store`] trait,
//! implemented on AWS by `aws.rs` (DynamoDB tables, the S3 bucket) and in
//! memory by the dev-only `arrow_worker_testkit::orders::MemoryStore`, so the handler's logic
//! runs without a network.

use crate::columns::Item;
use crate::query::Segment;
use std::future::Future;

/// What a read covers: one segment of a parallel scan of the orders table, or
/// one shard of one UTC day in the day index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// `Scan` segment `segment` of `total_segments` (1: the whole table).
    Segment {
        /// This segment, `0..total_segments`.
        segment: u32,
        /// The scan's segment count.
        total_segments: u32,
    },
    /// `Query` of the day index for one [`shared::orders::day_shard_key`],
    /// the orders created in `from_ms..to_ms` (the whole day, or a slice of
    /// it for one segment of a day's fan-out).
    DayShard {
        /// The shard's key: `2026-11-21#3`.
        key: String,
        /// Inclusive lower bound of `created_at_ms`.
        from_ms: i64,
        /// Exclusive upper bound of `created_at_ms`.
        to_ms: i64,
    },
}

impl Source {
    /// The scan segment `segment` names.
    pub fn of(segment: Segment) -> Source {
        Source::Segment {
            segment: segment.segment,
            total_segments: segment.total_segments,
        }
    }

    /// Every segment of a scan in `total_segments` segments.
    pub fn segments(total_segments: u32) -> impl Iterator<Item = Source> {
        (0..total_segments).map(move |segment| Source::Segment {
            segment,
            total_segments,
        })
    }
}

/// One page of a read.
#[derive(Debug, Clone, Default)]
pub struct Page {
    /// The items.
    pub items: Vec<Item>,
    /// Where the next page starts; `None` after the last page.
    pub next: Option<Item>,
}

/// A failed DynamoDB request, after the SDK's own retries.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct StoreError(pub String);

/// What kind of failure an [`ObjectError`] is: whether a retry can help.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ObjectFault {
    /// The object does not exist: never written, or expired by the bucket's
    /// lifecycle rule. No retry brings it back.
    Missing,
    /// The object is larger than this function reads.
    TooLarge,
    /// A create-only write found the key taken: nothing was written.
    Exists,
    /// Anything else: S3 failed after the SDK's retries, or no bucket is
    /// configured.
    Failed,
}

/// A failed S3 request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ObjectError {
    /// What kind of failure.
    pub fault: ObjectFault,
    /// What happened, naming the key.
    pub message: String,
}

impl ObjectError {
    /// A failure of kind `fault`, saying `message`.
    pub fn new(fault: ObjectFault, message: impl Into<String>) -> Self {
        Self {
            fault,
            message: message.into(),
        }
    }
}

/// How an object is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PutMode {
    /// Replace whatever the key holds.
    Replace,
    /// Write only if the key holds nothing (S3's `If-None-Match: *`): an
    /// object once written is never replaced.
    CreateOnly,
}

/// A report item: one day's answer and when it was computed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// The key: `daily/2026-11-21`.
    pub id: String,
    /// The answer, as JSON.
    pub body: String,
    /// The time the report stands for (RFC 3339): the schedule's time, or
    /// the clock's for a report asked for by hand.
    pub as_of: String,
    /// The same time, in milliseconds since the Unix epoch: what the store
    /// compares (text would not order `00Z` after `00.5Z`).
    pub as_of_ms: i64,
    /// Whether no later scheduled run will compute this day again.
    pub is_final: bool,
}

impl Report {
    /// Whether this report may replace `stored`, the item of the same id: a
    /// report never replaces one that stands for a later time (a replayed
    /// dead letter, a late merge), and a day's final report is never replaced
    /// by one that is not.
    pub fn may_replace(&self, stored: &Report) -> bool {
        self.as_of_ms >= stored.as_of_ms && (self.is_final || !stored.is_final)
    }
}

/// What saving a report did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Saved {
    /// The report is the day's item now.
    Written,
    /// A report of a later time, or a final one, stands and stays
    /// ([`Report::may_replace`]).
    Kept,
}

/// Orders to read, reports and answers to write, fan-outs to start.
pub trait Store: Send + Sync {
    /// One page of `source`, starting after `start`.
    fn read_page(
        &self,
        source: &Source,
        start: Option<Item>,
    ) -> impl Future<Output = Result<Page, StoreError>> + Send;

    /// Store `report`, replacing the item of the same id if it may
    /// ([`Report::may_replace`]).
    fn save_report(
        &self,
        report: &Report,
    ) -> impl Future<Output = Result<Saved, StoreError>> + Send;

    /// Write `bytes` as the object `key` of the analytics bucket.
    fn put_object(
        &self,
        key: &str,
        bytes: Vec<u8>,
        mode: PutMode,
    ) -> impl Future<Output = Result<(), ObjectError>> + Send;

    /// The object `key` of the analytics bucket, refused past `max_bytes`.
    fn get_object(
        &self,
        key: &str,
        max_bytes: usize,
    ) -> impl Future<Output = Result<Vec<u8>, ObjectError>> + Send;

    /// Start the report state machine as the execution `name` with `input`
    /// (JSON). Starting a name that already runs or ran is no error: a retry
    /// of the run that started it.
    fn start_fan_out(
        &self,
        name: &str,
        input: String,
    ) -> impl Future<Output = Result<(), FanOutError>> + Send;
}

/// A fan-out that could not be started (after the SDK's retries), or no
/// state machine is configured.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct FanOutError(pub String);

#[cfg(test)]
mod tests {
    use super::*;

    fn report(as_of_ms: i64, is_final: bool) -> Report {
        Report {
            id: "daily/2026-11-21".into(),
            body: "{}".into(),
            as_of: String::new(),
            as_of_ms,
            is_final,
        }
    }

    #[test]
    fn a_report_never_replaces_a_later_or_a_final_one() {
        let stored = report(2_000, false);
        assert!(
            report(2_000, false).may_replace(&stored),
            "the same run again"
        );
        assert!(report(3_000, false).may_replace(&stored), "a later run");
        assert!(report(3_000, true).may_replace(&stored), "the last run");
        assert!(!report(1_000, false).may_replace(&stored), "an older run");
        assert!(
            !report(1_000, true).may_replace(&stored),
            "an older final run"
        );
        let last = report(2_000, true);
        assert!(report(2_000, true).may_replace(&last), "the last run again");
        assert!(report(3_000, true).may_replace(&last), "a final one, later");
        assert!(
            !report(3_000, false).may_replace(&last),
            "never final to not"
        );
    }
}

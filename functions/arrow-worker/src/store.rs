//! Where orders are read from and reports written to: the [`Store`] trait,
//! implemented for DynamoDB by `dynamodb.rs` (and in memory by the dev-only
//! `testkit::arrow::MemoryStore`, so the handler's logic runs without a network).

use crate::columns::Item;
use std::future::Future;

/// One page of a scan.
#[derive(Debug, Clone, Default)]
pub struct Page {
    /// The items.
    pub items: Vec<Item>,
    /// Where the next page starts; `None` after the last page.
    pub next: Option<Item>,
}

/// A failed request, after the SDK's own retries.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct StoreError(pub String);

/// Orders to read, reports to write.
pub trait Store: Send + Sync {
    /// One page of `segment` of `total_segments`, starting after `start`.
    fn scan_page(
        &self,
        segment: u32,
        total_segments: u32,
        start: Option<Item>,
    ) -> impl Future<Output = Result<Page, StoreError>> + Send;

    /// Store `body` (JSON) as the report `id`, replacing an older one.
    fn save_report(
        &self,
        id: &str,
        body: String,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;
}

//! Where orders are read from and reports written to: a trait with the
//! DynamoDB implementation (`dynamodb.rs`) and an in-memory one for tests and
//! benchmarks, so the handler's logic runs without a network.

use crate::columns::Item;
use std::future::Future;
use std::sync::Mutex;

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

/// Orders held in memory: item `i` belongs to segment `i % total_segments`,
/// pages hold `page_size` items. Reports are kept in a list.
#[derive(Debug, Default)]
pub struct MemoryStore {
    items: Vec<Item>,
    page_size: usize,
    reports: Mutex<Vec<(String, String)>>,
}

impl MemoryStore {
    /// A store holding `items`, scanned `page_size` at a time.
    pub fn new(items: Vec<Item>, page_size: usize) -> Self {
        Self {
            items,
            page_size: page_size.max(1),
            reports: Mutex::default(),
        }
    }

    /// The reports saved so far.
    pub fn reports(&self) -> Vec<(String, String)> {
        self.reports.lock().map(|r| r.clone()).unwrap_or_default()
    }
}

/// Position of the next page, as a start key (the segment-local index).
const POSITION: &str = "position";

impl Store for MemoryStore {
    async fn scan_page(
        &self,
        segment: u32,
        total_segments: u32,
        start: Option<Item>,
    ) -> Result<Page, StoreError> {
        let skip = match start.as_ref().and_then(|s| s.get(POSITION)) {
            None => 0,
            Some(v) => v
                .as_n()
                .ok()
                .and_then(|n| n.parse().ok())
                .ok_or_else(|| StoreError("bad start key".into()))?,
        };
        let total = total_segments.max(1) as usize;
        let mine = self
            .items
            .iter()
            .skip(segment as usize)
            .step_by(total)
            .skip(skip);
        let items: Vec<Item> = mine.take(self.page_size).cloned().collect();
        let end = skip + items.len();
        let more = self
            .items
            .len()
            .saturating_sub(segment as usize)
            .div_ceil(total)
            > end;
        let next = more.then(|| {
            Item::from([(
                POSITION.to_owned(),
                aws_sdk_dynamodb::types::AttributeValue::N(end.to_string()),
            )])
        });
        Ok(Page { items, next })
    }

    async fn save_report(&self, id: &str, body: String) -> Result<(), StoreError> {
        let mut reports = self
            .reports
            .lock()
            .map_err(|_| StoreError("report list poisoned".into()))?;
        reports.retain(|(existing, _)| existing != id);
        reports.push((id.to_owned(), body));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample;

    #[tokio::test]
    async fn segments_partition_the_items_and_pages_cover_each_segment() {
        let store = MemoryStore::new(sample::items(23, 5, 1), 4);
        let mut seen = 0;
        for segment in 0..3 {
            let mut start = None;
            loop {
                let page = store.scan_page(segment, 3, start).await.unwrap();
                assert!(page.items.len() <= 4);
                seen += page.items.len();
                match page.next {
                    Some(next) => start = Some(next),
                    None => break,
                }
            }
        }
        assert_eq!(seen, 23);
        let empty = MemoryStore::new(Vec::new(), 4);
        let page = empty.scan_page(0, 1, None).await.unwrap();
        assert!(page.items.is_empty() && page.next.is_none());
    }
}

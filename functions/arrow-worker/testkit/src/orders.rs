//! The Arrow worker's test doubles: order items as the order processor stores
//! them (generated, deterministic for a seed) and [`MemoryStore`], an in-memory
//! [`Store`] (orders, reports, bucket objects), so the worker's handler runs
//! without a network in tests, the
//! fuzz checks and the lab.

use arrow_worker::columns::Item;
use arrow_worker::store::{
    FanOutError, ObjectError, ObjectFault, Page, PutMode, Report, Saved, Source, Store, StoreError,
};
use aws_sdk_dynamodb::types::AttributeValue;
use shared::orders::attr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// 2026-11-01T00:00:00Z in milliseconds: generated orders start here.
pub const START_MS: i64 = 1_793_491_200_000;
/// A day in milliseconds.
pub const DAY_MS: i64 = 86_400_000;
const CURRENCIES: [&str; 3] = ["EUR", "USD", "JPY"];

/// An item with the attributes the analytics read.
pub fn order_item(customer: &str, currency: &str, ms: i64, total: u64, qty: u64) -> Item {
    Item::from([
        (attr::CUSTOMER_ID.into(), AttributeValue::S(customer.into())),
        (attr::CURRENCY.into(), AttributeValue::S(currency.into())),
        (
            attr::CREATED_AT_MS.into(),
            AttributeValue::N(ms.to_string()),
        ),
        (
            attr::TOTAL_CENTS.into(),
            AttributeValue::N(total.to_string()),
        ),
        (
            attr::TOTAL_QUANTITY.into(),
            AttributeValue::N(qty.to_string()),
        ),
    ])
}

/// `n` orders over `customers` customers and 30 days, deterministic for a `seed`.
pub fn items(n: usize, customers: u64, seed: u64) -> Vec<Item> {
    let mut rng = fastrand::Rng::with_seed(seed);
    (0..n)
        .map(|i| {
            let customer = format!("cust-{:06}", rng.u64(0..customers.max(1)));
            let currency = CURRENCIES[rng.usize(0..CURRENCIES.len())];
            let ms = START_MS + rng.i64(0..30 * DAY_MS);
            let item = order_item(
                &customer,
                currency,
                ms,
                rng.u64(1..1_000_000),
                rng.u64(1..50),
            );
            keyed(item, format!("ord-{seed}-{i:08}"), ms)
        })
        .collect()
}

/// `count` orders, order `n` of customer `n % customers` (so every customer
/// has one), over 30 days, in the table's schema.
pub fn of_customers(count: u64, customers: u64) -> Vec<Item> {
    (0..count)
        .map(|n| {
            let step = i64::try_from(n).expect("a few orders") * 60_000;
            let ms = START_MS + step % (30 * DAY_MS);
            let customer = format!("cust-{:06}", n % customers);
            let item = order_item(&customer, "EUR", ms, 100 + n, 1 + n % 7);
            keyed(item, format!("ord-{n:08}"), ms)
        })
        .collect()
}

/// `item` as the order `order_id` created at `ms` is stored: its key and,
/// for the by-day index, its day shard.
pub fn keyed(mut item: Item, order_id: String, ms: i64) -> Item {
    if let Some(key) = shared::orders::day_shard(&order_id, ms) {
        item.insert(attr::DAY_SHARD.into(), AttributeValue::S(key));
    }
    item.insert(attr::ORDER_ID.into(), AttributeValue::S(order_id));
    item
}

/// Orders held in memory: item `i` belongs to segment `i % total_segments`,
/// pages hold `page_size` items. Reports are kept in a list that every clone
/// of the store shares, so a test can keep a clone and read what the handler
/// saved.
#[derive(Debug, Clone, Default)]
pub struct MemoryStore {
    items: Arc<Vec<Item>>,
    page_size: usize,
    reports: Arc<Mutex<Vec<Report>>>,
    objects: Arc<Mutex<std::collections::BTreeMap<String, Vec<u8>>>>,
    reads: Arc<AtomicU64>,
    /// Bytes of objects being read now, and the most at once.
    held: Arc<AtomicU64>,
    most_held: Arc<AtomicU64>,
    read_latency: std::time::Duration,
    page_latency: std::time::Duration,
    fan_outs: Arc<Mutex<Vec<(String, String)>>>,
    /// What a create-only write finds already there, as after S3's 412.
    occupied: Option<Occupied>,
}

/// What a create-only write finds at its key when S3 answers 412 to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Occupied {
    /// Its own bytes: its first attempt landed and the answer was lost, so
    /// the SDK's retry met the object it wrote.
    ByItsOwnFirstAttempt,
    /// Other bytes.
    ByAnotherObject,
}

impl MemoryStore {
    /// A store holding `items`, scanned `page_size` at a time.
    pub fn new(items: Vec<Item>, page_size: usize) -> Self {
        Self {
            items: Arc::new(items),
            page_size: page_size.max(1),
            reports: Arc::default(),
            objects: Arc::default(),
            reads: Arc::default(),
            held: Arc::default(),
            most_held: Arc::default(),
            read_latency: std::time::Duration::ZERO,
            page_latency: std::time::Duration::ZERO,
            fan_outs: Arc::default(),
            occupied: None,
        }
    }

    /// The same store, each create-only write finding its key `occupied`
    /// (written, then answered with S3's 412).
    pub fn with_occupied_keys(mut self, occupied: Occupied) -> Self {
        self.occupied = Some(occupied);
        self
    }

    /// The same reports and bucket over other orders: the table after it
    /// changed (orders stored late, say).
    pub fn with_items(&self, items: Vec<Item>) -> Self {
        Self {
            items: Arc::new(items),
            ..self.clone()
        }
    }

    /// The same store, each object read taking `latency` (so reads overlap).
    pub fn with_read_latency(mut self, latency: std::time::Duration) -> Self {
        self.read_latency = latency;
        self
    }

    /// The same store, each page read taking `latency` (a slow table).
    pub fn with_page_latency(mut self, latency: std::time::Duration) -> Self {
        self.page_latency = latency;
        self
    }

    /// The fan-outs started so far: (execution name, input), each name once.
    pub fn fan_outs(&self) -> Vec<(String, String)> {
        self.fan_outs.lock().map(|f| f.clone()).unwrap_or_default()
    }

    /// The most bytes of objects that were being read at the same time.
    pub fn most_bytes_read_at_once(&self) -> u64 {
        self.most_held.load(Ordering::SeqCst)
    }

    /// Items read so far (every page of every source).
    pub fn items_read(&self) -> u64 {
        self.reads.load(Ordering::Relaxed)
    }

    /// The objects stored so far, by key.
    pub fn objects(&self) -> std::collections::BTreeMap<String, Vec<u8>> {
        self.objects.lock().map(|o| o.clone()).unwrap_or_default()
    }

    /// The reports saved so far, the latest of each id.
    pub fn reports(&self) -> Vec<Report> {
        self.reports.lock().map(|r| r.clone()).unwrap_or_default()
    }
}

/// Position of the next page, as a start key (the segment-local index).
const POSITION: &str = "position";

impl MemoryStore {
    /// The items of `source`: a segment's in store order, a day shard's in
    /// creation order (the day index's sort key).
    fn items_of(&self, source: &Source) -> Vec<&Item> {
        match source {
            Source::Segment {
                segment,
                total_segments,
            } => self
                .items
                .iter()
                .skip(*segment as usize)
                .step_by((*total_segments).max(1) as usize)
                .collect(),
            Source::DayShard {
                key,
                from_ms,
                to_ms,
            } => {
                let mut mine: Vec<&Item> = self
                    .items
                    .iter()
                    .filter(|item| {
                        item.get(attr::DAY_SHARD)
                            .and_then(|v| v.as_s().ok())
                            .is_some_and(|k| k == key)
                            && (*from_ms..*to_ms).contains(&created_at(item))
                    })
                    .collect();
                mine.sort_by_key(|item| created_at(item));
                mine
            }
        }
    }
}

impl Store for MemoryStore {
    async fn read_page(&self, source: &Source, start: Option<Item>) -> Result<Page, StoreError> {
        let skip = match start.as_ref().and_then(|s| s.get(POSITION)) {
            None => 0,
            Some(v) => v
                .as_n()
                .ok()
                .and_then(|n| n.parse().ok())
                .ok_or_else(|| StoreError("bad start key".into()))?,
        };
        tokio::time::sleep(self.page_latency).await;
        let mine = self.items_of(source);
        let items: Vec<Item> = mine
            .iter()
            .skip(skip)
            .take(self.page_size)
            .map(|&item| item.clone())
            .collect();
        let end = skip + items.len();
        let more = mine.len() > end;
        self.reads.fetch_add(items.len() as u64, Ordering::Relaxed);
        let next =
            more.then(|| Item::from([(POSITION.to_owned(), AttributeValue::N(end.to_string()))]));
        Ok(Page { items, next })
    }

    /// As the conditional write on DynamoDB ([`Report::may_replace`]).
    async fn save_report(&self, report: &Report) -> Result<Saved, StoreError> {
        let mut reports = self
            .reports
            .lock()
            .map_err(|_| StoreError("report list poisoned".into()))?;
        if let Some(stored) = reports.iter().find(|saved| saved.id == report.id)
            && !report.may_replace(stored)
        {
            return Ok(Saved::Kept);
        }
        reports.retain(|saved| saved.id != report.id);
        reports.push(report.clone());
        Ok(Saved::Written)
    }

    async fn put_object(
        &self,
        key: &str,
        bytes: Vec<u8>,
        mode: PutMode,
    ) -> Result<(), ObjectError> {
        let poisoned = || ObjectError::new(ObjectFault::Failed, "object map poisoned");
        let mut objects = self.objects.lock().map_err(|_| poisoned())?;
        let failed = || {
            ObjectError::new(
                ObjectFault::Exists,
                format!("PutObject {key}: PreconditionFailed"),
            )
        };
        if mode == PutMode::CreateOnly && objects.contains_key(key) {
            return Err(failed());
        }
        match (mode, self.occupied) {
            (PutMode::CreateOnly, Some(Occupied::ByItsOwnFirstAttempt)) => {
                objects.insert(key.to_owned(), bytes);
                Err(failed())
            }
            (PutMode::CreateOnly, Some(Occupied::ByAnotherObject)) => {
                objects.insert(key.to_owned(), b"another object".to_vec());
                Err(failed())
            }
            _ => {
                objects.insert(key.to_owned(), bytes);
                Ok(())
            }
        }
    }

    async fn get_object(&self, key: &str, max_bytes: usize) -> Result<Vec<u8>, ObjectError> {
        let bytes = {
            let objects = self
                .objects
                .lock()
                .map_err(|_| ObjectError::new(ObjectFault::Failed, "object map poisoned"))?;
            let bytes = objects.get(key).ok_or_else(|| {
                ObjectError::new(ObjectFault::Missing, format!("GetObject {key}: NoSuchKey"))
            })?;
            if bytes.len() > max_bytes {
                return Err(ObjectError::new(
                    ObjectFault::TooLarge,
                    format!("{key} is larger than {max_bytes}"),
                ));
            }
            bytes.clone()
        };
        self.held.fetch_add(bytes.len() as u64, Ordering::SeqCst);
        self.most_held
            .fetch_max(self.held.load(Ordering::SeqCst), Ordering::SeqCst);
        tokio::time::sleep(self.read_latency).await;
        self.held.fetch_sub(bytes.len() as u64, Ordering::SeqCst);
        Ok(bytes)
    }

    async fn start_fan_out(&self, name: &str, input: String) -> Result<(), FanOutError> {
        let mut fan_outs = self
            .fan_outs
            .lock()
            .map_err(|_| FanOutError("fan-out list poisoned".into()))?;
        if !fan_outs.iter().any(|(started, _)| started == name) {
            fan_outs.push((name.to_owned(), input));
        }
        Ok(())
    }
}

/// `created_at_ms` of an item (`i64::MIN` without one).
fn created_at(item: &Item) -> i64 {
    item.get(attr::CREATED_AT_MS)
        .and_then(|v| v.as_n().ok())
        .and_then(|n| n.parse().ok())
        .unwrap_or(i64::MIN)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn segments_partition_the_items_and_pages_cover_each_segment() {
        let store = MemoryStore::new(items(23, 5, 1), 4);
        let mut seen = 0;
        for segment in 0..3 {
            let mut start = None;
            loop {
                let source = Source::Segment {
                    segment,
                    total_segments: 3,
                };
                let page = store.read_page(&source, start).await.unwrap();
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
        let whole = Source::Segment {
            segment: 0,
            total_segments: 1,
        };
        let page = empty.read_page(&whole, None).await.unwrap();
        assert!(page.items.is_empty() && page.next.is_none());
    }

    #[tokio::test]
    async fn clones_share_the_saved_reports() {
        let store = MemoryStore::new(Vec::new(), 4);
        let kept = store.clone();
        let report = |body: &str| Report {
            id: "daily/a".into(),
            body: body.into(),
            as_of: "2026-11-22T00:15:00Z".into(),
            as_of_ms: 1_795_306_500_000,
            is_final: false,
        };
        store.save_report(&report("1")).await.unwrap();
        store.save_report(&report("2")).await.unwrap();
        assert_eq!(kept.reports(), [report("2")]);
    }
}

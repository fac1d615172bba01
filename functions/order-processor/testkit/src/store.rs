//! The one in-memory [`OrderStore`] of the tests, the fuzz checks and the lab.
//!
//! Two ways to keep orders:
//! - [`MemoryOrders::new`] keeps `order_id -> content hash` and answers like
//!   the conditional `PutItem` of `order_processor::dynamodb`: a new id is
//!   [`Written`](PutOutcome::Written), the same order again is
//!   [`AlreadyStored`](PutOutcome::AlreadyStored), a different order under a
//!   stored id is a [`Conflict`](PutOutcome::Conflict) and overwrites nothing.
//! - [`MemoryOrders::accept_all`] answers `Written` to every order and keeps
//!   nothing, so its memory never grows (the lab and the memory soak).
//!
//! Knobs to misbehave, set when building: [`fail_first`](MemoryOrders::fail_first)
//! (throttling, say), [`fail_order`](MemoryOrders::fail_order),
//! [`panic_on`](MemoryOrders::panic_on), [`delay`](MemoryOrders::delay)
//! (a `tokio::time::sleep`, so tests with paused time do not wait) and
//! [`hang_first`](MemoryOrders::hang_first) (a request nobody answers). A call
//! counts first, then hangs or waits, then panics or fails if told to, in that
//! order.

use order_processor::order::ValidOrder;
use order_processor::store::{OrderStore, PutOutcome, StoreError};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

/// An in-memory order store with knobs to misbehave (see the module doc).
#[derive(Debug)]
pub struct MemoryOrders {
    /// `order_id -> content hash`; `None` when every order is accepted unkept.
    kept: Option<Mutex<HashMap<String, [u8; 32]>>>,
    /// `put_order` calls so far.
    calls: AtomicUsize,
    /// Calls still to fail with `first_error`.
    failures_left: AtomicUsize,
    first_error: Option<StoreError>,
    /// Every call for these orders fails with the error given.
    failing_orders: HashMap<String, StoreError>,
    /// Every call for these orders panics.
    panicking_orders: HashSet<String>,
    /// Wait this long in every call (zero: no wait, not even a yield).
    delay: Duration,
    /// Calls still to never answer.
    hangs_left: AtomicUsize,
    /// Calls in progress now, and the most there ever were at once.
    in_flight: AtomicUsize,
    peak_in_flight: AtomicUsize,
}

/// Counts a call in progress while alive (also when the caller drops it).
struct InFlight<'a>(&'a AtomicUsize);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Default for MemoryOrders {
    fn default() -> Self {
        Self::new()
    }
}

impl MemoryOrders {
    /// A store that keeps every order, conditional like DynamoDB.
    pub fn new() -> Self {
        Self {
            kept: Some(Mutex::default()),
            ..Self::accept_all()
        }
    }

    /// A store that answers `Written` to every order and keeps none.
    pub fn accept_all() -> Self {
        Self {
            kept: None,
            calls: AtomicUsize::new(0),
            failures_left: AtomicUsize::new(0),
            first_error: None,
            failing_orders: HashMap::new(),
            panicking_orders: HashSet::new(),
            delay: Duration::ZERO,
            hangs_left: AtomicUsize::new(0),
            in_flight: AtomicUsize::new(0),
            peak_in_flight: AtomicUsize::new(0),
        }
    }

    /// The first `calls` calls (whatever the order) fail with `error`, e.g.
    /// `StoreError::transient("throttled")`; `usize::MAX` for every call.
    pub fn fail_first(mut self, calls: usize, error: StoreError) -> Self {
        self.failures_left = AtomicUsize::new(calls);
        self.first_error = Some(error);
        self
    }

    /// Every call for `order_id` fails with `error` (checked before
    /// [`fail_first`](Self::fail_first), without using up its calls).
    pub fn fail_order(mut self, order_id: &str, error: StoreError) -> Self {
        self.failing_orders.insert(order_id.to_owned(), error);
        self
    }

    /// Every call for `order_id` panics.
    pub fn panic_on(mut self, order_id: &str) -> Self {
        self.panicking_orders.insert(order_id.to_owned());
        self
    }

    /// Every call waits `delay` (`tokio::time::sleep`) before answering.
    pub fn delay(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }

    /// The first `calls` calls never answer (`std::future::pending`), like a
    /// request on a connection the server stopped reading; the caller must
    /// give up on them.
    pub fn hang_first(mut self, calls: usize) -> Self {
        self.hangs_left = AtomicUsize::new(calls);
        self
    }

    /// `put_order` calls so far, failed ones included.
    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    /// The most `put_order` calls that were ever in progress at once.
    pub fn peak_in_flight(&self) -> usize {
        self.peak_in_flight.load(Ordering::SeqCst)
    }

    /// Orders kept (always 0 for [`accept_all`](Self::accept_all)).
    pub fn stored(&self) -> usize {
        self.kept.as_ref().map_or(0, |kept| {
            kept.lock().unwrap_or_else(PoisonError::into_inner).len()
        })
    }

    /// The content hash kept for `order_id`, if any.
    pub fn hash_of(&self, order_id: &str) -> Option<[u8; 32]> {
        let kept = self.kept.as_ref()?;
        kept.lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(order_id)
            .copied()
    }

    /// The injected error for this call, if any.
    fn injected_error(&self, order_id: &str) -> Option<StoreError> {
        if let Some(error) = self.failing_orders.get(order_id) {
            return Some(error.clone());
        }
        let error = self.first_error.as_ref()?;
        self.failures_left
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .ok()
            .map(|_| error.clone())
    }
}

impl OrderStore for MemoryOrders {
    async fn put_order(&self, order: &ValidOrder) -> Result<PutOutcome, StoreError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.peak_in_flight.fetch_max(now, Ordering::SeqCst);
        let _in_flight = InFlight(&self.in_flight);
        let hang = self
            .hangs_left
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
        if hang {
            std::future::pending::<()>().await;
        }
        if !self.delay.is_zero() {
            tokio::time::sleep(self.delay).await;
        }
        let id = order.order.order_id.as_str();
        if self.panicking_orders.contains(id) {
            panic!("injected panic for {id}");
        }
        if let Some(error) = self.injected_error(id) {
            return Err(error);
        }
        let Some(kept) = &self.kept else {
            return Ok(PutOutcome::Written);
        };
        let mut kept = kept.lock().unwrap_or_else(PoisonError::into_inner);
        Ok(match kept.get(id) {
            None => {
                kept.insert(id.to_owned(), order.content_hash);
                PutOutcome::Written
            }
            Some(hash) if *hash == order.content_hash => PutOutcome::AlreadyStored,
            Some(_) => PutOutcome::Conflict,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::orders;

    fn valid(n: u64) -> ValidOrder {
        order_processor::order::validate(orders::order(n)).expect("a valid sample")
    }

    fn other_content(n: u64) -> ValidOrder {
        let mut order = orders::order(n);
        order.customer_id = "cust-other".into();
        order_processor::order::validate(order).expect("valid")
    }

    fn block_on<T>(future: impl Future<Output = T>) -> T {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("runtime")
            .block_on(future)
    }

    #[test]
    fn puts_are_conditional_like_dynamodb() {
        let store = MemoryOrders::new();
        block_on(async {
            assert_eq!(store.put_order(&valid(1)).await, Ok(PutOutcome::Written));
            assert_eq!(
                store.put_order(&valid(1)).await,
                Ok(PutOutcome::AlreadyStored)
            );
            assert_eq!(
                store.put_order(&other_content(1)).await,
                Ok(PutOutcome::Conflict)
            );
        });
        assert_eq!(store.stored(), 1);
        assert_eq!(
            store.hash_of(&valid(1).order.order_id),
            Some(valid(1).content_hash)
        );
        assert_eq!(store.calls(), 3);
    }

    #[test]
    fn accept_all_keeps_nothing() {
        let store = MemoryOrders::accept_all();
        block_on(async {
            for _ in 0..3 {
                assert_eq!(store.put_order(&valid(1)).await, Ok(PutOutcome::Written));
            }
        });
        assert_eq!((store.stored(), store.calls()), (0, 3));
        assert_eq!(store.hash_of(&valid(1).order.order_id), None);
    }

    #[test]
    fn failures_are_injected_first_per_order_then_for_the_first_calls() {
        let broken = valid(2);
        let store = MemoryOrders::new()
            .fail_first(2, StoreError::transient("throttled"))
            .fail_order(&broken.order.order_id, StoreError::permanent("broken"));
        block_on(async {
            assert_eq!(
                store.put_order(&broken).await,
                Err(StoreError::permanent("broken"))
            );
            for _ in 0..2 {
                assert_eq!(
                    store.put_order(&valid(1)).await,
                    Err(StoreError::transient("throttled"))
                );
            }
            assert_eq!(store.put_order(&valid(1)).await, Ok(PutOutcome::Written));
            assert!(store.put_order(&broken).await.is_err());
        });
        assert_eq!((store.stored(), store.calls()), (1, 5));
    }

    #[test]
    fn panics_on_the_given_order_only() {
        let store = MemoryOrders::new().panic_on("ord-00000001");
        let panicked = std::panic::catch_unwind(|| block_on(store.put_order(&valid(1))));
        assert!(panicked.is_err());
        assert_eq!(
            block_on(store.put_order(&valid(2))),
            Ok(PutOutcome::Written)
        );
    }

    #[test]
    fn the_first_calls_never_answer() {
        let store = MemoryOrders::new().hang_first(1);
        block_on(async {
            let order = valid(1);
            let first = tokio::time::timeout(Duration::from_millis(20), store.put_order(&order));
            assert!(first.await.is_err(), "the first call never answers");
            assert_eq!(store.put_order(&valid(1)).await, Ok(PutOutcome::Written));
        });
        assert_eq!(store.calls(), 2);
    }

    #[test]
    fn every_call_waits_the_delay() {
        let store = MemoryOrders::accept_all().delay(Duration::from_millis(20));
        let waited = block_on(async {
            let start = tokio::time::Instant::now();
            store.put_order(&valid(1)).await.expect("written");
            start.elapsed()
        });
        assert!(waited >= Duration::from_millis(20), "{waited:?}");
    }
}

//! Where orders are stored: a trait, so the handler is tested without a network.
//! `dynamodb.rs` is the real implementation.

use crate::order::ValidOrder;
use std::future::Future;

/// What a conditional write found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PutOutcome {
    /// The order was not stored before; it is now.
    Written,
    /// The same order (same content hash) was already stored: nothing written.
    AlreadyStored,
    /// A different order is stored under this `order_id`: nothing written.
    Conflict,
}

/// A write that did not happen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreError {
    /// Worth trying again (throttling, a 5xx, a network error).
    pub retryable: bool,
    /// What went wrong, without the order's content.
    pub message: String,
}

impl StoreError {
    /// An error worth retrying.
    pub fn transient(message: impl Into<String>) -> Self {
        Self {
            retryable: true,
            message: message.into(),
        }
    }

    /// An error that retrying cannot fix.
    pub fn permanent(message: impl Into<String>) -> Self {
        Self {
            retryable: false,
            message: message.into(),
        }
    }
}

/// Stores orders idempotently: one item per `order_id`, never overwritten.
pub trait OrderStore: Send + Sync {
    /// Store `order` unless an order with its id exists; say which happened.
    fn put_order(
        &self,
        order: &ValidOrder,
    ) -> impl Future<Output = Result<PutOutcome, StoreError>> + Send;
}

impl<S: OrderStore> OrderStore for std::sync::Arc<S> {
    fn put_order(
        &self,
        order: &ValidOrder,
    ) -> impl Future<Output = Result<PutOutcome, StoreError>> + Send {
        (**self).put_order(order)
    }
}

/// In-memory fakes for unit tests.
#[cfg(test)]
pub mod fake {
    use super::*;
    use std::collections::HashMap;
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A map of order id to content hash, with knobs to misbehave.
    #[derive(Default)]
    pub struct MemoryStore {
        pub items: Mutex<HashMap<String, [u8; 32]>>,
        pub calls: AtomicUsize,
        /// Panic when asked to store this order id.
        pub panic_on: Option<String>,
        /// Fail this many calls with a retryable error before succeeding.
        pub transient_failures: AtomicUsize,
        /// Fail every call for this order id with a permanent error.
        pub broken_on: Option<String>,
    }

    impl MemoryStore {
        pub fn stored(&self) -> usize {
            self.items.lock().expect("lock").len()
        }
    }

    impl OrderStore for MemoryStore {
        async fn put_order(&self, order: &ValidOrder) -> Result<PutOutcome, StoreError> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            tokio::task::yield_now().await;
            if self.panic_on.as_deref() == Some(order.order.order_id.as_str()) {
                panic!("injected panic for {}", order.order.order_id);
            }
            if self.broken_on.as_deref() == Some(order.order.order_id.as_str()) {
                return Err(StoreError::permanent("validation exception"));
            }
            if self
                .transient_failures
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok()
            {
                return Err(StoreError::transient("throttled"));
            }
            let mut items = self.items.lock().expect("lock");
            Ok(match items.get(&order.order.order_id) {
                None => {
                    items.insert(order.order.order_id.clone(), order.content_hash);
                    PutOutcome::Written
                }
                Some(hash) if *hash == order.content_hash => PutOutcome::AlreadyStored,
                Some(_) => PutOutcome::Conflict,
            })
        }
    }
}

//! Where orders are stored: a trait, so the handler is tested without a network.
//! `dynamodb.rs` is the real implementation; the tests, the fuzz checks and the
//! lab use the in-memory one in `order_processor_testkit::store`.

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
    /// An order is stored under this `order_id` in a `hash_version` newer
    /// than this code knows (a newer release stored it and was rolled back):
    /// only that release can tell whether it is the same order. Nothing
    /// written.
    NewerVersion(u64),
}

/// A write that did not happen: of an order, or of a dead letter
/// (`dead_letter.rs`), both retried by `retry.rs`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreError {
    /// Worth trying again (throttling, a 5xx, a network error).
    pub retryable: bool,
    /// What went wrong, without the order's content or the message body.
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

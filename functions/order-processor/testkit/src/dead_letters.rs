//! The one in-memory [`DeadLetters`] of the tests, the fuzz checks and the lab:
//! it keeps every dead letter sent, in order, or fails every send when told
//! to ([`MemoryDeadLetters::failing`]).

use order_processor::dead_letter::{DeadLetter, DeadLetters};
use order_processor::store::StoreError;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};

/// A `DEAD_LETTER_QUEUE_URL` the order processor's settings accept, for a
/// configuration whose dead letters go to a [`MemoryDeadLetters`].
pub const QUEUE_URL: &str =
    "https://sqs.us-east-1.amazonaws.com/123456789012/OrdersDeadLetterQueue";

/// An in-memory dead-letter queue.
#[derive(Debug, Default)]
pub struct MemoryDeadLetters {
    sent: Mutex<Vec<DeadLetter>>,
    /// `send` calls so far, failed ones included.
    calls: AtomicUsize,
    /// Every send fails with this error.
    error: Option<StoreError>,
}

impl MemoryDeadLetters {
    /// A queue that takes every dead letter.
    pub fn new() -> Self {
        Self::default()
    }

    /// A queue whose every send fails with `error`, e.g.
    /// `StoreError::transient("SQS unreachable")`.
    pub fn failing(error: StoreError) -> Self {
        Self {
            error: Some(error),
            ..Self::default()
        }
    }

    /// The dead letters sent so far, in order.
    pub fn sent(&self) -> Vec<DeadLetter> {
        self.sent
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// `send` calls so far, failed ones included.
    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

impl DeadLetters for MemoryDeadLetters {
    async fn send(&self, letter: &DeadLetter) -> Result<(), StoreError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if let Some(error) = &self.error {
            return Err(error.clone());
        }
        self.sent
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(letter.clone());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_lambda_events::sqs::SqsMessage;
    use order_processor::error::RecordFailure;

    fn letter() -> DeadLetter {
        let mut record = SqsMessage::default();
        record.message_id = Some("m-1".into());
        record.body = Some("x".into());
        DeadLetter::new(&record, &RecordFailure::Conflict, false).expect("letter")
    }

    fn block_on<T>(future: impl Future<Output = T>) -> T {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime")
            .block_on(future)
    }

    #[test]
    fn keeps_what_is_sent_or_fails_every_send() {
        let queue = MemoryDeadLetters::new();
        block_on(queue.send(&letter())).expect("sent");
        assert_eq!(queue.sent(), [letter()]);
        let down = MemoryDeadLetters::failing(StoreError::transient("down"));
        assert_eq!(
            block_on(down.send(&letter())),
            Err(StoreError::transient("down"))
        );
        assert!(down.sent().is_empty());
        assert_eq!((queue.calls(), down.calls()), (1, 1));
    }
}

//! Retrying transient store errors: exponential backoff with full jitter,
//! never past the invocation's deadline.
//!
//! This is the only retry of a DynamoDB write: `main.rs` builds the SDK client
//! with its retries disabled, so every attempt is made (and counted, and cut
//! off at the deadline) here. The handler passes the invocation's
//! [`Deadline`](shared::invocation::Deadline) as a tokio [`Instant`], so the
//! waits follow tokio's clock (paused in tests).

use crate::store::StoreError;
use std::future::Future;
use std::time::Duration;
use tokio::time::Instant;

/// Backoff settings.
#[derive(Debug, Clone, Copy)]
pub struct Backoff {
    /// First delay ceiling.
    pub base: Duration,
    /// Largest delay ceiling.
    pub cap: Duration,
    /// Attempts in all, the first included.
    pub max_attempts: u32,
}

impl Default for Backoff {
    fn default() -> Self {
        Self {
            base: Duration::from_millis(25),
            cap: Duration::from_secs(2),
            max_attempts: 8,
        }
    }
}

/// Why an operation gave up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GaveUp {
    /// A permanent error, or a transient one after the last attempt.
    Failed(StoreError),
    /// The deadline came first (the last error, if any, is kept).
    Deadline(Option<StoreError>),
}

impl Backoff {
    /// The delay before retry number `attempt` (1-based): uniformly random in
    /// `0..=min(cap, base * 2^(attempt-1))` ("full jitter").
    pub fn delay(&self, attempt: u32) -> Duration {
        let ceiling = self
            .base
            .saturating_mul(2u32.saturating_pow(attempt.saturating_sub(1)))
            .min(self.cap);
        let ceiling_ms = u64::try_from(ceiling.as_millis()).unwrap_or(u64::MAX);
        Duration::from_millis(fastrand::u64(0..=ceiling_ms))
    }

    /// Run `op` until it succeeds, fails permanently, runs out of attempts, or
    /// would outlive `deadline` (each attempt is also cut off there).
    pub async fn run<T, F, Fut>(&self, deadline: Instant, mut op: F) -> Result<T, GaveUp>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, StoreError>>,
    {
        let mut last = None;
        for attempt in 1..=self.max_attempts {
            let error = match tokio::time::timeout_at(deadline, op()).await {
                Err(_elapsed) => return Err(GaveUp::Deadline(last)),
                Ok(Ok(value)) => return Ok(value),
                Ok(Err(e)) if !e.retryable => return Err(GaveUp::Failed(e)),
                Ok(Err(e)) => e,
            };
            if attempt == self.max_attempts {
                return Err(GaveUp::Failed(error));
            }
            let wake = Instant::now() + self.delay(attempt);
            last = Some(error);
            if wake >= deadline {
                return Err(GaveUp::Deadline(last));
            }
            tokio::time::sleep_until(wake).await;
        }
        Err(GaveUp::Failed(last.unwrap_or_else(|| {
            StoreError::permanent("no attempt was allowed")
        })))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[test]
    fn delays_grow_and_stay_under_the_cap() {
        let b = Backoff::default();
        for attempt in 1..40 {
            let ceiling = (b.base * 2u32.saturating_pow(attempt - 1)).min(b.cap);
            assert!(b.delay(attempt) <= ceiling);
        }
    }

    #[tokio::test(start_paused = true)]
    async fn transient_errors_are_retried_until_success() {
        let calls = AtomicU32::new(0);
        let deadline = Instant::now() + Duration::from_secs(60);
        let result = Backoff::default()
            .run(deadline, || async {
                if calls.fetch_add(1, Ordering::SeqCst) < 3 {
                    Err(StoreError::transient("throttled"))
                } else {
                    Ok(7)
                }
            })
            .await;
        assert_eq!(result, Ok(7));
        assert_eq!(calls.load(Ordering::SeqCst), 4);
    }

    #[tokio::test(start_paused = true)]
    async fn permanent_errors_are_not_retried() {
        let calls = AtomicU32::new(0);
        let deadline = Instant::now() + Duration::from_secs(60);
        let result: Result<(), _> = Backoff::default()
            .run(deadline, || async {
                calls.fetch_add(1, Ordering::SeqCst);
                Err(StoreError::permanent("bad request"))
            })
            .await;
        assert!(matches!(result, Err(GaveUp::Failed(_))));
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn attempts_are_bounded() {
        let calls = AtomicU32::new(0);
        let deadline = Instant::now() + Duration::from_secs(3600);
        let result: Result<(), _> = Backoff::default()
            .run(deadline, || async {
                calls.fetch_add(1, Ordering::SeqCst);
                Err(StoreError::transient("throttled"))
            })
            .await;
        assert!(matches!(result, Err(GaveUp::Failed(_))));
        assert_eq!(
            calls.load(Ordering::SeqCst),
            Backoff::default().max_attempts
        );
    }

    #[tokio::test(start_paused = true)]
    async fn never_runs_past_the_deadline() {
        let start = Instant::now();
        let deadline = start + Duration::from_millis(300);
        let result: Result<(), _> = Backoff {
            max_attempts: 1_000,
            ..Backoff::default()
        }
        .run(deadline, || async {
            Err(StoreError::transient("throttled"))
        })
        .await;
        assert!(matches!(result, Err(GaveUp::Deadline(Some(_)))));
        assert!(Instant::now() <= deadline);
        // A hanging attempt is cut off at the deadline too.
        let result: Result<(), _> = Backoff::default()
            .run(start + Duration::from_secs(1), std::future::pending)
            .await;
        assert_eq!(result, Err(GaveUp::Deadline(None)));
    }
}

//! Retrying transient errors of a write (an order to the store, a message to
//! the dead-letter queue): exponential backoff with full jitter, never past
//! the invocation's deadline.
//!
//! This is the only retry of those writes: `main.rs` builds the SDK clients
//! with their retries disabled, so every attempt is made (and counted, and cut
//! off) here. An attempt gets at most [`Backoff::attempt_timeout`], and at
//! most half the time left before the deadline (the last attempt: all of it),
//! so that a request that hangs (a connection nobody answers) is abandoned
//! and tried again while there is time. An attempt cut off may still have
//! been applied: the writes retried here are idempotent (the conditional
//! `PutItem`; a FIFO dead-letter send deduplicated by the message id) or at
//! worst repeated (a standard queue's dead letter). The handler passes the
//! invocation's [`Deadline`](shared::invocation::Deadline) as a tokio
//! [`Instant`], so the waits follow tokio's clock (paused in tests).

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
    /// Longest wait for one attempt's answer.
    pub attempt_timeout: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Self {
            base: Duration::from_millis(25),
            cap: Duration::from_secs(2),
            max_attempts: 8,
            // A PutItem or SendMessage answers in milliseconds; one that has
            // not answered in 2 s is stuck on a bad connection.
            attempt_timeout: Duration::from_secs(2),
        }
    }
}

impl Backoff {
    /// The SDK's settings under these retries: one attempt per call (the
    /// retries are these, which know each invocation's deadline; the SDK's
    /// would multiply the attempts), each attempt cut off as one of these.
    pub fn sdk_settings(&self) -> shared::aws::ClientSettings {
        shared::aws::ClientSettings {
            max_attempts: 1,
            initial_backoff: self.base,
            max_backoff: self.cap,
            connect_timeout: self.attempt_timeout,
            read_timeout: self.attempt_timeout,
            attempt_timeout: self.attempt_timeout,
            operation_timeout: self.attempt_timeout,
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
    /// would outlive `deadline`. Each attempt is cut off after
    /// [`attempt_timeout`](Self::attempt_timeout) or half the time left (the
    /// last one at the deadline), which counts as a transient error.
    pub async fn run<T, F, Fut>(&self, deadline: Instant, mut op: F) -> Result<T, GaveUp>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, StoreError>>,
    {
        let mut last = None;
        for attempt in 1..=self.max_attempts {
            let now = Instant::now();
            let left = deadline.saturating_duration_since(now);
            let share = if attempt == self.max_attempts {
                left
            } else {
                left / 2
            };
            let cut_off = now + self.attempt_timeout.min(share);
            let error = match tokio::time::timeout_at(cut_off, op()).await {
                Err(_elapsed) if cut_off >= deadline => return Err(GaveUp::Deadline(last)),
                Err(_elapsed) => StoreError::transient(format!(
                    "no answer within {} ms",
                    (cut_off - now).as_millis()
                )),
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
        // Attempts that never answer are cut off, the last at the deadline.
        let deadline = Instant::now() + Duration::from_secs(1);
        let result: Result<(), _> = Backoff::default().run(deadline, std::future::pending).await;
        assert!(matches!(result, Err(GaveUp::Deadline(_))), "{result:?}");
        assert!(Instant::now() <= deadline);
    }

    /// An attempt that never answers if it is the first (counted in `calls`),
    /// and succeeds with 7 otherwise.
    fn first_never_answers(calls: &AtomicU32) -> impl Future<Output = Result<i32, StoreError>> {
        let first = calls.fetch_add(1, Ordering::SeqCst) == 0;
        async move {
            if first {
                std::future::pending::<()>().await;
            }
            Ok(7)
        }
    }

    #[tokio::test(start_paused = true)]
    async fn an_attempt_that_never_answers_is_cut_off_and_retried() {
        let calls = AtomicU32::new(0);
        let start = Instant::now();
        let deadline = start + Duration::from_secs(30);
        let result = Backoff::default()
            .run(deadline, || first_never_answers(&calls))
            .await;
        assert_eq!(result, Ok(7));
        assert_eq!(calls.load(Ordering::SeqCst), 2);
        let waited = start.elapsed();
        let most = Backoff::default().attempt_timeout + Backoff::default().base;
        assert!(waited <= most, "{waited:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn with_little_time_left_an_attempt_gets_half_of_it() {
        let calls = AtomicU32::new(0);
        let start = Instant::now();
        let deadline = start + Duration::from_millis(1_000);
        let result = Backoff::default()
            .run(deadline, || first_never_answers(&calls))
            .await;
        assert_eq!(result, Ok(7));
        assert!(start.elapsed() < Duration::from_millis(600));
    }
}

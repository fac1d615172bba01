//! Connections opened during init, so that the first invocation pays no TLS
//! handshake (on Lambda a 256 MB function has about 15% of a vCPU, and a
//! handshake with certificate checks is tens of milliseconds of it).
//!
//! A function makes cheap calls to a service at the same time, one for each
//! connection a request uses at once and [`SPARE`] more, each on a
//! connection of its own that the SDK's pool then keeps for the handler.
//! Best effort and bounded: a failure or a slow answer never fails the cold
//! start. `OPEN_CONNECTIONS_AT_INIT=false` turns it off (to measure what it
//! buys, or where init time matters more than the first request's).

use crate::config::{ConfigError, Env};
use std::time::Duration;
use tokio::time::Instant;

/// The setting that turns opening connections during init off.
pub const SETTING: &str = "OPEN_CONNECTIONS_AT_INIT";

/// The longest init waits for the connections: far above what healthy
/// handshakes take, well below a short function timeout (locally the
/// emulator counts init against it; a service that accepts and never
/// answers must not use it all: e2e `fault_injection`). On Lambda the
/// function's timeout is not known at init, so the bound is fixed.
pub const WITHIN: Duration = Duration::from_secs(1);

/// Connections opened beyond those a request uses at once.
///
/// The SDK's HTTP client (hyper-util's pool) takes an HTTP/1 connection back
/// only when a task it spawns for it runs, after the response has been read
/// and the call has returned. A call made right after another (the next page
/// of a query, a batch's next write, the next invocation's first) can find
/// no connection idle yet: the client then starts one and, when the old one
/// comes back first, sends on that but still completes the new one's TLS
/// handshake in the background. A spare connection is idle for such a call.
/// One makes the extra handshake rare, not impossible (several calls may
/// race at once); the lab counts the handshakes requests pay (BENCHMARKS.md,
/// "first invocation").
pub const SPARE: usize = 1;

/// `OPEN_CONNECTIONS_AT_INIT`: `true` (default) or `false`.
pub fn at_init(env: &dyn Env) -> Result<bool, ConfigError> {
    match env.get(SETTING)?.as_deref().map(str::trim) {
        None | Some("true") => Ok(true),
        Some("false") => Ok(false),
        Some(other) => Err(ConfigError::new(SETTING, other, "must be true or false")),
    }
}

/// What opening one service's connections did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Opened {
    /// Calls answered (an error answer from the service still opened its connection).
    pub answered: usize,
    /// Calls that did not reach the service, or not within [`WITHIN`].
    pub failed: usize,
    /// How long it took.
    pub took: Duration,
}

/// Run `count` + [`SPARE`] calls made by `call` at the same time, waiting at
/// most [`WITHIN`]; each call answers whether the service answered it. Logs
/// one line `<service> connections opened`.
pub async fn open<F, Fut>(service: &'static str, count: usize, call: F) -> Opened
where
    F: Fn() -> Fut,
    Fut: Future<Output = bool>,
{
    let started = Instant::now();
    let count = count + SPARE;
    let calls = futures::future::join_all((0..count).map(|_| call()));
    let answered = tokio::time::timeout(WITHIN, calls)
        .await
        .map_or(0, |answers| answers.into_iter().filter(|&a| a).count());
    let opened = Opened {
        answered,
        failed: count - answered,
        took: started.elapsed(),
    };
    tracing::info!(
        service,
        answered = opened.answered,
        failed = opened.failed,
        took_ms = opened.took.as_secs_f64() * 1e3,
        "{service} connections opened"
    );
    opened
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn the_setting_is_true_false_or_unset() {
        assert_eq!(at_init(&[]), Ok(true));
        assert_eq!(at_init(&[(SETTING, "true")]), Ok(true));
        assert_eq!(at_init(&[(SETTING, "false")]), Ok(false));
        let bad = at_init(&[(SETTING, "no")]).expect_err("no");
        assert_eq!(bad.setting, SETTING);
    }

    #[tokio::test]
    async fn calls_run_together_and_are_counted() {
        let running = AtomicUsize::new(0);
        let most = AtomicUsize::new(0);
        let opened = open("Test", 4, || async {
            let now = running.fetch_add(1, Ordering::SeqCst) + 1;
            most.fetch_max(now, Ordering::SeqCst);
            tokio::task::yield_now().await;
            running.fetch_sub(1, Ordering::SeqCst);
            now.is_multiple_of(2)
        })
        .await;
        let calls = 4 + SPARE;
        assert_eq!(most.load(Ordering::SeqCst), calls, "all in flight at once");
        let even = calls / 2;
        assert_eq!((opened.answered, opened.failed), (even, calls - even));
    }

    #[tokio::test(start_paused = true)]
    async fn a_service_that_never_answers_costs_at_most_the_bound() {
        let opened = open("Test", 3, std::future::pending::<bool>).await;
        assert_eq!((opened.answered, opened.failed), (0, 3 + SPARE));
        assert!(opened.took >= WITHIN && opened.took < WITHIN * 2);
    }
}

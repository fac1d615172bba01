//! A runtime layer that wraps every invocation in a span carrying the request id
//! and `cold_start` (Powertools' key): every log line of an invocation names it,
//! and the first invocation of an execution environment logs the init duration.

use lambda_runtime::{LambdaInvocation, tower::Layer, tower::Service};
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;
use tracing::{Instrument, instrument::Instrumented};

/// Invocations started in this process (one execution environment).
static INVOCATIONS: AtomicU64 = AtomicU64::new(0);

/// Whether the invocation in progress is the first of this execution
/// environment (false outside [`crate::run`], e.g. in unit tests).
pub fn is_cold_start() -> bool {
    INVOCATIONS.load(Ordering::Relaxed) == 1
}

/// Count an invocation; true for the first one.
fn begin_invocation() -> bool {
    INVOCATIONS.fetch_add(1, Ordering::Relaxed) == 0
}

/// Time left before an invocation's deadline (`Context::deadline`, Unix epoch
/// ms), at most Lambda's 15-minute limit; `None` when the deadline is unknown
/// (0, outside Lambda).
pub fn time_left(deadline_epoch_ms: u64) -> Option<Duration> {
    if deadline_epoch_ms == 0 {
        return None;
    }
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    Some(Duration::from_millis(deadline_epoch_ms.saturating_sub(now_ms)).min(MAX_INVOCATION))
}

/// Lambda's longest timeout: a deadline further away is not believed.
const MAX_INVOCATION: Duration = Duration::from_secs(15 * 60);

/// Adds an `invocation{request_id, cold_start}` span around every invocation.
#[derive(Debug, Clone)]
pub struct ColdStartLayer {
    init: Duration,
}

impl ColdStartLayer {
    /// `init` is the time from process start to the runtime loop.
    pub fn new(init: Duration) -> Self {
        Self { init }
    }
}

impl<S> Layer<S> for ColdStartLayer {
    type Service = ColdStartService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        ColdStartService {
            inner,
            layer: self.clone(),
        }
    }
}

/// The service made by [`ColdStartLayer`].
#[derive(Debug, Clone)]
pub struct ColdStartService<S> {
    inner: S,
    layer: ColdStartLayer,
}

impl<S> Service<LambdaInvocation> for ColdStartService<S>
where
    S: Service<LambdaInvocation>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Instrumented<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: LambdaInvocation) -> Self::Future {
        let cold_start = begin_invocation();
        let span = tracing::info_span!(
            "invocation",
            request_id = %req.context.request_id,
            xray_trace_id = req.context.xray_trace_id.as_deref(),
            cold_start
        );
        let future = {
            let _entered = span.enter();
            if cold_start {
                tracing::info!(
                    init_ms = self.layer.init.as_secs_f64() * 1000.0,
                    "cold start: first invocation"
                );
            }
            self.inner.call(req)
        };
        future.instrument(span)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_left_until_the_deadline() {
        assert_eq!(time_left(0), None);
        let now_ms = u64::try_from(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .expect("clock")
                .as_millis(),
        )
        .expect("ms");
        let left = time_left(now_ms + 2_000).expect("known");
        assert!(
            left <= Duration::from_secs(2) && left > Duration::from_millis(1_900),
            "{left:?}"
        );
        assert_eq!(time_left(now_ms - 5_000), Some(Duration::ZERO));
        assert_eq!(time_left(u64::MAX), Some(MAX_INVOCATION));
    }

    #[test]
    fn only_the_first_invocation_is_cold() {
        assert!(!is_cold_start(), "no invocation yet");
        assert!(begin_invocation());
        assert!(is_cold_start());
        assert!(!begin_invocation());
        assert!(!is_cold_start());
    }
}

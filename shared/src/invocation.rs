//! Per invocation: a runtime layer that wraps every invocation in a span
//! carrying the request id and `cold_start` (Powertools' key), so every log line
//! of an invocation names it and the first invocation of an execution
//! environment logs the init duration; and [`Deadline`], the one rule for when
//! an invocation's work must be finished.

use lambda_runtime::{LambdaInvocation, tower::Layer, tower::Service};
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::task::futures::TaskLocalFuture;
use tracing::{Instrument, instrument::Instrumented};

/// Invocations started in this process (one execution environment).
static INVOCATIONS: AtomicU64 = AtomicU64::new(0);

tokio::task_local! {
    /// Whether the invocation whose future is being polled is the first of
    /// this environment: per invocation, so it stays true for the first one
    /// and false for the others when several run at once (Lambda Managed
    /// Instances).
    static COLD_START: bool;
}

/// Whether the invocation in progress is the first of this execution
/// environment (false outside [`crate::run`], e.g. in unit tests, and in
/// tasks an invocation spawns).
pub fn is_cold_start() -> bool {
    COLD_START.try_with(|cold| *cold).unwrap_or(false)
}

/// Count an invocation; true for the first one.
fn begin_invocation() -> bool {
    INVOCATIONS.fetch_add(1, Ordering::Relaxed) == 0
}

/// Lambda's longest timeout: a deadline further away is not believed.
const MAX_INVOCATION: Duration = Duration::from_secs(15 * 60);

/// The wall clock in Unix epoch ms; `None` if it reads before 1970.
fn now_epoch_ms() -> Option<u64> {
    let since_epoch = SystemTime::now().duration_since(UNIX_EPOCH).ok()?;
    Some(u64::try_from(since_epoch.as_millis()).unwrap_or(u64::MAX))
}

/// When an invocation's work must be finished, so that the function still has
/// time to send its answer before Lambda stops it.
///
/// The one rule, for every function: take the time left before the
/// invocation's deadline and keep back a margin of
/// 1/[`MARGIN_DIVISOR`](Self::MARGIN_DIVISOR) of it, at most
/// [`MAX_MARGIN`](Self::MAX_MARGIN). With 2 s left, work stops 200 ms before
/// the deadline; with 60 s left, 1 s before.
///
/// A deadline that is unknown (0: outside Lambda, in tests and local runs) or
/// not believable (further away than Lambda's 15-minute limit, or a wall
/// clock before 1970) counts as [`UNKNOWN_BUDGET`](Self::UNKNOWN_BUDGET) left,
/// and the same margin applies. A deadline already past leaves no time: the
/// work is due now.
///
/// ```
/// use shared::invocation::Deadline;
/// use std::time::{Duration, Instant};
///
/// let deadline = Deadline::from_context(&lambda_runtime::Context::default());
/// // No deadline in the context: 30 s assumed, less a 1 s margin.
/// assert!(deadline.remaining() <= Duration::from_secs(29));
///
/// let due = Deadline::at(Instant::now());
/// assert!(due.is_past());
/// assert_eq!(due.remaining(), Duration::ZERO);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Deadline {
    finish_by: Instant,
}

impl Deadline {
    /// The margin kept back is the time left divided by this: a tenth.
    pub const MARGIN_DIVISOR: u32 = 10;
    /// The margin kept back is never more than this.
    pub const MAX_MARGIN: Duration = Duration::from_secs(1);
    /// Time assumed left when the deadline is unknown or not believable.
    pub const UNKNOWN_BUDGET: Duration = Duration::from_secs(30);

    /// The deadline of the invocation `context` describes.
    pub fn from_context(context: &lambda_runtime::Context) -> Self {
        Self::from_epoch_ms(context.deadline)
    }

    /// The deadline for an invocation that Lambda stops at `deadline_epoch_ms`
    /// (Unix epoch ms, as in `lambda_runtime::Context::deadline`; 0 = unknown).
    pub fn from_epoch_ms(deadline_epoch_ms: u64) -> Self {
        Self::from_epoch_ms_at(deadline_epoch_ms, now_epoch_ms(), Instant::now())
    }

    /// Work must be finished at `finish_by` (no margin is taken): for tests
    /// and tools.
    pub fn at(finish_by: Instant) -> Self {
        Self { finish_by }
    }

    /// When the work must be finished.
    pub fn instant(&self) -> Instant {
        self.finish_by
    }

    /// Time left to work; zero once the deadline is past.
    pub fn remaining(&self) -> Duration {
        self.finish_by.saturating_duration_since(Instant::now())
    }

    /// Whether the time to work is over.
    pub fn is_past(&self) -> bool {
        Instant::now() >= self.finish_by
    }

    /// [`Self::from_epoch_ms`] with the clocks read by the caller: the wall
    /// clock `now_epoch_ms` (`None` if before 1970) and the monotonic `now`,
    /// taken at the same moment.
    fn from_epoch_ms_at(deadline_epoch_ms: u64, now_epoch_ms: Option<u64>, now: Instant) -> Self {
        Self::at(now + Self::work_time(deadline_epoch_ms, now_epoch_ms))
    }

    /// The time to work: the time left less the margin.
    fn work_time(deadline_epoch_ms: u64, now_epoch_ms: Option<u64>) -> Duration {
        let left = now_epoch_ms
            .filter(|_| deadline_epoch_ms != 0)
            .map(|now_ms| Duration::from_millis(deadline_epoch_ms.saturating_sub(now_ms)))
            .filter(|left| *left <= MAX_INVOCATION)
            .unwrap_or(Self::UNKNOWN_BUDGET);
        left - (left / Self::MARGIN_DIVISOR).min(Self::MAX_MARGIN)
    }
}

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
    type Future = Instrumented<TaskLocalFuture<bool, S::Future>>;

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
        crate::traces::continue_trace(&span, req.context.xray_trace_id.as_deref());
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
        COLD_START.scope(cold_start, future).instrument(span)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An arbitrary fixed wall-clock reading (2024-06-01T00:00:00Z).
    const NOW_MS: u64 = 1_717_200_000_000;

    fn work_time(deadline_ms: u64) -> Duration {
        Deadline::work_time(deadline_ms, Some(NOW_MS))
    }

    #[test]
    fn the_margin_is_a_tenth_of_the_time_left() {
        assert_eq!(work_time(NOW_MS + 2_000), Duration::from_millis(1_800));
        assert_eq!(work_time(NOW_MS + 5_000), Duration::from_millis(4_500));
        assert_eq!(work_time(NOW_MS + 1), Duration::from_micros(900));
    }

    #[test]
    fn the_margin_is_at_most_a_second() {
        assert_eq!(work_time(NOW_MS + 10_000), Duration::from_secs(9));
        assert_eq!(work_time(NOW_MS + 60_000), Duration::from_secs(59));
        assert_eq!(work_time(NOW_MS + 900_000), Duration::from_secs(899));
    }

    #[test]
    fn an_unknown_deadline_assumes_the_default_budget() {
        let assumed = Duration::from_secs(29);
        assert_eq!(Deadline::UNKNOWN_BUDGET, Duration::from_secs(30));
        assert_eq!(work_time(0), assumed, "no deadline");
        assert_eq!(work_time(NOW_MS + 900_001), assumed, "beyond 15 minutes");
        assert_eq!(work_time(u64::MAX), assumed, "absurd");
        assert_eq!(
            Deadline::work_time(NOW_MS, None),
            assumed,
            "clock before 1970"
        );
    }

    #[test]
    fn a_past_deadline_leaves_no_time() {
        assert_eq!(work_time(NOW_MS), Duration::ZERO);
        assert_eq!(work_time(NOW_MS - 5_000), Duration::ZERO);
        assert_eq!(work_time(1), Duration::ZERO);
    }

    #[test]
    fn the_instant_is_now_plus_the_time_to_work() {
        let now = Instant::now();
        let at = |deadline_ms| Deadline::from_epoch_ms_at(deadline_ms, Some(NOW_MS), now);
        assert_eq!(
            at(NOW_MS + 2_000).instant(),
            now + Duration::from_millis(1_800)
        );
        assert_eq!(at(0).instant(), now + Duration::from_secs(29));
        assert_eq!(at(NOW_MS - 5_000).instant(), now);
    }

    #[test]
    fn remaining_saturates_once_past() {
        let past = Deadline::at(Instant::now());
        assert!(past.is_past());
        assert_eq!(past.remaining(), Duration::ZERO);
        // Far enough ahead that no scheduler delay reaches it.
        let ahead = Deadline::at(Instant::now() + Duration::from_secs(3_600));
        assert!(!ahead.is_past());
        assert!(ahead.remaining() > Duration::ZERO);
    }

    #[test]
    fn the_context_deadline_is_read() {
        let mut context = lambda_runtime::Context::default();
        assert!(!Deadline::from_context(&context).is_past(), "unknown: 29 s");
        context.deadline = 1;
        assert!(Deadline::from_context(&context).is_past(), "1970");
    }

    #[tokio::test]
    async fn only_the_first_invocation_is_cold_even_when_they_overlap() {
        assert!(!is_cold_start(), "outside an invocation");
        assert!(begin_invocation());
        assert!(!begin_invocation());
        // Two invocations in flight at once, each polled in its own scope:
        // each reads its own marker whatever the other does.
        let (first_go, first_wait) = tokio::sync::oneshot::channel::<()>();
        let first = COLD_START.scope(true, async move {
            let before = is_cold_start();
            let _ = first_wait.await;
            (before, is_cold_start())
        });
        let second = COLD_START.scope(false, async move {
            let seen = is_cold_start();
            let _ = first_go.send(());
            seen
        });
        let ((before, after), second) = tokio::join!(first, second);
        assert!(before && after, "the first stays cold");
        assert!(!second, "the second is warm");
    }
}

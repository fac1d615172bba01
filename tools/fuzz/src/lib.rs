//! What every fuzz target shares: the call of a target's checks (defined once,
//! in each function's `testkit` (`fuzz`), and also run by the suite's
//! proptest harness), bounded in time. libFuzzer bounds the rest: `run.sh`
//! gives it `-timeout` (a call that never returns) and `-rss_limit_mb` (peak
//! RSS); a panic anywhere, even one caught inside the code under test, aborts
//! the process and is reported as a crash with its input.

use std::time::{Duration, Instant};

/// A call that takes longer is a hang: the slowest legitimate input takes a
/// few milliseconds in this optimised build.
pub const HANG_BOUND: Duration = Duration::from_secs(2);

/// Run `check` on `data`; panic on a violated property or a hang.
pub fn bounded(data: &[u8], check: fn(&[u8]) -> Result<(), String>) {
    let started = Instant::now();
    if let Err(violation) = check(data) {
        panic!("{violation}");
    }
    let took = started.elapsed();
    assert!(
        took <= HANG_BOUND,
        "{took:?} for one input of {} bytes (bound {HANG_BOUND:?})",
        data.len()
    );
}

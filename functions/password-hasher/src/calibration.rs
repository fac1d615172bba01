//! The estimator a request is timed with, calibrated only when it matters: a
//! request is first timed with a cautious prior ([`PRIOR_SINGLE`], no gain
//! from lanes, slower than any machine Lambda runs on); only a request the
//! prior would refuse has a few hashes timed on the pool (about 10 ms of CPU,
//! once per environment) and is judged again with them. Nothing is refused
//! that fits, and neither init nor the requests the prior accepts (nearly
//! all) pay for calibration: a calibration started at cold start would
//! compete with the first request for the function's CPU share.

use crate::eksblowfish::LANES;
use crate::hashing::Estimator;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::OnceCell;

/// One cost-4 hash on a whole vCPU, as the prior assumes it: about six times
/// what an x86-64 core of 2024 takes alone (0.7 ms), more than the `bcrypt`
/// crate's one lane takes in a debug build.
pub const PRIOR_SINGLE: Duration = Duration::from_millis(4);

/// The cautious prior: [`PRIOR_SINGLE`] per hash, lanes gaining nothing.
pub fn prior() -> Estimator {
    Estimator::from_samples(PRIOR_SINGLE, PRIOR_SINGLE.saturating_mul(LANES as u32), 4)
}

/// The estimator in use, shared by every invocation.
#[derive(Debug, Clone, Default)]
pub struct Estimates {
    calibrated: Arc<OnceCell<Estimator>>,
}

impl Estimates {
    /// The prior until [`Estimates::settled`] is first needed.
    pub fn on_demand() -> Self {
        Self::default()
    }

    /// The calibrated estimator, or the prior until calibration has run.
    pub fn current(&self) -> Estimator {
        self.calibrated.get().copied().unwrap_or_else(prior)
    }

    /// The calibrated estimator, calibrating now if no invocation has yet
    /// (concurrent callers wait for the same calibration). A failed
    /// calibration is logged and the prior kept.
    pub async fn settled(&self) -> Estimator {
        *self
            .calibrated
            .get_or_init(|| async {
                match Estimator::calibrate().await {
                    Ok(estimator) => {
                        tracing::debug!("estimator calibrated");
                        estimator
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "calibration failed: the prior stays");
                        prior()
                    }
                }
            })
            .await
    }

    /// Whether calibration has run.
    pub fn calibrated(&self) -> bool {
        self.calibrated.initialized()
    }
}

impl From<Estimator> for Estimates {
    /// Estimates that are `estimator`, from the start (tests, tools).
    fn from(estimator: Estimator) -> Self {
        Self {
            calibrated: Arc::new(OnceCell::new_with(Some(estimator))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shared::vcpus::{Cgroup, Inputs, detect};

    #[tokio::test]
    async fn calibration_replaces_the_prior_which_is_slower_than_this_machine() {
        let vcpus = detect(&Inputs {
            worker_count: None,
            memory_mb: Some("1769".into()),
            cgroup: Cgroup::Absent,
            available: 1,
        })
        .expect("vcpus");
        let estimates = Estimates::on_demand();
        assert!(!estimates.calibrated(), "nothing runs before it is needed");
        let calibrated = estimates.settled().await;
        assert!(estimates.calibrated(), "calibration finished");
        // A batch in full groups: the prior assumes neither this machine's
        // speed nor any gain from lanes, so it refuses earlier, never later.
        let batch = |e: Estimator| e.estimate(LANES * 4, 10, &vcpus);
        assert!(
            batch(prior()) > batch(calibrated),
            "prior {:?}, calibrated {:?}",
            batch(prior()),
            batch(calibrated)
        );
        assert_eq!(
            batch(estimates.current()),
            batch(calibrated),
            "the calibrated estimator is the one in use"
        );
    }
}

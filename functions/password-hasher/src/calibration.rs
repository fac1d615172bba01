//! The estimator a request is timed with, calibrated off the cold start's
//! critical path: a task started at cold start times a few hashes on the
//! pool while the runtime already serves; until it has finished, requests are
//! timed with a cautious prior ([`PRIOR_SINGLE`], [`PRIOR_GROUP`]).

use crate::hashing::Estimator;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// One cost-4 hash alone on a whole vCPU, as the prior assumes it: about
/// three times what an x86-64 core of 2024 takes (0.7 ms), so a request is
/// refused early rather than cut off by its deadline.
pub const PRIOR_SINGLE: Duration = Duration::from_millis(2);
/// A full group of lanes at cost 4, as the prior assumes it (measured: 1.0 ms).
pub const PRIOR_GROUP: Duration = Duration::from_millis(3);

/// The estimator in use, shared by every invocation.
#[derive(Debug, Clone)]
pub struct Estimates {
    calibrated: Arc<OnceLock<Estimator>>,
}

impl Estimates {
    /// Start calibrating on the pool in the background (a tokio task): the
    /// cold start does not wait for it. A failed calibration is logged and
    /// the prior kept.
    pub fn calibrate_in_background() -> Self {
        let estimates = Self {
            calibrated: Arc::default(),
        };
        let cell = Arc::clone(&estimates.calibrated);
        tokio::spawn(async move {
            match Estimator::calibrate().await {
                Ok(estimator) => {
                    let _ = cell.set(estimator);
                    tracing::debug!("estimator calibrated");
                }
                Err(e) => tracing::warn!(error = %e, "calibration failed: the prior stays"),
            }
        });
        estimates
    }

    /// The calibrated estimator, or the prior until calibration has finished.
    pub fn current(&self) -> Estimator {
        self.calibrated
            .get()
            .copied()
            .unwrap_or_else(|| Estimator::from_samples(PRIOR_SINGLE, PRIOR_GROUP, 4))
    }

    /// Whether calibration has finished.
    pub fn calibrated(&self) -> bool {
        self.calibrated.get().is_some()
    }
}

impl From<Estimator> for Estimates {
    /// Estimates that are `estimator`, from the start (tests, tools).
    fn from(estimator: Estimator) -> Self {
        let calibrated = OnceLock::new();
        let _ = calibrated.set(estimator);
        Self {
            calibrated: Arc::new(calibrated),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eksblowfish::LANES;
    use shared::vcpus::{Cgroup, Inputs, detect};

    #[tokio::test]
    async fn the_prior_is_cautious_and_calibration_replaces_it() {
        let vcpus = detect(&Inputs {
            worker_count: None,
            memory_mb: Some("1769".into()),
            cgroup: Cgroup::Absent,
            available: 1,
        })
        .expect("vcpus");
        let estimates = Estimates::calibrate_in_background();
        let prior = Estimates::from(Estimator::from_samples(PRIOR_SINGLE, PRIOR_GROUP, 4));
        for _ in 0..200 {
            if estimates.calibrated() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(estimates.calibrated(), "calibration finished");
        // This machine is faster than the prior assumes: the prior refuses
        // earlier, never later.
        let batch = |e: &Estimates| e.current().estimate(LANES * 4, 10, &vcpus);
        assert!(
            batch(&prior) > batch(&estimates),
            "prior {:?}, calibrated {:?}",
            batch(&prior),
            batch(&estimates)
        );
    }
}

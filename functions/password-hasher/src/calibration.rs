//! The estimator a request is timed with, calibrated off the cold start's
//! critical path: a task started at cold start times a few hashes on the
//! pool while the runtime already serves. Until it has finished, a request is
//! timed with a cautious prior ([`PRIOR_SINGLE`], no gain from lanes); only a
//! request the prior would refuse waits for the calibration (about 10 ms of
//! CPU) and is judged again, so nothing is refused that fits and small
//! requests never wait.

use crate::eksblowfish::LANES;
use crate::hashing::Estimator;
use std::time::Duration;
use tokio::sync::watch;

/// One cost-4 hash on a whole vCPU, as the prior assumes it: about six times
/// what an x86-64 core of 2024 takes alone (0.7 ms), more than the `bcrypt`
/// crate's one lane takes in a debug build.
pub const PRIOR_SINGLE: Duration = Duration::from_millis(4);

/// The cautious prior: [`PRIOR_SINGLE`] per hash, lanes gaining nothing.
pub fn prior() -> Estimator {
    Estimator::from_samples(PRIOR_SINGLE, PRIOR_SINGLE.saturating_mul(LANES as u32), 4)
}

/// The estimator in use, shared by every invocation.
#[derive(Debug, Clone)]
pub struct Estimates {
    calibrated: watch::Receiver<Option<Estimator>>,
}

impl Estimates {
    /// Start calibrating on the pool in the background (a tokio task): the
    /// cold start does not wait for it. A failed calibration is logged and
    /// the prior kept.
    pub fn calibrate_in_background() -> Self {
        let (done, calibrated) = watch::channel(None);
        tokio::spawn(async move {
            match Estimator::calibrate().await {
                Ok(estimator) => {
                    let _ = done.send(Some(estimator));
                    tracing::debug!("estimator calibrated");
                }
                Err(e) => tracing::warn!(error = %e, "calibration failed: the prior stays"),
            }
        });
        Self { calibrated }
    }

    /// The calibrated estimator, or the prior until calibration has finished.
    pub fn current(&self) -> Estimator {
        (*self.calibrated.borrow()).unwrap_or_else(prior)
    }

    /// The calibrated estimator once calibration has finished (the prior if
    /// it failed).
    pub async fn settled(&self) -> Estimator {
        let mut calibrated = self.calibrated.clone();
        match calibrated.wait_for(Option::is_some).await {
            Ok(estimator) => (*estimator).unwrap_or_else(prior),
            Err(_) => prior(),
        }
    }

    /// Whether calibration has finished.
    pub fn calibrated(&self) -> bool {
        self.calibrated.borrow().is_some()
    }
}

impl From<Estimator> for Estimates {
    /// Estimates that are `estimator`, from the start (tests, tools).
    fn from(estimator: Estimator) -> Self {
        let (_, calibrated) = watch::channel(Some(estimator));
        Self { calibrated }
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
        let estimates = Estimates::calibrate_in_background();
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

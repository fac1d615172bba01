//! How long a batch takes, and the estimator a request is timed with.
//!
//! [`Estimator`] models a batch: the time of one hash alone and of a full
//! group of [`LANES`] in lockstep on a whole vCPU, scaled by cost, over the
//! groups [`map_batch`](crate::hashing::map_batch) makes, divided by the function's real [`parallelism`].
//! The handler refuses a batch whose estimate does not fit before the
//! invocation's deadline (`handler.rs`).
//!
//! [`Estimates`] decides which estimator is in use, calibrated only when it
//! matters: a request is first timed with a cautious prior ([`PRIOR_SINGLE`], no gain
//! from lanes, slower than any machine Lambda runs on); only a request the
//! prior would refuse has a few hashes timed on the pool (about 10 ms of CPU,
//! once per environment) and is judged again with them. Nothing is refused
//! that fits, and neither init nor the requests the prior accepts (nearly
//! all) pay for calibration: a calibration started at cold start would
//! compete with the first request for the function's CPU share.

use crate::eksblowfish::{Input, LANES};
use crate::hashing::{HashingError, eks_blowfish, group_size, on_pool};
use shared::vcpus::Vcpus;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::OnceCell;

/// The cost the calibration hashes at: cheap (about a millisecond per hash
/// on one vCPU), still long next to the clock's resolution.
const CALIBRATION_COST: u32 = 4;
/// Calibration hashes timed; the fastest counts.
const CALIBRATION_RUNS: usize = 3;

/// Predicts how long a batch takes: the time of one hash alone and of a full
/// group of [`LANES`] hashes in lockstep on a whole vCPU, measured by
/// [`Estimator::calibrate`], scaled by cost, for the groups [`map_batch`](crate::hashing::map_batch) makes, divided by the
/// parallelism the function really has ([`parallelism`]).
#[derive(Debug, Clone, Copy)]
pub struct Estimator {
    /// Seconds per unit of work for one hash alone on a whole vCPU (one hash
    /// at cost c is 2^c units).
    single_per_unit: f64,
    /// The same for a group of [`LANES`] hashes in lockstep.
    group_per_unit: f64,
}

impl Estimator {
    /// Time [`CALIBRATION_RUNS`] single hashes and as many full groups at cost
    /// [`CALIBRATION_COST`] on a thread of the pool, where batches run (see
    /// [`Estimator::calibrate_with`]).
    pub async fn calibrate() -> Result<Self, HashingError> {
        on_pool(|| Self::calibrate_with(time_hashes)).await?
    }

    /// Calibrate from [`CALIBRATION_RUNS`] calls of `time(1)` and of
    /// `time(LANES)`, each the time of that many hashes in lockstep at
    /// [`CALIBRATION_COST`], keeping the fastest of each: a slower run also
    /// measured something else (cold caches, a page fault, or waiting for CPU
    /// time when the function's share is a fraction of a vCPU, which
    /// [`Estimator::estimate`] accounts for separately).
    pub fn calibrate_with(
        mut time: impl FnMut(usize) -> Result<Duration, HashingError>,
    ) -> Result<Self, HashingError> {
        let mut fastest = |lanes: usize| -> Result<Duration, HashingError> {
            let mut fastest = Duration::MAX;
            for _ in 0..CALIBRATION_RUNS {
                fastest = fastest.min(time(lanes)?);
            }
            Ok(fastest)
        };
        let single = fastest(1)?;
        let group = fastest(LANES)?;
        Ok(Self::from_samples(single, group, CALIBRATION_COST))
    }

    /// An estimator from one hash alone and a group of [`LANES`] hashes at
    /// `cost` that took `single` and `group` on a whole vCPU.
    pub fn from_samples(single: Duration, group: Duration, cost: u32) -> Self {
        let units = 2f64.powi(cost as i32);
        Self {
            single_per_unit: single.as_secs_f64() / units,
            group_per_unit: group.as_secs_f64() / units,
        }
    }

    /// An estimator from one hash at `cost` that took `took` on a whole
    /// vCPU, as if lanes gained nothing (a group takes [`LANES`] times as long).
    pub fn from_sample(took: Duration, cost: u32) -> Self {
        Self::from_samples(took, took.saturating_mul(LANES as u32), cost)
    }

    /// Seconds for a group of `lanes` hashes at `cost` on a whole vCPU: between
    /// one hash alone and a full group, in proportion to the lanes.
    fn group_seconds(&self, lanes: usize, cost: u32) -> f64 {
        let extra = if LANES > 1 {
            (self.group_per_unit - self.single_per_unit) * (lanes.max(1) - 1) as f64
                / (LANES - 1) as f64
        } else {
            0.0
        };
        (self.single_per_unit + extra) * 2f64.powi(cost as i32)
    }

    /// Time for `hashes` hashes at `cost` on `vcpus`, in the groups
    /// [`map_batch`](crate::hashing::map_batch) makes for its worker threads: the CPU time they need over
    /// the [`parallelism`], and never less than the rounds of groups the
    /// threads take (3 groups on 2 workers: 2 rounds).
    pub fn estimate(&self, hashes: usize, cost: u32, vcpus: &Vcpus) -> Duration {
        if hashes == 0 {
            return Duration::ZERO;
        }
        let workers = vcpus.workers.max(1);
        let size = group_size(hashes, workers);
        let groups = hashes.div_ceil(size);
        let per_group = self.group_seconds(size, cost);
        let rounds = groups.div_ceil(workers) as f64;
        let on_share = groups as f64 / parallelism(vcpus);
        Duration::try_from_secs_f64(rounds.max(on_share) * per_group).unwrap_or(Duration::MAX)
    }
}

/// How many hashes make progress at full speed at once: the worker threads,
/// or the CPU share when it is smaller (1,800 MB: 2 workers share 1.02 vCPUs).
pub fn parallelism(vcpus: &Vcpus) -> f64 {
    let workers = vcpus.workers.max(1) as f64;
    if vcpus.share > 0.0 {
        workers.min(vcpus.share)
    } else {
        workers
    }
}

/// The time of `lanes` hashes in lockstep at [`CALIBRATION_COST`] on this thread.
fn time_hashes(lanes: usize) -> Result<Duration, HashingError> {
    let inputs: Vec<Input<'_>> = (0..lanes)
        .map(|_| Input {
            password: b"calibration",
            salt: [0; 16],
        })
        .collect();
    let start = Instant::now();
    std::hint::black_box(eks_blowfish(&inputs, CALIBRATION_COST)?);
    Ok(start.elapsed())
}

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
    use crate::eksblowfish::CostOutOfRange;
    use shared::vcpus::{Cgroup, Inputs, detect};

    /// The vCPUs detected for `memory_mb` on a 64-core host (`workers`
    /// overrides the thread count when given).
    fn vcpus(memory_mb: &str, workers: Option<&str>) -> Vcpus {
        detect(&Inputs {
            worker_count: workers.map(str::to_owned),
            memory_mb: Some(memory_mb.to_owned()),
            cgroup: Cgroup::Absent,
            available: 64,
        })
        .expect("vcpus")
    }

    #[test]
    fn estimates_scale_with_cost_and_workers() {
        let e = Estimator::from_sample(Duration::from_millis(4), 6);
        // 3,538 MB: two whole vCPUs, two workers.
        let two = vcpus("3538", None);
        let one = e.estimate(1, 10, &vcpus("1769", None));
        assert!((one.as_secs_f64() - 0.064).abs() < 1e-9, "{one:?}");
        assert_eq!(e.estimate(24, 10, &two), one * 12);
        // The last hash runs alone: 3 hashes on 2 workers take 2 rounds.
        assert_eq!(e.estimate(3, 10, &two), one * 2);
        // More threads than vCPUs do not make hashing faster.
        assert_eq!(e.estimate(24, 10, &vcpus("3538", Some("8"))), one * 12);
        // Fewer threads than vCPUs: the threads decide.
        assert_eq!(e.estimate(24, 10, &vcpus("3538", Some("1"))), one * 24);
    }

    #[test]
    fn a_fractional_share_is_estimated_at_its_size() {
        // 1,800 MB: 1.0175 vCPUs, rounded up to 2 workers. Two workers at
        // full speed would take 8 s for 1,000 cost-10 hashes; the share
        // gives about half that speed.
        let v = vcpus("1800", None);
        assert_eq!(v.workers, 2);
        let e = Estimator::from_sample(Duration::from_millis(1), 6);
        let as_if_two_vcpus = Duration::from_secs(8);
        let estimate = e.estimate(1_000, 10, &v);
        let ratio = estimate.as_secs_f64() / as_if_two_vcpus.as_secs_f64();
        assert!((1.9..=2.0).contains(&ratio), "{estimate:?}: {ratio}");
        // 128 MB: 0.072 vCPUs, one worker: one hash takes about 14 times its
        // time on a whole vCPU.
        let small = e.estimate(1, 10, &vcpus("128", None));
        let whole = e.estimate(1, 10, &vcpus("1769", None));
        let ratio = small.as_secs_f64() / whole.as_secs_f64();
        assert!((ratio - 1769.0 / 128.0).abs() < 1e-6, "{ratio}");
    }

    #[test]
    fn calibration_keeps_the_fastest_of_three_runs_alone_and_in_a_group() {
        let mut singles = [5, 2, 9].into_iter().map(Duration::from_millis);
        let mut groups = [20, 12, 30].into_iter().map(Duration::from_millis);
        let mut calls = Vec::new();
        let e = Estimator::calibrate_with(|lanes| {
            calls.push(lanes);
            let next = if lanes == 1 {
                singles.next()
            } else {
                groups.next()
            };
            Ok(next.unwrap_or(Duration::ZERO))
        })
        .expect("calibrated");
        assert_eq!(calls, [1, 1, 1, LANES, LANES, LANES]);
        // 2 ms per cost-4 hash alone: 2 ms x 2^6 at cost 10, on one whole vCPU.
        let whole = vcpus("1769", None);
        assert_eq!(e.estimate(1, 10, &whole), Duration::from_millis(2 * 64));
        // A full group: 12 ms x 2^6.
        assert_eq!(
            e.estimate(LANES, 10, &whole),
            Duration::from_millis(12 * 64)
        );
        // A failed run fails the calibration.
        let failed = Estimator::calibrate_with(|_| Err(CostOutOfRange(3).into()));
        assert!(failed.is_err());
    }

    #[test]
    fn batches_are_estimated_in_the_lockstep_groups_they_run_in() {
        // A group of LANES hashes in twice the time of one alone.
        let lanes = Estimator::from_samples(Duration::from_millis(4), Duration::from_millis(8), 6);
        let alone = Estimator::from_sample(Duration::from_millis(4), 6);
        let two = vcpus("3538", None);
        // 24 hashes on 2 workers: groups of LANES, 24 / LANES groups over 2 threads.
        let groups = 24_usize.div_ceil(LANES);
        let rounds = groups.div_ceil(2) as u32;
        assert_eq!(
            lanes.estimate(24, 10, &two),
            Duration::from_millis(8 * 16) * rounds
        );
        assert_eq!(
            alone.estimate(24, 10, &two),
            Duration::from_millis(4 * 16) * 12
        );
        // Fewer hashes than lanes: one group of that many, between alone and full.
        let three = lanes.estimate(3, 10, &vcpus("1769", None));
        assert!(three > Duration::from_millis(4 * 16) && three < Duration::from_millis(8 * 16));
        assert_eq!(lanes.estimate(0, 10, &two), Duration::ZERO);
    }

    #[test]
    fn an_unusable_share_falls_back_to_the_workers() {
        let mut v = vcpus("3538", None);
        for share in [0.0, f64::NAN, -1.0] {
            v.share = share;
            assert_eq!(parallelism(&v), 2.0);
        }
        let e = Estimator::from_sample(Duration::MAX, 4);
        assert_eq!(e.estimate(10_000, 31, &v), Duration::MAX);
    }

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

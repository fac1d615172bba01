//! bcrypt on the Rayon pool, and the estimate of how long a batch takes.
//!
//! Where the CPU work runs: every bcrypt computation (hash, verify, the
//! cold-start calibration) runs on the Rayon global pool that `shared` sized
//! to the function's vCPUs. The handler hands a whole batch over with
//! [`on_pool`] and awaits the answer through a oneshot channel, so no tokio
//! thread ever runs bcrypt. Inside the pool, [`map_batch`] splits a batch
//! into groups of up to [`LANES`] hashes, enough groups for every thread;
//! each group is hashed in lockstep on one thread ([`crate::eksblowfish`]).
//!
//! Which EksBlowfish computes the hashes: this crate's ([`crate::eksblowfish`],
//! the default), or the `bcrypt` crate's with the `bcrypt-crate` feature. The
//! rest (salts, hash strings, the constant-time comparison) is the same.

use crate::eksblowfish::{CostOutOfRange, Input, LANES};
use crate::hash_text::{self, HASH_BYTES};
use crate::request::{Pair, PasswordProblem};
use crate::secret::Secret;
use rayon::prelude::*;
use shared::vcpus::Vcpus;
use std::time::{Duration, Instant};
use subtle::ConstantTimeEq;

/// Why hashing failed: a bug, a broken pool or no randomness, never the
/// caller's input (the request was validated before it reached the pool).
#[derive(Debug, thiserror::Error)]
pub enum HashingError {
    /// The job panicked on the pool, or was dropped unrun.
    #[error(transparent)]
    Pool(#[from] shared::pool::JobError),
    /// A cost bcrypt does not define reached the hashing.
    #[error(transparent)]
    Cost(#[from] CostOutOfRange),
    /// The system's random source gave no salt.
    #[error("no random salt: {0}")]
    Random(#[from] getrandom::Error),
}

/// Run `work` on the Rayon global pool and await its result through a oneshot
/// channel (see [`shared::pool::run`]); a panic comes back as an error.
pub async fn on_pool<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, HashingError> {
    Ok(shared::pool::run("hashing", work).await?)
}

/// The size of the groups [`map_batch`] splits `items` into on `threads`
/// threads: at most [`LANES`], and a number of groups that is a multiple of
/// the threads (when there are enough items), so they end together.
fn group_size(items: usize, threads: usize) -> usize {
    let threads = threads.max(1);
    let groups = items.div_ceil(LANES).div_ceil(threads) * threads;
    items.div_ceil(groups.clamp(1, items.max(1)))
}

/// Apply `f` to groups of `items` (see [`group_size`]) in parallel on the
/// current Rayon pool, and concatenate what it returns, in order. A single
/// group pays no parallel overhead.
pub fn map_batch<T: Sync, R: Send>(
    items: &[T],
    f: impl Fn(&[T]) -> Vec<R> + Sync + Send,
) -> Vec<R> {
    let size = group_size(items.len(), rayon::current_num_threads());
    if items.len() <= size {
        f(items)
    } else {
        // One group per task: each is milliseconds of work.
        let groups: Vec<Vec<R>> = items.par_chunks(size).with_max_len(1).map(f).collect();
        groups.into_iter().flatten().collect()
    }
}

/// The 24 bytes bcrypt computes for each input at `cost`, in lockstep.
#[cfg(not(feature = "bcrypt-crate"))]
fn eks_blowfish(inputs: &[Input<'_>], cost: u32) -> Result<Vec<[u8; 24]>, CostOutOfRange> {
    crate::eksblowfish::hash_many(inputs, cost)
}

/// The 24 bytes bcrypt computes for each input at `cost`, one after another
/// by the `bcrypt` crate.
#[cfg(feature = "bcrypt-crate")]
fn eks_blowfish(inputs: &[Input<'_>], cost: u32) -> Result<Vec<[u8; 24]>, CostOutOfRange> {
    use crate::eksblowfish::{COSTS, MAX_PASSWORD_BYTES};
    if !COSTS.contains(&cost) {
        return Err(CostOutOfRange(cost));
    }
    let hash = |input: &Input<'_>| {
        let mut key = zeroize::Zeroizing::new([0u8; MAX_PASSWORD_BYTES]);
        let used = input.password.len().min(MAX_PASSWORD_BYTES);
        key[..used].copy_from_slice(&input.password[..used]);
        bcrypt::bcrypt(cost, input.salt, &key[..(used + 1).min(MAX_PASSWORD_BYTES)])
    };
    Ok(inputs.iter().map(hash).collect())
}

/// Hash every password at `cost` (`$2b$` hashes, random salts), on the
/// current Rayon pool.
pub fn hash_all(passwords: &[Secret], cost: u32) -> Result<Vec<String>, HashingError> {
    let mut salts = vec![[0u8; 16]; passwords.len()];
    getrandom::fill(salts.as_flattened_mut())?;
    let items: Vec<(&Secret, [u8; 16])> = passwords.iter().zip(salts).collect();
    map_batch(&items, |group| {
        let inputs: Vec<Input<'_>> = group
            .iter()
            .map(|(password, salt)| Input {
                password: password.expose(),
                salt: *salt,
            })
            .collect();
        match eks_blowfish(&inputs, cost) {
            Ok(hashes) => hashes
                .iter()
                .zip(group)
                .map(|(hash, (_, salt))| Ok(hash_text::format(cost, salt, hash)))
                .collect(),
            Err(e) => vec![Err(HashingError::from(e))],
        }
    })
    .into_iter()
    .collect()
}

/// Why one pair of a verify batch has no verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VerifyError {
    /// Not a bcrypt hash (`$2a$`, `$2b$`, `$2x$` or `$2y$`, two cost digits
    /// of at least 4, 53 characters of salt and hash).
    Malformed,
    /// A `$2x$` hash: crypt_blowfish's mode that reproduces its old
    /// sign-extension bug for bytes above 127. It would be checked with the
    /// corrected algorithm and answer `false` for a right non-ASCII
    /// password, so it is refused instead.
    TwoX,
    /// Its cost is above what this function accepts.
    CostTooHigh(u32),
    /// The password breaks the password rule.
    Password(PasswordProblem),
}

impl std::fmt::Display for VerifyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            VerifyError::Malformed => f.write_str("malformed bcrypt hash"),
            VerifyError::TwoX => f.write_str(
                "$2x$ hashes (crypt_blowfish's buggy-compatibility mode) are not supported; rehash with $2b$",
            ),
            VerifyError::CostTooHigh(cost) => {
                write!(f, "hash cost {cost} is above the allowed maximum")
            }
            VerifyError::Password(problem) => write!(f, "password {problem}"),
        }
    }
}

/// What checking one pair takes: the password and its hash taken apart.
struct Check<'a> {
    password: &'a Secret,
    hash: hash_text::Parsed,
}

/// The password and the parsed hash bcrypt will check `pair` with, or why
/// the pair gets no verdict (decided without hashing).
fn to_check(pair: &Pair, max_cost: u32) -> Result<Check<'_>, VerifyError> {
    let password = pair
        .password
        .as_ref()
        .map_err(|problem| VerifyError::Password(*problem))?;
    // Version and cost are judged before the encoding: the more specific
    // error wins.
    match hash_text::shape(&pair.hash) {
        None => return Err(VerifyError::Malformed),
        Some((b'x', _, _)) => return Err(VerifyError::TwoX),
        Some((_, cost, _)) if cost > max_cost => return Err(VerifyError::CostTooHigh(cost)),
        Some((_, cost, _)) if cost < *crate::eksblowfish::COSTS.start() => {
            return Err(VerifyError::Malformed);
        }
        Some(_) => {}
    }
    let hash = hash_text::parse(&pair.hash).ok_or(VerifyError::Malformed)?;
    Ok(Check { password, hash })
}

/// The cost bcrypt will run at to check `pair`, or why the pair gets no
/// verdict (decided without hashing).
pub fn verify_cost(pair: &Pair, max_cost: u32) -> Result<u32, VerifyError> {
    to_check(pair, max_cost).map(|check| check.hash.cost)
}

/// Check each password against its hash (a constant-time comparison), on
/// the current Rayon pool. Pairs of one cost are hashed in lockstep groups.
pub fn verify_all(items: &[Pair], max_cost: u32) -> Vec<Result<bool, VerifyError>> {
    let mut verdicts: Vec<Result<bool, VerifyError>> = Vec::with_capacity(items.len());
    let mut checks: Vec<(usize, Check<'_>)> = Vec::new();
    for (at, pair) in items.iter().enumerate() {
        match to_check(pair, max_cost) {
            Ok(check) => {
                checks.push((at, check));
                // Replaced by the verdict once hashed.
                verdicts.push(Err(VerifyError::Malformed));
            }
            Err(e) => verdicts.push(Err(e)),
        }
    }
    // Runs of one cost, each split into groups for the pool.
    checks.sort_by_key(|(_, check)| check.hash.cost);
    for run in checks.chunk_by(|(_, a), (_, b)| a.hash.cost == b.hash.cost) {
        let matches = map_batch(run, |group| {
            let inputs: Vec<Input<'_>> = group
                .iter()
                .map(|(_, check)| Input {
                    password: check.password.expose(),
                    salt: check.hash.salt,
                })
                .collect();
            let cost = group.first().map_or(0, |(_, check)| check.hash.cost);
            // Every cost here is in range: to_check refused the others.
            let hashes = eks_blowfish(&inputs, cost).unwrap_or_default();
            group
                .iter()
                .zip(hashes)
                .map(|((at, check), hash)| {
                    let computed: &[u8; HASH_BYTES] =
                        hash.first_chunk().unwrap_or(&[0; HASH_BYTES]);
                    (*at, bool::from(computed.ct_eq(&check.hash.hash)))
                })
                .collect()
        });
        for (at, matched) in matches {
            verdicts[at] = Ok(matched);
        }
    }
    verdicts
}

/// The cost the calibration hashes at: cheap (about a millisecond per hash
/// on one vCPU), still long next to the clock's resolution.
const CALIBRATION_COST: u32 = 4;
/// Calibration hashes timed; the fastest counts.
const CALIBRATION_RUNS: usize = 3;

/// Predicts how long a batch takes: the time of one hash alone and of a full
/// group of [`LANES`] hashes in lockstep on a whole vCPU, measured at cold
/// start, scaled by cost, for the groups [`map_batch`] makes, divided by the
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
    /// [`map_batch`] makes for its worker threads: the CPU time they need over
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

#[cfg(test)]
mod tests {
    use super::*;
    use shared::vcpus::{Cgroup, Inputs, detect};

    const VECTOR: &str = "$2a$05$CCCCCCCCCCCCCCCCCCCCC.E5YPO9kmyuRGyh0XouQYb4YMJKvyOeW";

    fn pair(password: &str, hash: &str) -> Pair {
        Pair::new(Secret::new(password.into()), hash.into())
    }

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
    fn hash_then_verify() {
        let passwords = vec![Secret::new("a".into()), Secret::new("b".into())];
        let hashes = hash_all(&passwords, 4).expect("hashes");
        assert!(
            hashes
                .iter()
                .all(|h| h.starts_with("$2b$04$") && h.len() == 60)
        );
        let items = vec![
            pair("a", &hashes[0]),
            pair("a", &hashes[1]),
            pair("b", "$2b$04$short"),
            pair("U*U", &VECTOR.replace("$05$", "$20$")),
            pair("U*U", &VECTOR.replace("$05$", "$03$")),
            pair(&"x".repeat(73), &hashes[0]),
        ];
        let verdicts = verify_all(&items, 14);
        assert_eq!(
            verdicts,
            [
                Ok(true),
                Ok(false),
                Err(VerifyError::Malformed),
                Err(VerifyError::CostTooHigh(20)),
                Err(VerifyError::Malformed),
                Err(VerifyError::Password(PasswordProblem::TooLong(73))),
            ]
        );
    }

    /// crypt_blowfish's own vector for its `$2x$` (sign-extension bug) mode:
    /// "ё" (bytes d1 91) under `$2x$` hashes differently from `$2a$`/`$2b$`/`$2y$`.
    const TWO_X: &str = "$2x$05$6bNw2HLQYeqHYyBfLMsv/OiwqTymGIGzFsA4hOTWebfehXHNprcAS";

    #[test]
    fn legacy_2x_hashes_are_refused_never_false() {
        let items = vec![pair("ё", TWO_X), pair("ascii", TWO_X)];
        assert_eq!(
            verify_all(&items, 14),
            [Err(VerifyError::TwoX), Err(VerifyError::TwoX)]
        );
        assert_eq!(
            VerifyError::TwoX.to_string(),
            "$2x$ hashes (crypt_blowfish's buggy-compatibility mode) are not supported; rehash with $2b$"
        );
    }

    #[test]
    fn cost_parsing() {
        let cost = |hash: &str| verify_cost(&pair("pw", hash), 31);
        assert_eq!(cost(VECTOR), Ok(5));
        assert_eq!(cost(&VECTOR.replace("$2a$", "$2b$")), Ok(5));
        assert_eq!(cost(&VECTOR.replace("$2a$", "$2y$")), Ok(5));
        assert_eq!(
            cost(&VECTOR.replace("$2a$", "$2x$")),
            Err(VerifyError::TwoX)
        );
        assert_eq!(
            verify_cost(&pair("pw", VECTOR), 4),
            Err(VerifyError::CostTooHigh(5))
        );
        for malformed in [
            VECTOR.replace("$2a$", "$3a$"),
            VECTOR.replace("$2a$", "$2c$"),
            VECTOR[..59].to_owned(),
            VECTOR.replace("$05$", "$5$"),
            VECTOR.replace("$05$", "$+5$"),
            VECTOR.replace('E', "!"),
            VECTOR.replace('E', "é"),
            String::new(),
        ] {
            assert_eq!(cost(&malformed), Err(VerifyError::Malformed), "{malformed}");
        }
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
    fn version_and_cost_are_judged_before_the_encoding() {
        // `a` as the salt's last character sets bits bcrypt's base64 leaves
        // unused: not a canonical hash, yet its cost is the clearer answer.
        let hash = format!("$2b$31${}", "a".repeat(53));
        assert_eq!(
            verify_cost(&pair("pw", &hash), 12),
            Err(VerifyError::CostTooHigh(31))
        );
        let two_x = format!("$2x$05${}", "a".repeat(53));
        assert_eq!(verify_cost(&pair("pw", &two_x), 12), Err(VerifyError::TwoX));
        let within = format!("$2b$05${}", "a".repeat(53));
        assert_eq!(
            verify_cost(&pair("pw", &within), 12),
            Err(VerifyError::Malformed)
        );
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
}

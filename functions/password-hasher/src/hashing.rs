//! bcrypt on the Rayon pool, and the estimate of how long a batch takes.
//!
//! Where the CPU work runs: every bcrypt computation (hash, verify, the
//! cold-start calibration) runs on the Rayon global pool that `shared` sized
//! to the function's vCPUs. The handler hands a whole batch over with
//! [`on_pool`] and awaits the answer through a oneshot channel, so no tokio
//! thread ever runs bcrypt. Inside the pool, [`map_batch`] spreads a batch
//! over the threads.

use crate::request::{Pair, PasswordProblem};
use crate::secret::Secret;
use rayon::prelude::*;
use shared::vcpus::Vcpus;
use std::time::{Duration, Instant};

/// Why hashing failed: a bug or a broken pool, never the caller's input (the
/// request was validated before it reached the pool).
#[derive(Debug, thiserror::Error)]
pub enum HashingError {
    /// The job panicked on the pool, or was dropped unrun.
    #[error(transparent)]
    Pool(#[from] shared::pool::JobError),
    /// bcrypt refused a cost or a password it was given.
    #[error("bcrypt: {0}")]
    Bcrypt(#[from] bcrypt::BcryptError),
}

/// Run `work` on the Rayon global pool and await its result through a oneshot
/// channel (see [`shared::pool::run`]); a panic comes back as an error.
pub async fn on_pool<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, HashingError> {
    Ok(shared::pool::run("hashing", work).await?)
}

/// Apply `f` to every item, in parallel on the current Rayon pool when there
/// is more than one (a single item pays no parallel overhead).
pub fn map_batch<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync + Send) -> Vec<R> {
    if items.len() == 1 {
        items.iter().map(f).collect()
    } else {
        // One item per task: each is milliseconds of work, so splitting finely
        // balances the threads at no measurable cost.
        items.par_iter().with_max_len(1).map(f).collect()
    }
}

/// Hash every password at `cost` (`$2b$` hashes), on the current Rayon pool.
pub fn hash_all(passwords: &[Secret], cost: u32) -> Result<Vec<String>, HashingError> {
    map_batch(passwords, |p| {
        bcrypt::hash_with_result(p.expose(), cost)
            .map(|parts| parts.format_for_version(bcrypt::Version::TwoB))
            .map_err(HashingError::from)
    })
    .into_iter()
    .collect()
}

/// Why one pair of a verify batch has no verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VerifyError {
    /// Not a bcrypt hash (`$2a$`, `$2b$`, `$2x$` or `$2y$`, two cost digits,
    /// 53 characters of salt and hash).
    Malformed,
    /// A `$2x$` hash: crypt_blowfish's mode that reproduces its old
    /// sign-extension bug for bytes above 127. The `bcrypt` crate would check
    /// it with the corrected algorithm and answer `false` for a right
    /// non-ASCII password, so it is refused instead.
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

/// The version letter and cost of a string in bcrypt's shape.
fn bcrypt_shape(hash: &str) -> Option<(u8, u32)> {
    let rest = hash.strip_prefix("$2")?.as_bytes();
    let (&version, rest) = rest.split_first()?;
    let rest = rest.strip_prefix(b"$")?;
    let (cost, tail) = rest.split_at_checked(2)?;
    let cost = cost.iter().try_fold(0, |n, d| {
        d.is_ascii_digit().then(|| n * 10 + u32::from(d - b'0'))
    })?;
    let tail = tail.strip_prefix(b"$")?;
    let shape_ok = matches!(version, b'a' | b'b' | b'x' | b'y')
        && tail.len() == 53
        && tail
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || *b == b'.' || *b == b'/');
    shape_ok.then_some((version, cost))
}

/// The password and the cost bcrypt will check `pair` with, or why the pair
/// gets no verdict (decided without hashing).
fn to_check(pair: &Pair, max_cost: u32) -> Result<(&Secret, u32), VerifyError> {
    let password = pair
        .password
        .as_ref()
        .map_err(|problem| VerifyError::Password(*problem))?;
    match bcrypt_shape(&pair.hash) {
        None => Err(VerifyError::Malformed),
        Some((b'x', _)) => Err(VerifyError::TwoX),
        Some((_, cost)) if cost > max_cost => Err(VerifyError::CostTooHigh(cost)),
        Some((_, cost)) => Ok((password, cost)),
    }
}

/// The cost bcrypt will run at to check `pair`, or why the pair gets no
/// verdict (decided without hashing).
pub fn verify_cost(pair: &Pair, max_cost: u32) -> Result<u32, VerifyError> {
    to_check(pair, max_cost).map(|(_, cost)| cost)
}

/// Check each password against its hash (bcrypt's constant-time comparison),
/// on the current Rayon pool.
pub fn verify_all(items: &[Pair], max_cost: u32) -> Vec<Result<bool, VerifyError>> {
    map_batch(items, |pair| {
        let (password, _) = to_check(pair, max_cost)?;
        // bcrypt also refuses a cost below 4, which the shape lets through.
        bcrypt::verify(password.expose(), &pair.hash).map_err(|_| VerifyError::Malformed)
    })
}

/// The cost the calibration hashes at: cheap (about a millisecond per hash
/// on one vCPU), still long next to the clock's resolution.
const CALIBRATION_COST: u32 = 4;
/// Calibration hashes timed; the fastest counts.
const CALIBRATION_RUNS: usize = 3;

/// Predicts how long a batch takes: the time of one hash on a whole vCPU,
/// measured at cold start, scaled by cost and divided by the parallelism the
/// function really has ([`parallelism`]).
#[derive(Debug, Clone, Copy)]
pub struct Estimator {
    /// Seconds per unit of work on a whole vCPU (one hash at cost c is 2^c units).
    seconds_per_unit: f64,
}

impl Estimator {
    /// Time [`CALIBRATION_RUNS`] hashes at cost [`CALIBRATION_COST`] on a
    /// thread of the pool, where batches run (see [`Estimator::calibrate_with`]).
    pub async fn calibrate() -> Result<Self, HashingError> {
        on_pool(|| Self::calibrate_with(time_one_hash)).await?
    }

    /// Calibrate from [`CALIBRATION_RUNS`] calls of `time_one`, each the time
    /// of one hash at [`CALIBRATION_COST`], keeping the fastest: a slower run
    /// also measured something else (cold caches, a page fault, or waiting for
    /// CPU time when the function's share is a fraction of a vCPU, which
    /// [`Estimator::estimate`] accounts for separately).
    pub fn calibrate_with(
        mut time_one: impl FnMut() -> Result<Duration, HashingError>,
    ) -> Result<Self, HashingError> {
        let mut fastest = Duration::MAX;
        for _ in 0..CALIBRATION_RUNS {
            fastest = fastest.min(time_one()?);
        }
        Ok(Self::from_sample(fastest, CALIBRATION_COST))
    }

    /// An estimator from one hash at `cost` that took `took` on a whole vCPU.
    pub fn from_sample(took: Duration, cost: u32) -> Self {
        Self {
            seconds_per_unit: took.as_secs_f64() / 2f64.powi(cost as i32),
        }
    }

    /// Time for `hashes` hashes at `cost` on `vcpus`: the CPU time they need
    /// over the [`parallelism`], and never less than the rounds the worker
    /// threads take (3 hashes on 2 workers: 2 rounds).
    pub fn estimate(&self, hashes: usize, cost: u32, vcpus: &Vcpus) -> Duration {
        let per_hash = self.seconds_per_unit * 2f64.powi(cost as i32);
        let rounds = hashes.div_ceil(vcpus.workers.max(1)) as f64;
        let on_share = hashes as f64 / parallelism(vcpus);
        Duration::try_from_secs_f64(rounds.max(on_share) * per_hash).unwrap_or(Duration::MAX)
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

/// The time of one hash at [`CALIBRATION_COST`] on this thread.
fn time_one_hash() -> Result<Duration, HashingError> {
    let start = Instant::now();
    let hash = bcrypt::hash_with_salt(b"calibration", CALIBRATION_COST, [0u8; 16])?;
    std::hint::black_box(hash);
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
    fn calibration_keeps_the_fastest_of_three_runs() {
        let mut runs = [5, 2, 9].into_iter().map(Duration::from_millis);
        let mut calls = 0;
        let e = Estimator::calibrate_with(|| {
            calls += 1;
            Ok(runs.next().unwrap_or(Duration::ZERO))
        })
        .expect("calibrated");
        assert_eq!(calls, 3);
        // 2 ms per cost-4 hash: 2 ms x 2^6 at cost 10, on one whole vCPU.
        let at_10 = e.estimate(1, 10, &vcpus("1769", None));
        assert_eq!(at_10, Duration::from_millis(2 * 64));
        // A failed run fails the calibration.
        let failed =
            Estimator::calibrate_with(|| Err(bcrypt::BcryptError::CostNotAllowed(3).into()));
        assert!(failed.is_err());
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

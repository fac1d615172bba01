//! bcrypt on the Rayon pool, and the estimate of how long a batch takes.
//!
//! Where the CPU work runs: every bcrypt computation (hash, verify, the
//! cold-start calibration) runs on the Rayon global pool that `shared` sized
//! to the function's vCPUs. The handler hands a whole batch over with
//! [`on_pool`] and awaits the answer through a oneshot channel, so no tokio
//! thread ever runs bcrypt. Inside the pool, [`map_batch`] spreads a batch
//! over the threads.

use crate::secret::Secret;
use rayon::prelude::*;
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
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VerifyError {
    /// Not a bcrypt hash (`$2a$`, `$2b$`, `$2x$`, `$2y$`, cost, 53 characters).
    Malformed,
    /// Its cost is above what this function accepts.
    CostTooHigh(u32),
}

impl std::fmt::Display for VerifyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            VerifyError::Malformed => f.write_str("malformed bcrypt hash"),
            VerifyError::CostTooHigh(cost) => {
                write!(f, "hash cost {cost} is above the allowed maximum")
            }
        }
    }
}

/// The cost of a bcrypt hash, if it has the bcrypt shape.
pub fn cost_of(hash: &str) -> Option<u32> {
    let rest = hash
        .strip_prefix("$2a$")
        .or_else(|| hash.strip_prefix("$2b$"))
        .or_else(|| hash.strip_prefix("$2x$"))
        .or_else(|| hash.strip_prefix("$2y$"))?;
    let (cost, tail) = rest.split_once('$')?;
    let shape_ok = cost.len() == 2
        && tail.len() == 53
        && tail
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'/');
    shape_ok.then(|| cost.parse().ok()).flatten()
}

/// Check each password against its hash (bcrypt's constant-time comparison),
/// on the current Rayon pool.
pub fn verify_all(items: &[(Secret, String)], max_cost: u32) -> Vec<Result<bool, VerifyError>> {
    map_batch(items, |(password, hash)| match cost_of(hash) {
        None => Err(VerifyError::Malformed),
        Some(cost) if cost > max_cost => Err(VerifyError::CostTooHigh(cost)),
        Some(_) => bcrypt::verify(password.expose(), hash).map_err(|_| VerifyError::Malformed),
    })
}

/// Predicts how long a batch takes, from one hash timed at cold start.
#[derive(Debug, Clone, Copy)]
pub struct Estimator {
    /// Seconds per unit of work (one hash at cost c is 2^c units).
    seconds_per_unit: f64,
}

/// The cost used to calibrate: long enough to time, short enough for cold start.
const CALIBRATION_COST: u32 = 6;

impl Estimator {
    /// Time one hash at cost 6 on a thread of the pool, where batches run.
    pub async fn calibrate() -> Result<Self, HashingError> {
        on_pool(|| {
            let start = Instant::now();
            bcrypt::hash_with_salt(b"calibration", CALIBRATION_COST, [0u8; 16])?;
            Ok(Self::from_sample(start.elapsed(), CALIBRATION_COST))
        })
        .await?
    }

    /// An estimator from one hash at `cost` that took `took`.
    pub fn from_sample(took: Duration, cost: u32) -> Self {
        Self {
            seconds_per_unit: took.as_secs_f64() / 2f64.powi(cost as i32),
        }
    }

    /// Time for `hashes` hashes at `cost` over `workers` threads.
    pub fn estimate(&self, hashes: usize, cost: u32, workers: usize) -> Duration {
        let rounds = hashes.div_ceil(workers.max(1)) as f64;
        Duration::from_secs_f64(rounds * self.seconds_per_unit * 2f64.powi(cost as i32))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const VECTOR: &str = "$2a$05$CCCCCCCCCCCCCCCCCCCCC.E5YPO9kmyuRGyh0XouQYb4YMJKvyOeW";

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
            (Secret::new("a".into()), hashes[0].clone()),
            (Secret::new("a".into()), hashes[1].clone()),
            (Secret::new("b".into()), "$2b$04$short".into()),
            (Secret::new("U*U".into()), VECTOR.replace("$05$", "$20$")),
        ];
        let verdicts = verify_all(&items, 14);
        assert_eq!(
            verdicts,
            [
                Ok(true),
                Ok(false),
                Err(VerifyError::Malformed),
                Err(VerifyError::CostTooHigh(20))
            ]
        );
    }

    #[test]
    fn cost_parsing() {
        assert_eq!(cost_of(VECTOR), Some(5));
        assert_eq!(cost_of(&VECTOR.replace("$2a$", "$2y$")), Some(5));
        assert_eq!(cost_of(&VECTOR.replace("$2a$", "$3a$")), None);
        assert_eq!(cost_of(&VECTOR[..59]), None);
        assert_eq!(cost_of(&VECTOR.replace("$05$", "$5$")), None);
        assert_eq!(cost_of(&VECTOR.replace('E', "!")), None);
        assert_eq!(cost_of(""), None);
    }

    #[test]
    fn estimates_scale_with_cost_and_workers() {
        let e = Estimator::from_sample(Duration::from_millis(4), 6);
        let one = e.estimate(1, 10, 1);
        assert!((one.as_secs_f64() - 0.064).abs() < 1e-9, "{one:?}");
        assert_eq!(e.estimate(24, 10, 2), one * 12);
        assert_eq!(e.estimate(3, 10, 2), one * 2);
    }
}

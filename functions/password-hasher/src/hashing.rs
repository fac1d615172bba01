//! bcrypt on the Rayon pool. How long a batch takes is estimated in
//! [`crate::calibration`], from the groups [`map_batch`] makes.
//!
//! Where the CPU work runs: every bcrypt computation (hash, verify, the
//! calibration) runs on the Rayon global pool that `shared` sized
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
pub(crate) fn group_size(items: usize, threads: usize) -> usize {
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
pub(crate) fn eks_blowfish(
    inputs: &[Input<'_>],
    cost: u32,
) -> Result<Vec<[u8; 24]>, CostOutOfRange> {
    crate::eksblowfish::hash_many(inputs, cost)
}

/// The 24 bytes bcrypt computes for each input at `cost`, one after another
/// by the `bcrypt` crate.
#[cfg(feature = "bcrypt-crate")]
pub(crate) fn eks_blowfish(
    inputs: &[Input<'_>],
    cost: u32,
) -> Result<Vec<[u8; 24]>, CostOutOfRange> {
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

#[cfg(test)]
mod tests {
    use super::*;

    const VECTOR: &str = "$2a$05$CCCCCCCCCCCCCCCCCCCCC.E5YPO9kmyuRGyh0XouQYb4YMJKvyOeW";

    fn pair(password: &str, hash: &str) -> Pair {
        Pair::new(Secret::new(password.into()), hash.into())
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
}

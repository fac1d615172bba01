//! Timing helpers for the performance lab: this
//! function's hashing against the system's `crypt(3)` (libxcrypt), and a batch
//! on a pool of a given size. Not used by the function itself.

use password_hasher::hashing::hash_all;
use password_hasher::secret::Secret;
use std::process::Command;
use std::time::Instant;

/// The bcrypt salt both sides use, so they do the same work.
pub const SALT: &str = "Ro0CUfOqk6cXEKf3dyaM7O";

/// `n` distinct benchmark passwords.
pub fn passwords(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("benchmark password {i}")).collect()
}

/// Seconds per hash of libxcrypt's `crypt(3)` over `passwords` at `cost`,
/// timed inside a Python process (its `crypt` module calls `crypt(3)`), so
/// that the interpreter's start-up is not counted.
pub fn crypt3_seconds_per_hash(cost: u32, passwords: &[String]) -> Result<f64, String> {
    let script = "import crypt, sys, time\n\
                  setting = sys.argv[1]\n\
                  pws = sys.argv[2:]\n\
                  t = time.perf_counter()\n\
                  for p in pws: assert crypt.crypt(p, setting).startswith(setting[:7])\n\
                  print((time.perf_counter() - t) / len(pws))";
    let output = Command::new("python3")
        .args([
            "-W",
            "ignore",
            "-c",
            script,
            &format!("$2b${cost:02}${SALT}"),
        ])
        .args(passwords)
        .output()
        .map_err(|e| format!("python3 (for crypt(3)): {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "crypt(3) through python3 failed: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    let text = String::from_utf8_lossy(&output.stdout);
    text.trim()
        .parse()
        .map_err(|e| format!("crypt(3) timing {text:?}: {e}"))
}

/// Seconds per hash of this function's code, one hash at a time on `pool`.
pub fn ours_seconds_per_hash(
    pool: &rayon::ThreadPool,
    cost: u32,
    passwords: &[String],
) -> Result<f64, String> {
    let secrets: Vec<_> = passwords.iter().map(|p| Secret::new(p.clone())).collect();
    let start = Instant::now();
    for secret in &secrets {
        pool.install(|| hash_all(std::slice::from_ref(secret), cost))
            .map_err(|e| e.to_string())?;
    }
    Ok(start.elapsed().as_secs_f64() / secrets.len().max(1) as f64)
}

/// Per-hash seconds of this function's code (one thread) and of `crypt(3)`,
/// `rounds` times over `per_round` passwords, side by side: the order
/// alternates each round, so drift on a shared machine hits both alike.
pub fn side_by_side(cost: u32, rounds: usize, per_round: usize) -> Result<Vec<(f64, f64)>, String> {
    let single = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .map_err(|e| e.to_string())?;
    let pws = passwords(per_round.max(1));
    ours_seconds_per_hash(&single, cost, &pws[..1])?; // warm-up
    (0..rounds)
        .map(|round| {
            if round % 2 == 0 {
                let ours = ours_seconds_per_hash(&single, cost, &pws)?;
                Ok((ours, crypt3_seconds_per_hash(cost, &pws)?))
            } else {
                let theirs = crypt3_seconds_per_hash(cost, &pws)?;
                Ok((ours_seconds_per_hash(&single, cost, &pws)?, theirs))
            }
        })
        .collect()
}

/// Seconds to hash `batch` at `cost` on a fresh pool of `threads`, best of
/// `tries` (the machine is shared: the best run is the least disturbed).
pub fn batch_seconds(
    threads: usize,
    cost: u32,
    batch: &[String],
    tries: usize,
) -> Result<f64, String> {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(|e| e.to_string())?;
    let secrets: Vec<_> = batch.iter().map(|p| Secret::new(p.clone())).collect();
    let mut best = f64::INFINITY;
    for _ in 0..tries.max(1) {
        let start = Instant::now();
        let hashes = pool
            .install(|| hash_all(&secrets, cost))
            .map_err(|e| e.to_string())?;
        if hashes.len() != secrets.len() {
            return Err(format!(
                "{} hashes for {} passwords",
                hashes.len(),
                secrets.len()
            ));
        }
        best = best.min(start.elapsed().as_secs_f64());
    }
    Ok(best)
}

/// The median of `values` (NaN-safe ordering); 0 for none.
pub fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_is_hashed_on_the_pool() {
        let seconds = batch_seconds(2, 4, &passwords(3), 1).expect("batch");
        assert!(seconds > 0.0);
    }

    #[test]
    fn median_of_none_is_zero_and_of_some_the_middle() {
        assert_eq!(median(vec![]), 0.0);
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
    }
}

//! Timing helpers for the performance lab's bcrypt probe: the passwords and
//! salt every candidate hashes, thread CPU time, the system's `crypt(3)`
//! (libxcrypt), and this function's batch on a pool of a given size. Not used
//! by the function itself.

use password_hasher::hashing::hash_all;
use password_hasher::secret::Secret;
use std::process::Command;
use std::time::Instant;

/// The bcrypt salt every candidate uses, so all do the same work.
pub const SALT: &str = "Ro0CUfOqk6cXEKf3dyaM7O";

/// `n` distinct benchmark passwords.
pub fn passwords(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("benchmark password {i}")).collect()
}

/// The raw 16 bytes of [`SALT`].
pub fn salt() -> Result<[u8; 16], String> {
    let hash = format!("$2b$04${SALT}{}", ".".repeat(31));
    let parts: bcrypt::HashParts = hash.parse().map_err(|e| format!("salt {SALT}: {e}"))?;
    Ok(parts.get_salt_raw())
}

/// CPU time this thread has run, in seconds.
pub fn cpu_seconds() -> Result<f64, String> {
    // The kernel adds the running thread's latest stretch to this figure only
    // when it schedules; yielding first makes it current (else it lags by up
    // to a scheduler tick).
    std::thread::yield_now();
    let text = std::fs::read_to_string("/proc/thread-self/schedstat")
        .map_err(|e| format!("/proc/thread-self/schedstat: {e}"))?;
    let nanos: u64 = text
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| format!("schedstat {text:?}"))?;
    Ok(nanos as f64 * 1e-9)
}

/// What libxcrypt's `crypt(3)` did with some passwords.
#[derive(Debug, Clone, PartialEq)]
pub struct Crypt3 {
    /// Thread CPU seconds per hash.
    pub seconds_per_hash: f64,
    /// The hashes, in order.
    pub hashes: Vec<String>,
}

/// Hash `passwords` at `cost` with [`SALT`] by libxcrypt's `crypt(3)`, timed
/// inside a Python process (its `crypt` module calls `crypt(3)`), so that the
/// interpreter's start-up is not counted.
pub fn crypt3(cost: u32, passwords: &[String]) -> Result<Crypt3, String> {
    let script = "import crypt, json, sys, time\n\
                  setting = sys.argv[1]\n\
                  pws = sys.argv[2:]\n\
                  t = time.thread_time()\n\
                  hashes = [crypt.crypt(p, setting) for p in pws]\n\
                  t = time.thread_time() - t\n\
                  print(json.dumps({'seconds_per_hash': t / len(pws), 'hashes': hashes}))";
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
    let answer: serde_json::Value =
        serde_json::from_str(text.trim()).map_err(|e| format!("crypt(3) answer {text:?}: {e}"))?;
    let hashes: Vec<String> = answer["hashes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|h| h.as_str().unwrap_or_default().to_owned())
        .collect();
    match answer["seconds_per_hash"].as_f64() {
        Some(seconds_per_hash) if hashes.len() == passwords.len() => Ok(Crypt3 {
            seconds_per_hash,
            hashes,
        }),
        _ => Err(format!("crypt(3) answer {text:?}")),
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_is_hashed_on_the_pool() {
        let seconds = batch_seconds(2, 4, &passwords(3), 1).expect("batch");
        assert!(seconds > 0.0);
    }

    #[test]
    fn the_raw_salt_is_the_one_bcrypt_encodes() {
        let salt = salt().expect("salt");
        let hash = bcrypt::hash_with_salt("x", 4, salt).expect("hash");
        assert_eq!(hash.get_salt(), SALT);
    }

    #[test]
    fn crypt3_hashes_as_the_bcrypt_crate_does() {
        let pws = passwords(2);
        let answer = crypt3(4, &pws).expect("crypt(3)");
        let salt = salt().expect("salt");
        let expected: Vec<String> = pws
            .iter()
            .map(|p| {
                let parts = bcrypt::hash_with_salt(p, 4, salt).expect("hash");
                parts.format_for_version(bcrypt::Version::TwoB)
            })
            .collect();
        assert_eq!(answer.hashes, expected);
        assert!(answer.seconds_per_hash >= 0.0);
    }
}

//! Every bcrypt candidate side by side on one thread, and this function's
//! batch on pools of 1..=N threads: the raw times, as JSON, that
//! [`crate::figures`] turns into the section's figures.
//!
//! - candidates: libxcrypt's `crypt(3)` (one hash at a time, timed inside
//!   Python), the `bcrypt` crate, `bcrypt-rust` (its batch API picks a SIMD
//!   backend at run time), and this function's EksBlowfish with 1, 2, 3, 4,
//!   6 and 8 lanes;
//! - first, at cost 4, every candidate hashes the batch's passwords with one
//!   salt; those whose hashes differ from the `bcrypt` crate's are named in
//!   `differing` (the section says the property broke);
//! - ROUNDS rounds; each times every candidate once, one hash at a time
//!   (`SINGLES` passwords) and BATCH passwords at once, in an order that
//!   rotates from round to round, so drift on a shared machine hits all
//!   alike. Times are the thread's CPU time (Linux's
//!   `/proc/thread-self/schedstat`; Python's `time.thread_time`), so time
//!   spent waiting for a busy core is not counted;
//! - then BATCH hashes through the function's `hash_all` on pools of
//!   1..=MAX_THREADS threads, wall clock, best of two each.

use crate::yardstick::{batch_seconds, cpu_seconds, crypt3, passwords, salt};
use password_hasher::eksblowfish::{Input, LANES, hash_many_in};
use serde_json::{Value, json};

/// Hashes timed one at a time per candidate per round.
const SINGLES: usize = 8;
/// The cost of the agreement check.
const CHECK_COST: u32 = 4;

/// Hashes passwords at a cost with one salt: the 24 bytes of each.
type Run = Box<dyn Fn(&[Vec<u8>], u32, [u8; 16]) -> Vec<[u8; 24]>>;

/// A candidate run in this process.
struct Candidate {
    /// Its name in the lab's JSON.
    name: &'static str,
    /// Hashes it runs at once on one thread.
    lanes: usize,
    /// Whether it is timed one hash at a time too (the core's single hash
    /// is the same at every lane count).
    single: bool,
    run: Run,
}

fn own<const N: usize>(single: bool) -> Candidate {
    Candidate {
        name: "own",
        lanes: N,
        single,
        run: Box::new(|passwords, cost, salt| {
            let inputs: Vec<_> = passwords
                .iter()
                .map(|p| Input { password: p, salt })
                .collect();
            hash_many_in::<N>(&inputs, cost).unwrap_or_default()
        }),
    }
}

/// bcrypt's key bytes: the password's first 72 bytes and a NUL when shorter.
fn key(password: &[u8]) -> Vec<u8> {
    let mut key: Vec<u8> = password.iter().copied().take(72).collect();
    if key.len() < 72 {
        key.push(0);
    }
    key
}

/// The candidates in this process, the `bcrypt` crate first.
fn candidates() -> Vec<Candidate> {
    vec![
        Candidate {
            name: "bcrypt",
            lanes: 1,
            single: true,
            run: Box::new(|pws, cost, salt| {
                pws.iter()
                    .map(|p| bcrypt::bcrypt(cost, salt, &key(p)))
                    .collect()
            }),
        },
        Candidate {
            name: "bcrypt-rust",
            lanes: bcrypt_rust::detected_backend().lanes(),
            single: true,
            run: Box::new(|pws, cost, salt| {
                let refs: Vec<&[u8]> = pws.iter().map(Vec::as_slice).collect();
                bcrypt_rust::bcrypt_many(cost, &refs, &vec![salt; pws.len()]).unwrap_or_default()
            }),
        },
        own::<1>(true),
        own::<2>(false),
        own::<3>(false),
        own::<4>(false),
        own::<6>(false),
        own::<8>(false),
    ]
}

/// The candidates whose hashes of `passwords` differ from the `bcrypt`
/// crate's (libxcrypt compared as hash strings).
fn differing(
    candidates: &[Candidate],
    passwords: &[String],
    salt: [u8; 16],
) -> Result<Vec<String>, String> {
    let bytes: Vec<Vec<u8>> = passwords.iter().map(|p| p.clone().into_bytes()).collect();
    let reference = (candidates[0].run)(&bytes, CHECK_COST, salt);
    let mut differing: Vec<String> = candidates
        .iter()
        .filter(|c| (c.run)(&bytes, CHECK_COST, salt) != reference)
        .map(|c| match c.name {
            "own" => format!("this function's EksBlowfish with {} lanes", c.lanes),
            name => name.to_owned(),
        })
        .collect();
    let strings = passwords
        .iter()
        .map(|p| {
            bcrypt::hash_with_salt(p, CHECK_COST, salt)
                .map(|h| h.format_for_version(bcrypt::Version::TwoB))
                .map_err(|e| e.to_string())
        })
        .collect::<Result<Vec<_>, _>>()?;
    if crypt3(CHECK_COST, passwords)?.hashes != strings {
        differing.push("libxcrypt".into());
    }
    Ok(differing)
}

/// The raw times of every candidate at `cost`: `rounds` rounds, `batch`
/// passwords at once, then pools of 1..=`max_threads` threads.
pub fn times(cost: u32, rounds: usize, batch: usize, max_threads: usize) -> Result<Value, String> {
    let salt = salt()?;
    let batch_text = passwords(batch);
    let single_text = passwords(SINGLES);
    let to_bytes =
        |pws: &[String]| -> Vec<Vec<u8>> { pws.iter().map(|p| p.clone().into_bytes()).collect() };
    let (batch_pws, single_pws) = (to_bytes(&batch_text), to_bytes(&single_text));
    let candidates = candidates();
    // Also the warm-up: `bcrypt-rust` picks its backend at first use.
    let differing = differing(&candidates, &batch_text, salt)?;

    // Per candidate and round: CPU ms per hash, one at a time and batched;
    // libxcrypt (one at a time only) last.
    let n = candidates.len();
    let mut single: Vec<Vec<f64>> = vec![Vec::new(); n + 1];
    let mut batched: Vec<Vec<f64>> = vec![Vec::new(); n];
    for round in 0..rounds {
        for i in 0..=n {
            let c = (i + round) % (n + 1);
            let Some(candidate) = candidates.get(c) else {
                single[n].push(crypt3(cost, &single_text)?.seconds_per_hash * 1e3);
                continue;
            };
            if candidate.single {
                let start = cpu_seconds()?;
                for p in &single_pws {
                    std::hint::black_box((candidate.run)(std::slice::from_ref(p), cost, salt));
                }
                single[c].push((cpu_seconds()? - start) * 1e3 / SINGLES as f64);
            }
            let start = cpu_seconds()?;
            std::hint::black_box((candidate.run)(&batch_pws, cost, salt));
            batched[c].push((cpu_seconds()? - start) * 1e3 / batch_pws.len().max(1) as f64);
        }
    }
    let mut single_json: Vec<_> = candidates
        .iter()
        .zip(&single)
        .filter(|(c, _)| c.single)
        .map(|(c, ms)| json!({"candidate": c.name, "ms": ms}))
        .collect();
    single_json.push(json!({"candidate": "libxcrypt", "ms": single[n]}));
    let batched_json: Vec<_> = candidates
        .iter()
        .zip(&batched)
        .map(|(c, ms)| json!({"candidate": c.name, "lanes": c.lanes, "ms": ms}))
        .collect();

    let threads_seconds = (1..=max_threads)
        .map(|threads| batch_seconds(threads, cost, &batch_text, 2).map(|s| json!([threads, s])))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(json!({
            "allocator": shared::allocator::name(),
            "cost": cost,
            "batch": batch,
            "rounds": rounds,
            "shipped_lanes": LANES,
            "bcrypt_rust_backend": bcrypt_rust::detected_backend().name(),
            "differing": differing,
            "single": single_json,
            "batched": batched_json,
            "threads_seconds": threads_seconds,
    }))
}

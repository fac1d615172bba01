//! bcrypt benchmark, measured side by side in one run (absolute times drift on
//! shared machines; ratios hold).
//!
//! `cargo bench -p password-hasher --bench bcrypt`
//!
//! 1. Per-hash time of this function's code (one thread) against the system's
//!    `crypt(3)` (libxcrypt, timed inside a Python process so that its start-up
//!    is not counted), same passwords, same salts, alternating rounds.
//! 2. Scaling: a batch of 24 at cost 10 on pools of 1..=available threads;
//!    efficiency = speedup / threads.

use password_hasher::hashing::hash_all;
use password_hasher::secret::Secret;
use std::process::Command;
use std::time::Instant;

const COST: u32 = 10;
const PER_ROUND: usize = 4;
const ROUNDS: usize = 6;
const SALT: &str = "Ro0CUfOqk6cXEKf3dyaM7O";

fn passwords(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("benchmark password {i}")).collect()
}

/// Seconds per hash of libxcrypt's crypt(3) over `passwords`.
fn crypt_seconds_per_hash(passwords: &[String]) -> f64 {
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
            &format!("$2b${COST:02}${SALT}"),
        ])
        .args(passwords)
        .output()
        .expect("python3 with the crypt module");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .trim()
        .parse()
        .expect("seconds")
}

/// Seconds per hash of this function's code on a one-thread pool.
fn ours_seconds_per_hash(pool: &rayon::ThreadPool, passwords: &[String]) -> f64 {
    let secrets: Vec<_> = passwords.iter().map(|p| Secret::new(p.clone())).collect();
    let start = Instant::now();
    for secret in &secrets {
        let hashes = pool
            .install(|| hash_all(std::slice::from_ref(secret), COST))
            .expect("hash");
        assert_eq!(hashes.len(), 1);
    }
    start.elapsed().as_secs_f64() / secrets.len() as f64
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn main() {
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    println!(
        "bcrypt at cost {COST}, {cores} core(s) available, allocator {}",
        shared::allocator::NAME
    );

    let single = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .expect("pool");
    let pws = passwords(PER_ROUND);
    let _warm_up = ours_seconds_per_hash(&single, &pws[..1]);
    let (mut ours, mut theirs, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        // Alternate which goes first, so drift hits both alike.
        let (o, c) = if round % 2 == 0 {
            let o = ours_seconds_per_hash(&single, &pws);
            (o, crypt_seconds_per_hash(&pws))
        } else {
            let c = crypt_seconds_per_hash(&pws);
            (ours_seconds_per_hash(&single, &pws), c)
        };
        ours.push(o);
        theirs.push(c);
        ratios.push(o / c);
    }
    println!("\n1. per-hash time, one thread, {ROUNDS} alternating rounds of {PER_ROUND} hashes");
    println!(
        "   this function (bcrypt crate): {:>7.1} ms (median)",
        median(ours) * 1e3
    );
    println!(
        "   libxcrypt crypt(3):           {:>7.1} ms (median)",
        median(theirs.clone()) * 1e3
    );
    println!(
        "   ratio ours / crypt(3):        {:>7.3} (median of per-round ratios; goal <= 1.0)",
        median(ratios)
    );

    println!("\n2. scaling: 24 hashes at cost {COST}");
    println!("   threads  seconds  speedup  efficiency");
    let batch: Vec<_> = passwords(24).into_iter().map(Secret::new).collect();
    let mut one_thread = 0.0;
    for threads in 1..=cores {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .expect("pool");
        // Best of two: the machine is shared.
        let seconds = (0..2)
            .map(|_| {
                let start = Instant::now();
                let hashes = pool.install(|| hash_all(&batch, COST)).expect("hash");
                assert_eq!(hashes.len(), 24);
                start.elapsed().as_secs_f64()
            })
            .fold(f64::INFINITY, f64::min);
        if threads == 1 {
            one_thread = seconds;
        }
        let speedup = one_thread / seconds;
        println!(
            "   {threads:>7}  {seconds:>7.3}  {speedup:>7.2}  {:>10.2}",
            speedup / threads as f64
        );
    }
}

//! bcrypt benchmark, measured side by side in one run (absolute times drift on
//! shared machines; ratios hold).
//!
//! `cargo bench -p password-hasher --bench bcrypt` (the performance lab,
//! `cargo xtask lab`, runs the same measurements and plots them)
//!
//! 1. Per-hash time of this function's code (one thread) against the system's
//!    `crypt(3)` (libxcrypt), same passwords, same salts, alternating rounds.
//! 2. Scaling: a batch of 24 at cost 10 on pools of 1..=available threads;
//!    efficiency = speedup / threads.

use password_hasher::yardstick::{batch_seconds, median, passwords, side_by_side};

const COST: u32 = 10;
const PER_ROUND: usize = 4;
const ROUNDS: usize = 6;

fn main() -> Result<(), String> {
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    println!(
        "bcrypt at cost {COST}, {cores} core(s) available, allocator {}",
        shared::allocator::NAME
    );

    let (mut ours, mut theirs, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for (o, c) in side_by_side(COST, ROUNDS, PER_ROUND)? {
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
        median(theirs) * 1e3
    );
    println!(
        "   ratio ours / crypt(3):        {:>7.3} (median of per-round ratios; goal <= 1.0)",
        median(ratios)
    );

    println!("\n2. scaling: 24 hashes at cost {COST}");
    println!("   threads  seconds  speedup  efficiency");
    let batch = passwords(24);
    let one_thread = batch_seconds(1, COST, &batch, 2)?;
    for threads in 1..=cores {
        let seconds = if threads == 1 {
            one_thread
        } else {
            batch_seconds(threads, COST, &batch, 2)?
        };
        let speedup = one_thread / seconds;
        println!(
            "   {threads:>7}  {seconds:>7.3}  {speedup:>7.2}  {:>10.2}",
            speedup / threads as f64
        );
    }
    Ok(())
}

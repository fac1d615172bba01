//! Performance-lab probe: bcrypt per-hash time against `crypt(3)` and a fixed
//! batch on pools of 1..=N threads, printing one JSON line.
//!
//! `lab_bcrypt COST ROUNDS BATCH MAX_THREADS` (run by `cargo xtask lab`)
//! - ROUNDS alternating rounds of 4 hashes, this function's code on one thread
//!   and `crypt(3)`, side by side (ratios hold where absolute times drift);
//! - BATCH hashes on pools of 1..=MAX_THREADS threads, best of two each.

use lab_probes::yardstick::{batch_seconds, passwords, side_by_side};

const PER_ROUND: usize = 4;

fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let numbers = args
        .iter()
        .map(|a| {
            a.parse::<usize>()
                .map_err(|_| format!("not a whole number: {a:?}"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let [cost, rounds, batch, max_threads] = numbers.as_slice() else {
        return Err("usage: lab_bcrypt COST ROUNDS BATCH MAX_THREADS".into());
    };
    let cost = u32::try_from(*cost).map_err(|e| e.to_string())?;
    let pairs: Vec<_> = side_by_side(cost, *rounds, PER_ROUND)?
        .into_iter()
        .map(|(ours, theirs)| serde_json::json!([ours * 1e3, theirs * 1e3]))
        .collect();
    let batch_passwords = passwords(*batch);
    let scaling = (1..=*max_threads)
        .map(|threads| {
            batch_seconds(threads, cost, &batch_passwords, 2)
                .map(|s| serde_json::json!([threads, s]))
        })
        .collect::<Result<Vec<_>, _>>()?;
    println!(
        "{}",
        serde_json::json!({
            "allocator": shared::allocator::NAME,
            "cost": cost,
            "batch": batch,
            "per_hash_ms": pairs,
            "batch_seconds": scaling,
        })
    );
    Ok(())
}

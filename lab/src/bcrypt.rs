//! bcrypt: this function's per-hash time against libxcrypt's `crypt(3)`, and
//! the scaling of a fixed batch over 1..=cores threads.

use super::probes::Probes;
use super::{Scale, median};

/// The bcrypt cost of the full lab's batch.
pub const COST: u32 = 10;
/// Hashes in the full lab's batch.
pub const BATCH: usize = 24;

/// What the hasher probe measured.
#[derive(Debug, Clone)]
pub struct Bcrypt {
    pub cost: u32,
    pub batch: usize,
    /// Medians over the rounds, ms per hash.
    pub ours_ms: f64,
    pub crypt3_ms: f64,
    /// Median of the per-round ratios ours / crypt(3).
    pub ratio: f64,
    pub rounds: usize,
    /// (threads, seconds for the batch), 1..=cores.
    pub scaling: Vec<(usize, f64)>,
}

/// Run the probe (built with the default allocator).
pub fn measure(probes: &Probes, scale: Scale, cores: usize) -> Result<Bcrypt, String> {
    let (cost, rounds, batch) = match scale {
        Scale::Full => (COST, 6, BATCH),
        Scale::Quick => (4, 2, 4),
    };
    let args: Vec<String> = [
        cost.to_string(),
        rounds.to_string(),
        batch.to_string(),
        cores.to_string(),
    ]
    .to_vec();
    let out = probes.run("mimalloc", "lab_bcrypt", &args, &[])?;
    let pairs: Vec<(f64, f64)> = out["per_hash_ms"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| Some((p[0].as_f64()?, p[1].as_f64()?)))
        .collect();
    let scaling: Vec<(usize, f64)> = out["batch_seconds"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| Some((usize::try_from(p[0].as_u64()?).ok()?, p[1].as_f64()?)))
        .collect();
    if pairs.len() != rounds || scaling.len() != cores {
        return Err(format!("lab_bcrypt answered incompletely: {out}"));
    }
    Ok(Bcrypt {
        cost,
        batch,
        ours_ms: median(pairs.iter().map(|p| p.0).collect()),
        crypt3_ms: median(pairs.iter().map(|p| p.1).collect()),
        ratio: median(pairs.iter().map(|p| p.0 / p.1).collect()),
        rounds,
        scaling,
    })
}

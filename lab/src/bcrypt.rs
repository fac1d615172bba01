//! bcrypt: this function's per-hash time against libxcrypt's `crypt(3)`, the
//! scaling of a fixed batch over 1..=cores threads, and from the same
//! measurements the local power tuning (`power`).

use super::power::{self, CpuShare, MEMORY_SIZES_MB};
use super::probes::Probes;
use super::{Scale, median};

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
    pub power: Vec<power::Row>,
}

/// Run the probe (built with the default allocator).
pub fn measure(probes: &Probes, scale: Scale, cores: usize) -> Result<Bcrypt, String> {
    let (cost, rounds, batch) = match scale {
        Scale::Full => (10, 6, 24),
        Scale::Quick => (4, 2, 4),
    };
    let mut args: Vec<String> = [cost, rounds, batch, cores]
        .iter()
        .map(usize::to_string)
        .collect();
    args.extend(MEMORY_SIZES_MB.iter().map(u64::to_string));
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
    let workers: Vec<(u64, usize)> = out["workers_by_memory_mb"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| Some((p[0].as_u64()?, usize::try_from(p[1].as_u64()?).ok()?)))
        .collect();
    if pairs.len() != rounds || scaling.len() != cores || workers.len() != MEMORY_SIZES_MB.len() {
        return Err(format!("lab_bcrypt answered incompletely: {out}"));
    }
    let share = CpuShare {
        mb_per_vcpu: out["mb_per_vcpu"].as_f64().ok_or("no mb_per_vcpu")?,
        max_vcpus: out["max_vcpus"].as_f64().ok_or("no max_vcpus")?,
    };
    let measured: Vec<f64> = scaling.iter().map(|s| s.1).collect();
    Ok(Bcrypt {
        cost: u32::try_from(cost).map_err(|e| e.to_string())?,
        batch,
        ours_ms: median(pairs.iter().map(|p| p.0).collect()),
        crypt3_ms: median(pairs.iter().map(|p| p.1).collect()),
        ratio: median(pairs.iter().map(|p| p.0 / p.1).collect()),
        rounds,
        power: power::rows(share, &workers, &measured)?,
        scaling,
    })
}

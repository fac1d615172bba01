//! The bcrypt section's figures: every candidate side by side on one thread
//! (libxcrypt's `crypt(3)`, the `bcrypt` crate, `bcrypt-rust`, this
//! function's EksBlowfish at 1 to 8 lanes), one hash at a time and in a batch;
//! and the scaling of the function's own batch path over 1..=cores threads,
//! from the raw times of [`crate::side_by_side`].

use crate::side_by_side;
use lab_probes::stats::median;
use serde_json::Value;

/// The bcrypt cost of the full lab's batch (the power tuning's too).
pub const COST: u32 = 10;
/// Hashes in the full lab's batch (the power tuning's too).
pub const BATCH: usize = 24;
/// Rounds of the full lab's side-by-side comparison.
pub const ROUNDS: usize = 5;

/// A time and how it compares, medians over the rounds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Figure {
    /// Thread CPU ms per hash.
    pub ms: f64,
    /// The median of the per-round ratios to the reference (see its use).
    pub ratio: f64,
}

/// One candidate's row.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    pub name: String,
    /// Hashes it runs at once on one thread.
    pub lanes: usize,
    /// One hash at a time; `ratio` is its time over libxcrypt's.
    pub single: Option<Figure>,
    /// The batch on one thread; `ratio` is its speedup over the `bcrypt` crate.
    pub batch: Option<Figure>,
}

/// What the bcrypt section measured.
#[derive(Debug, Clone, PartialEq)]
pub struct Bcrypt {
    pub cost: u32,
    pub batch: usize,
    pub rounds: usize,
    /// libxcrypt, the `bcrypt` crate, `bcrypt-rust`, this function's core
    /// (with the lanes it ships).
    pub candidates: Vec<Candidate>,
    /// This function's core in the batch at each lane count measured.
    pub lane_curve: Vec<(usize, Figure)>,
    /// The lanes the function runs (x86-64: 6, arm64: 4).
    pub shipped_lanes: usize,
    /// Candidates whose hashes differ from the `bcrypt` crate's.
    pub differing: Vec<String>,
    /// (threads, seconds for the batch through the function's `hash_all`), 1..=cores.
    pub scaling: Vec<(usize, f64)>,
}

/// Measure at full scale or small (`full` false), on pools of up to `cores` threads.
pub fn measure(full: bool, cores: usize) -> Result<Bcrypt, String> {
    // Small: every lane count still gets a full group (8 lanes).
    let (cost, rounds, batch) = if full {
        (COST, ROUNDS, BATCH)
    } else {
        (4, 2, 8)
    };
    let out = side_by_side::times(cost, rounds, batch, cores)?;
    from_times(&out, rounds, cores).map_err(|e| format!("bcrypt: {e}: {out}"))
}

/// The figures from the raw times (`rounds` values per series, `threads`
/// pool sizes).
fn from_times(out: &Value, rounds: usize, threads: usize) -> Result<Bcrypt, String> {
    let number = |key: &str| {
        out[key]
            .as_u64()
            .and_then(|n| usize::try_from(n).ok())
            .ok_or_else(|| format!("no {key}"))
    };
    let shipped_lanes = number("shipped_lanes")?;
    let single = |candidate: &str| series(&out["single"], candidate, None, rounds);
    let batch = |candidate: &str, lanes| series(&out["batched"], candidate, lanes, rounds);
    let libxcrypt = single("libxcrypt")?;
    let crate_batch = batch("bcrypt", None)?.1;
    // One hash at a time against libxcrypt; the batch against the crate.
    let vs_libxcrypt = |ms: &[f64]| figure(ms, |r| ms[r] / libxcrypt.1[r]);
    let vs_crate = |ms: &[f64]| figure(ms, |r| crate_batch[r] / ms[r]);

    let mut lane_curve = Vec::new();
    for entry in out["batched"].as_array().into_iter().flatten() {
        if entry["candidate"] == "own" {
            let lanes = entry["lanes"]
                .as_u64()
                .and_then(|n| usize::try_from(n).ok());
            let (lanes, ms) = batch("own", lanes)?;
            lane_curve.push((lanes, vs_crate(&ms)));
        }
    }
    lane_curve.sort_by_key(|&(lanes, _)| lanes);
    let own_batch = lane_curve
        .iter()
        .find(|(lanes, _)| *lanes == shipped_lanes)
        .map(|&(_, f)| f)
        .ok_or(format!(
            "no batch of the core with its {shipped_lanes} lanes"
        ))?;
    let (rust_lanes, rust_batch) = batch("bcrypt-rust", None)?;
    let backend = out["bcrypt_rust_backend"].as_str().unwrap_or("unknown");
    let candidates = vec![
        Candidate {
            name: "libxcrypt `crypt(3)`".into(),
            lanes: 1,
            single: Some(vs_libxcrypt(&libxcrypt.1)),
            batch: None,
        },
        Candidate {
            name: "`bcrypt` crate".into(),
            lanes: 1,
            single: Some(vs_libxcrypt(&single("bcrypt")?.1)),
            batch: Some(vs_crate(&crate_batch)),
        },
        Candidate {
            name: format!("`bcrypt-rust` ({backend} backend)"),
            lanes: rust_lanes,
            single: Some(vs_libxcrypt(&single("bcrypt-rust")?.1)),
            batch: Some(vs_crate(&rust_batch)),
        },
        Candidate {
            name: "this function's EksBlowfish".into(),
            lanes: shipped_lanes,
            single: Some(vs_libxcrypt(&single("own")?.1)),
            batch: Some(own_batch),
        },
    ];
    let scaling = scaling(out, threads)?;
    Ok(Bcrypt {
        cost: u32::try_from(number("cost")?).map_err(|e| e.to_string())?,
        batch: number("batch")?,
        rounds,
        candidates,
        lane_curve,
        shipped_lanes,
        differing: differing(out)?,
        scaling,
    })
}

/// (threads, seconds) of the function's batch path at each of the `threads`
/// pool sizes, each time finite and more than 0.
fn scaling(out: &Value, threads: usize) -> Result<Vec<(usize, f64)>, String> {
    let scaling: Vec<(usize, f64)> = out["threads_seconds"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| Some((usize::try_from(p[0].as_u64()?).ok()?, p[1].as_f64()?)))
        .filter(|(_, seconds)| seconds.is_finite() && *seconds > 0.0)
        .collect();
    if scaling.len() != threads {
        return Err(format!("not {threads} pool sizes in threads_seconds"));
    }
    Ok(scaling)
}

/// The candidates whose hashes differ from the `bcrypt` crate's.
fn differing(out: &Value) -> Result<Vec<String>, String> {
    Ok(out["differing"]
        .as_array()
        .ok_or("no differing")?
        .iter()
        .map(|d| d.as_str().unwrap_or("?").to_owned())
        .collect())
}

/// The lanes and the per-round ms of `candidate` in `list` (with `lanes`, if
/// given): `rounds` times, each finite and more than 0.
fn series(
    list: &Value,
    candidate: &str,
    lanes: Option<usize>,
    rounds: usize,
) -> Result<(usize, Vec<f64>), String> {
    let what = match lanes {
        Some(lanes) => format!("{candidate} with {lanes} lanes"),
        None => candidate.to_owned(),
    };
    let entry = list
        .as_array()
        .into_iter()
        .flatten()
        .find(|e| {
            e["candidate"] == candidate
                && lanes.is_none_or(|l| e["lanes"].as_u64() == u64::try_from(l).ok())
        })
        .ok_or(format!("no times of {what}"))?;
    let ms: Vec<f64> = entry["ms"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_f64)
        .filter(|ms| ms.is_finite() && *ms > 0.0)
        .collect();
    if ms.len() != rounds {
        return Err(format!("not {rounds} positive times of {what}"));
    }
    let lanes = entry["lanes"]
        .as_u64()
        .and_then(|n| usize::try_from(n).ok())
        .unwrap_or(1);
    Ok((lanes, ms))
}

/// The median of `ms` and of `ratio` over its rounds.
fn figure(ms: &[f64], ratio: impl Fn(usize) -> f64) -> Figure {
    Figure {
        ms: median(ms.to_vec()),
        ratio: median((0..ms.len()).map(ratio).collect()),
    }
}

/// The property the lab checks: every candidate computes the `bcrypt`
/// crate's hashes.
pub fn check_agreement(bcrypt: &Bcrypt) -> Result<(), String> {
    if bcrypt.differing.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "bcrypt: the hashes of {} differ from the bcrypt crate's",
            bcrypt.differing.join(", ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Raw times of two rounds in which every candidate took the same
    /// time in both, except libxcrypt and the 6-lane batch.
    fn answer() -> Value {
        json!({
            "cost": 4, "batch": 12, "rounds": 2, "shipped_lanes": 6,
            "bcrypt_rust_backend": "avx2",
            "differing": [],
            "single": [
                {"candidate": "libxcrypt", "ms": [10.0, 20.0]},
                {"candidate": "bcrypt", "ms": [12.0, 12.0]},
                {"candidate": "bcrypt-rust", "ms": [10.0, 10.0]},
                {"candidate": "own", "ms": [11.0, 11.0]}
            ],
            "batched": [
                {"candidate": "bcrypt", "lanes": 1, "ms": [12.0, 12.0]},
                {"candidate": "bcrypt-rust", "lanes": 8, "ms": [6.0, 6.0]},
                {"candidate": "own", "lanes": 2, "ms": [6.0, 6.0]},
                {"candidate": "own", "lanes": 1, "ms": [12.0, 12.0]},
                {"candidate": "own", "lanes": 6, "ms": [3.0, 2.0]}
            ],
            "threads_seconds": [[1, 0.5], [2, 0.25]]
        })
    }

    #[test]
    fn the_raw_times_become_one_row_per_candidate_and_a_lane_curve() {
        let b = from_times(&answer(), 2, 2).expect("complete");
        let names: Vec<&str> = b.candidates.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names.len(), 4, "{names:?}");
        assert!(names[0].contains("libxcrypt") && names[1].contains("`bcrypt` crate"));
        assert!(names[2].contains("bcrypt-rust") && names[2].contains("avx2"));
        assert!(names[3].contains("EksBlowfish"));
        let lanes: Vec<usize> = b.candidates.iter().map(|c| c.lanes).collect();
        assert_eq!(lanes, [1, 1, 8, 6]);
        let libxcrypt = &b.candidates[0];
        assert_eq!(libxcrypt.single.map(|f| f.ratio), Some(1.0));
        assert_eq!(libxcrypt.batch, None);
        // Ratios are medians of per-round ratios (12/10 and 12/20: the
        // upper one of two), not ratios of medians.
        let crate_single = b.candidates[1].single.expect("timed");
        assert_eq!(crate_single.ratio, 1.2);
        assert_eq!(b.candidates[1].batch.map(|f| f.ratio), Some(1.0));
        let own = &b.candidates[3];
        assert_eq!(
            own.batch,
            Some(Figure {
                ms: 3.0,
                ratio: 6.0
            })
        );
        assert_eq!(
            b.lane_curve,
            [
                (
                    1,
                    Figure {
                        ms: 12.0,
                        ratio: 1.0
                    }
                ),
                (
                    2,
                    Figure {
                        ms: 6.0,
                        ratio: 2.0
                    }
                ),
                (
                    6,
                    Figure {
                        ms: 3.0,
                        ratio: 6.0
                    }
                ),
            ]
        );
        assert_eq!(b.scaling, [(1, 0.5), (2, 0.25)]);
        assert_eq!((b.cost, b.batch, b.rounds, b.shipped_lanes), (4, 12, 2, 6));
        assert_eq!(check_agreement(&b), Ok(()));
    }

    #[test]
    fn an_incomplete_or_broken_answer_is_an_error_naming_what_is_missing() {
        let mut short = answer();
        short["single"][1]["ms"] = json!([12.0]);
        assert!(from_times(&short, 2, 2).unwrap_err().contains("bcrypt"));
        let mut zero = answer();
        zero["batched"][0]["ms"] = json!([0.0, 12.0]);
        assert!(from_times(&zero, 2, 2).is_err());
        let mut no_shipped = answer();
        no_shipped["shipped_lanes"] = json!(4);
        assert!(
            from_times(&no_shipped, 2, 2)
                .unwrap_err()
                .contains("4 lanes")
        );
        assert!(from_times(&answer(), 2, 3).unwrap_err().contains("threads"));
        assert!(from_times(&json!({}), 2, 2).is_err());
    }

    #[test]
    fn differing_hashes_fail_the_check_and_name_the_candidate() {
        let mut out = answer();
        out["differing"] = json!(["own-3 lanes", "libxcrypt"]);
        let b = from_times(&out, 2, 2).expect("complete");
        let err = check_agreement(&b).unwrap_err();
        assert!(
            err.contains("own-3 lanes") && err.contains("libxcrypt"),
            "{err}"
        );
    }
}

//! Arena pre-warm: a function's first invocation against its later ones (its
//! `prewarm` probe: the Arrow worker's), in time and minor page faults,
//! without and with pre-warming, per allocator. And the property that must
//! hold wherever the template pre-warms: the first invocation after a
//! pre-warm faults a small fraction of the cold one.
//!
//! The `prewarm` probe's contract: `<binary>-prewarm VARIANT quick|full
//! ROUNDS` runs a fresh handler `ROUNDS` times in this process after the
//! VARIANT's pre-warm ([`VARIANTS`]; work and arena sized for the scale) and
//! prints one JSON line: `work` (what each invocation does, for the report),
//! `arena_mib`, and either `refused` (why the template does not pre-warm
//! with this allocator) or `prewarm_ms` and `rounds` (`[ms, minor faults]`
//! per invocation).

use super::probes::Probes;
use super::scale::Scale;
use lab_probes::stats::median;

/// Pre-warming must remove at least this share of first-invocation faults.
pub const MIN_FAULTS_REMOVED: f64 = 0.8;

/// The variants, as the `prewarm` probe names them, with their table names.
pub const VARIANTS: [(&str, &str); 3] = [
    ("off", "no pre-warm"),
    ("shipped", "pre-warm as shipped"),
    ("forced", "pre-warm forced (the template refuses it)"),
];

/// The probe's scale argument, invocations per trial, trials.
fn sizes(scale: Scale) -> (&'static str, usize, usize) {
    match scale {
        Scale::Full => ("full", 6, 3),
        Scale::Quick => ("quick", 2, 1),
    }
}

/// What one function's pre-warm measured.
#[derive(Debug, Clone)]
pub struct Prewarm {
    /// The function's binary.
    pub function: String,
    /// What each invocation does, as its probe says.
    pub work: String,
    pub arena_mib: u64,
    pub rows: Vec<Row>,
}

/// One allocator, one variant.
#[derive(Debug, Clone)]
pub struct Row {
    pub allocator: &'static str,
    pub variant: &'static str,
    pub outcome: Outcome,
}

/// What a variant did.
#[derive(Debug, Clone)]
pub enum Outcome {
    /// The template refuses to pre-warm with this allocator.
    Refused(String),
    Measured {
        /// Median pre-warm time (background, during init), ms.
        prewarm_ms: Option<f64>,
        first_ms: f64,
        steady_ms: f64,
        first_faults: f64,
        steady_faults: f64,
    },
}

/// Run every variant with every allocator built, trials interleaved.
/// 4 KiB pages for mimalloc (`MIMALLOC_ALLOW_THP=0`), so faults count pages.
pub fn measure(
    probes: &Probes,
    function: &str,
    scale: Scale,
    tick: &dyn Fn(&str),
) -> Result<Prewarm, String> {
    let probe = &super::probes::of(function, "prewarm");
    let (scale, rounds, trials) = sizes(scale);
    let variants = &VARIANTS;
    let allocators: Vec<&'static str> = probes.allocators().collect();
    let mut outputs: Vec<Vec<serde_json::Value>> =
        vec![Vec::new(); allocators.len() * variants.len()];
    for _ in 0..trials {
        for (a, allocator) in allocators.iter().enumerate() {
            for (v, (variant, _)) in variants.iter().enumerate() {
                // Forcing is only of interest where the template refuses.
                let refused = outputs[a * variants.len() + 1]
                    .first()
                    .is_some_and(|o| o["refused"].is_string());
                if *variant == "forced" && !refused {
                    continue;
                }
                tick(&format!("pre-warm: {allocator}, {variant}"));
                let args = [variant.to_string(), scale.to_owned(), rounds.to_string()];
                let out = probes.run(allocator, probe, &args, &[("MIMALLOC_ALLOW_THP", "0")])?;
                outputs[a * variants.len() + v].push(out);
            }
        }
    }
    let first = outputs.iter().flatten().next().ok_or("no pre-warm trial")?;
    let work = first["work"].as_str().unwrap_or_default().to_owned();
    let arena_mib = first["arena_mib"].as_u64().unwrap_or(0);
    let mut table = Vec::new();
    for (a, allocator) in allocators.iter().enumerate() {
        for (v, (_, name)) in variants.iter().enumerate() {
            if outputs[a * variants.len() + v].is_empty() {
                continue; // not forced: the template pre-warms this one
            }
            table.push(Row {
                allocator,
                variant: name,
                outcome: summarise(&outputs[a * variants.len() + v])?,
            });
        }
    }
    Ok(Prewarm {
        function: function.to_owned(),
        work,
        arena_mib,
        rows: table,
    })
}

fn summarise(out: &[serde_json::Value]) -> Result<Outcome, String> {
    if let Some(why) = out.first().and_then(|o| o["refused"].as_str()) {
        return Ok(Outcome::Refused(why.to_owned()));
    }
    let rounds: Vec<Vec<(f64, f64)>> = out
        .iter()
        .map(|o| {
            o["rounds"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|r| Some((r[0].as_f64()?, r[1].as_f64()?)))
                .collect::<Vec<_>>()
        })
        .collect();
    if rounds.iter().any(|r| r.len() < 2) {
        return Err(format!(
            "a pre-warm trial reported fewer than 2 invocations: {out:?}"
        ));
    }
    let firsts = |f: fn(&(f64, f64)) -> f64| median(rounds.iter().map(|r| f(&r[0])).collect());
    let laters = |f: fn(&(f64, f64)) -> f64| {
        median(rounds.iter().flat_map(|r| r[1..].iter().map(f)).collect())
    };
    let prewarm: Vec<f64> = out
        .iter()
        .filter_map(|o| o["prewarm_ms"].as_f64())
        .collect();
    Ok(Outcome::Measured {
        prewarm_ms: (!prewarm.is_empty()).then(|| median(prewarm)),
        first_ms: firsts(|r| r.0),
        steady_ms: laters(|r| r.0),
        first_faults: firsts(|r| r.1),
        steady_faults: laters(|r| r.1),
    })
}

/// Err unless, for every allocator the template pre-warms, the shipped
/// pre-warm removes at least [`MIN_FAULTS_REMOVED`] of the cold first
/// invocation's faults.
pub fn check_faults_removed(table: &[Row]) -> Result<usize, String> {
    let first_faults = |allocator: &str, variant: &str| {
        table.iter().find_map(|r| match r.outcome {
            Outcome::Measured { first_faults, .. }
                if r.allocator == allocator && r.variant == variant =>
            {
                Some(first_faults)
            }
            _ => None,
        })
    };
    let mut checked = 0;
    for row in table.iter().filter(|r| r.variant == VARIANTS[1].1) {
        let (Some(cold), Some(warm)) = (
            first_faults(row.allocator, VARIANTS[0].1),
            first_faults(row.allocator, VARIANTS[1].1),
        ) else {
            continue; // refused: nothing promised
        };
        checked += 1;
        if cold <= 0.0 || warm > cold * (1.0 - MIN_FAULTS_REMOVED) {
            return Err(format!(
                "{}: pre-warm left {warm:.0} of {cold:.0} first-invocation faults (must remove {:.0}%)",
                row.allocator,
                MIN_FAULTS_REMOVED * 100.0
            ));
        }
    }
    Ok(checked)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused_row() -> Row {
        Row {
            allocator: "jemalloc",
            variant: VARIANTS[1].1,
            outcome: Outcome::Refused("no".into()),
        }
    }

    fn measured(allocator: &'static str, variant: &'static str, first_faults: f64) -> Row {
        Row {
            allocator,
            variant,
            outcome: Outcome::Measured {
                prewarm_ms: None,
                first_ms: 1.0,
                steady_ms: 1.0,
                first_faults,
                steady_faults: 0.0,
            },
        }
    }

    #[test]
    fn pre_warm_must_remove_most_faults_where_it_is_shipped() {
        let (off, shipped) = (VARIANTS[0].1, VARIANTS[1].1);
        let refused = refused_row();
        let good = [
            measured("mimalloc", off, 1500.0),
            measured("mimalloc", shipped, 115.0),
            refused,
        ];
        assert_eq!(check_faults_removed(&good), Ok(1));
        let bad = [
            measured("mimalloc", off, 1500.0),
            measured("mimalloc", shipped, 900.0),
        ];
        assert!(check_faults_removed(&bad).is_err());
        // The template pre-warms with none of them (mimalloc 2): nothing to
        // check, and the caller says so.
        assert_eq!(check_faults_removed(&[refused_row()]), Ok(0));
    }

    #[test]
    fn medians_of_first_and_later_invocations() {
        let out = [
            serde_json::json!({"prewarm_ms": 10.0, "rounds": [[100.0, 50], [10.0, 1], [12.0, 3]]}),
            serde_json::json!({"prewarm_ms": 30.0, "rounds": [[80.0, 70], [11.0, 2], [9.0, 0]]}),
            serde_json::json!({"prewarm_ms": 20.0, "rounds": [[90.0, 60], [10.5, 1], [10.0, 1]]}),
        ];
        let Outcome::Measured {
            prewarm_ms,
            first_ms,
            steady_ms,
            first_faults,
            steady_faults,
        } = summarise(&out).expect("summary")
        else {
            panic!("measured expected");
        };
        assert_eq!(
            (prewarm_ms, first_ms, first_faults),
            (Some(20.0), 90.0, 60.0)
        );
        assert_eq!((steady_ms, steady_faults), (10.5, 1.0));
    }
}

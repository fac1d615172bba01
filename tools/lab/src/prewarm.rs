//! Arena pre-warm: the Arrow worker's first invocation against its later ones,
//! in time and minor page faults, without and with pre-warming, per allocator.
//! And the property that must hold wherever the template pre-warms: the first
//! invocation after a pre-warm faults a small fraction of the cold one.

use super::probes::Probes;
use super::scale::Scale;
use super::stats::median;

/// Pre-warming must remove at least this share of first-invocation faults.
pub const MIN_FAULTS_REMOVED: f64 = 0.8;

/// The variants, as the `prewarm` probe names them, with their table names.
pub const VARIANTS: [(&str, &str); 3] = [
    ("off", "no pre-warm"),
    ("shipped", "pre-warm as shipped"),
    ("forced", "pre-warm forced (the template refuses it)"),
];

/// Rows, arena MiB, invocations per trial, trials, variants.
fn sizes(
    scale: Scale,
) -> (
    usize,
    usize,
    usize,
    usize,
    &'static [(&'static str, &'static str)],
) {
    match scale {
        Scale::Full => (300_000, 256, 6, 3, &VARIANTS),
        // 64 MiB: grouping 20,000 orders by customer with money per currency
        // (about 7,500 per-currency entries) leaves about half of its first
        // faults with a 32 MiB arena; from 64 MiB on, about an eighth.
        Scale::Quick => (20_000, 64, 2, 1, &VARIANTS),
    }
}

/// Rows of the trial, for the report.
pub fn rows(scale: Scale) -> (usize, usize) {
    let (rows, arena_mib, ..) = sizes(scale);
    (rows, arena_mib)
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
    probe: &str,
    scale: Scale,
    tick: &dyn Fn(&str),
) -> Result<Vec<Row>, String> {
    let (rows, arena_mib, rounds, trials, variants) = sizes(scale);
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
                let args = [
                    variant.to_string(),
                    rows.to_string(),
                    arena_mib.to_string(),
                    rounds.to_string(),
                ];
                let out = probes.run(allocator, probe, &args, &[("MIMALLOC_ALLOW_THP", "0")])?;
                outputs[a * variants.len() + v].push(out);
            }
        }
    }
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
    Ok(table)
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

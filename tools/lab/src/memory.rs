//! The allocator matrix: a function's real handler (its `memory` probe: the
//! order processor's) under a burst and under low traffic, RSS after
//! invocations and records per second, for each allocator and policy. And the
//! property every configuration must keep: memory stays bounded.
//!
//! The `memory` probe's contract: `<binary>-memory POLICY CAPACITY PHASE...`
//! applies the allocator policy (`template`: `MEMORY_RETURN` as the template
//! sets it; `library-defaults`), bounds what its handler keeps between
//! invocations to CAPACITY entries, runs each phase
//! (`INVOCATIONSxRECORDS@GAP_MS`: invocations of that many distinct records,
//! that far apart) and prints one JSON line: `handler` (what runs, for the
//! report), `settings`, `records`, `failed`, `busy_seconds` (handler time),
//! `kept` (entries kept at the end), `peak_rss_mib` and `rss_mib`
//! (`[invocation, MiB]` pairs).

use super::probes::{self, Probes};
use super::scale::Scale;
use lab_probes::stats::median;
use local_stack::template::Function;

/// Most RSS growth allowed once warm (what the handler keeps full), in MiB.
pub const GROWTH_BOUND_MIB: f64 = 4.0;
/// Records per invocation in a burst (SQS's default batch size).
const BATCH: u64 = 10;

/// An allocator and what the template does with it.
#[derive(Debug, Clone, Copy)]
pub struct Setup {
    /// Legend and table name.
    pub label: &'static str,
    /// Cargo feature.
    pub allocator: &'static str,
    /// `template` (MEMORY_RETURN=prompt applied) or `library-defaults`.
    pub policy: &'static str,
}

/// The configurations compared: every allocator as the template configures
/// it, mimalloc also as the library ships it, and mimalloc 3.3 beside the
/// shipped 2.x.
pub const SETUPS: [Setup; 6] = [
    Setup {
        label: "system (glibc)",
        allocator: "system",
        policy: "template",
    },
    Setup {
        label: "mimalloc, library defaults",
        allocator: "mimalloc",
        policy: "library-defaults",
    },
    Setup {
        label: "mimalloc + template policy (shipped)",
        allocator: "mimalloc",
        policy: "template",
    },
    Setup {
        label: "mimalloc 3.3 + template policy (not shipped)",
        allocator: super::probes::MIMALLOC_3,
        policy: "template",
    },
    Setup {
        label: "jemalloc",
        allocator: "jemalloc",
        policy: "template",
    },
    Setup {
        label: "snmalloc",
        allocator: "snmalloc",
        policy: "template",
    },
];

/// A traffic pattern.
#[derive(Debug, Clone)]
pub struct Pattern {
    /// Name in tables.
    pub name: &'static str,
    /// Plot file stem.
    pub file: &'static str,
    /// What it stands for.
    pub description: String,
    /// Probe phases (`INVOCATIONSxRECORDS@GAP_MS`).
    pub phases: Vec<String>,
    /// Invocations of the first phase (the spike, for low traffic).
    pub first_phase: u64,
    /// The most entries the handler may keep between invocations.
    pub capacity: u64,
}

/// The two patterns at `scale`.
pub fn patterns(scale: Scale) -> [Pattern; 2] {
    let (burst, spike, quiet, gap_ms, capacity) = match scale {
        Scale::Full => (10_000, 100, 200, 100, 10_000),
        Scale::Quick => (400, 50, 20, 20, 1_000),
    };
    [
        Pattern {
            name: "burst",
            file: "rss-burst",
            description: format!(
                "{burst} invocations of {BATCH} distinct records back to back ({} records; capacity {capacity} kept)",
                burst * BATCH
            ),
            phases: vec![format!("{burst}x{BATCH}@0")],
            first_phase: burst,
            capacity,
        },
        Pattern {
            name: "low traffic",
            file: "rss-low-traffic",
            description: format!(
                "a spike of {spike} invocations of {BATCH} records, then {quiet} invocations of one record {gap_ms} ms apart"
            ),
            phases: vec![format!("{spike}x{BATCH}@0"), format!("{quiet}x1@{gap_ms}")],
            first_phase: spike,
            capacity,
        },
    ]
}

/// One configuration under one pattern.
#[derive(Debug, Clone)]
pub struct Run {
    /// The function's binary.
    pub function: String,
    /// What runs, as its probe says.
    pub handler: String,
    pub setup: Setup,
    /// The allocator settings the probe applied, as it reported them.
    pub settings: String,
    /// (invocation, RSS MiB), from the first trial.
    pub rss: Vec<(f64, f64)>,
    /// Median records per second of handler time over the trials.
    pub records_per_s: f64,
    pub peak_mib: f64,
    /// RSS growth the bound applies to (see [`growth`]).
    pub growth_mib: f64,
}

/// Run every configuration built in `probes` under `pattern`, `trials`
/// times each, interleaved (so drift hits all alike). `tick` after each run.
pub fn measure(
    probes: &Probes,
    function: &Function,
    pattern: &Pattern,
    trials: usize,
    tick: &dyn Fn(&str),
) -> Result<Vec<Run>, String> {
    let setups: Vec<Setup> = SETUPS
        .into_iter()
        .filter(|s| probes.allocators().any(|a| a == s.allocator))
        .collect();
    let mut outputs: Vec<Vec<serde_json::Value>> = vec![Vec::new(); setups.len()];
    let env = super::plan::settings(function, &[("MEMORY_RETURN", "prompt")]);
    let probe = probes::of(&function.binary, "memory");
    let mut args = Vec::new();
    for _ in 0..trials.max(1) {
        for (setup, out) in setups.iter().zip(&mut outputs) {
            tick(&format!("{}: {}", pattern.name, setup.label));
            args.clear();
            args.push(setup.policy.to_owned());
            args.push(pattern.capacity.to_string());
            args.extend(pattern.phases.iter().cloned());
            let mut run_env = env.to_vec();
            if setup.policy == "library-defaults" {
                // The library's own default; the template's is set before `main`.
                run_env.push(("MIMALLOC_ALLOW_THP", "1"));
            }
            out.push(probes.run(setup.allocator, &probe, &args, &run_env)?);
        }
    }
    setups
        .iter()
        .zip(outputs)
        .map(|(setup, out)| summarise(&function.binary, *setup, pattern, &out))
        .collect()
}

fn summarise(
    function: &str,
    setup: Setup,
    pattern: &Pattern,
    out: &[serde_json::Value],
) -> Result<Run, String> {
    let first = out.first().ok_or("no trial")?;
    let failed = first["failed"].as_u64().unwrap_or(u64::MAX);
    if failed != 0 {
        return Err(format!("{}: {failed} valid record(s) failed", setup.label));
    }
    let rss: Vec<(f64, f64)> = first["rss_mib"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| Some((p[0].as_f64()?, p[1].as_f64()?)))
        .collect();
    let rates = out
        .iter()
        .map(|o| {
            let records = o["records"].as_f64().unwrap_or(0.0);
            let busy = o["busy_seconds"].as_f64().unwrap_or(0.0);
            if busy > 0.0 { records / busy } else { 0.0 }
        })
        .collect();
    let kept = first["kept"].as_u64().unwrap_or(u64::MAX);
    if kept > pattern.capacity {
        return Err(format!(
            "{}: the handler keeps {kept} entries, capacity {}",
            setup.label, pattern.capacity
        ));
    }
    Ok(Run {
        function: function.to_owned(),
        handler: first["handler"].as_str().unwrap_or_default().to_owned(),
        setup,
        settings: first["settings"].as_str().unwrap_or_default().to_owned(),
        growth_mib: growth(pattern, &rss)?,
        rss,
        records_per_s: median(rates),
        peak_mib: first["peak_rss_mib"].as_f64().unwrap_or(0.0),
    })
}

/// The RSS growth that must stay under [`GROWTH_BOUND_MIB`]:
/// - burst: the highest RSS after warm-up (twice the invocations that fill
///   what the handler keeps) above the RSS at warm-up;
/// - low traffic: the highest RSS of the quiet phase above the highest of the
///   spike (memory must not grow while traffic is low).
pub fn growth(pattern: &Pattern, rss: &[(f64, f64)]) -> Result<f64, String> {
    let split = if pattern.phases.len() > 1 {
        pattern.first_phase as f64
    } else {
        (2 * pattern.capacity.div_ceil(BATCH)) as f64
    };
    let before: Vec<f64> = rss
        .iter()
        .filter(|(i, _)| *i <= split)
        .map(|p| p.1)
        .collect();
    let after: Vec<f64> = rss
        .iter()
        .filter(|(i, _)| *i > split)
        .map(|p| p.1)
        .collect();
    let reference = if pattern.phases.len() > 1 {
        before.iter().copied().fold(f64::NEG_INFINITY, f64::max)
    } else {
        before.last().copied().unwrap_or(f64::NEG_INFINITY)
    };
    let highest_after = after.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if !reference.is_finite() || !highest_after.is_finite() {
        return Err(format!(
            "{}: too few RSS samples to judge growth ({} in all)",
            pattern.name,
            rss.len()
        ));
    }
    Ok((highest_after - reference).max(0.0))
}

/// Err naming every run whose memory grew past the bound.
pub fn check_bounded(pattern: &Pattern, runs: &[Run]) -> Result<(), String> {
    let over: Vec<String> = runs
        .iter()
        .filter(|r| r.growth_mib > GROWTH_BOUND_MIB)
        .map(|r| format!("{} grew {:.1} MiB", r.setup.label, r.growth_mib))
        .collect();
    if over.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{}: memory not bounded (limit {GROWTH_BOUND_MIB} MiB after warm-up): {}",
            pattern.name,
            over.join("; ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn burst_growth_is_measured_after_warm_up() {
        let [burst, _] = patterns(Scale::Quick); // capacity 1,000: warm after 200
        let flat = [(100.0, 8.0), (200.0, 10.0), (300.0, 10.5), (400.0, 10.2)];
        assert_eq!(growth(&burst, &flat).expect("growth"), 0.5);
        let leaking = [(200.0, 10.0), (300.0, 13.0), (400.0, 16.0)];
        assert_eq!(growth(&burst, &leaking).expect("growth"), 6.0);
        assert!(
            growth(&burst, &[(100.0, 1.0)]).is_err(),
            "no sample after warm-up"
        );
    }

    #[test]
    fn low_traffic_growth_compares_the_quiet_phase_with_the_spike() {
        let [_, low] = patterns(Scale::Quick); // spike of 50
        let returned = [(25.0, 12.0), (50.0, 11.0), (60.0, 9.0), (70.0, 9.0)];
        assert_eq!(growth(&low, &returned).expect("growth"), 0.0);
        let growing = [(50.0, 11.0), (60.0, 14.0), (70.0, 17.5)];
        assert_eq!(growth(&low, &growing).expect("growth"), 6.5);
    }

    #[test]
    fn the_check_names_what_grew() {
        let [burst, _] = patterns(Scale::Quick);
        let run = |growth_mib| Run {
            function: "f".into(),
            handler: String::new(),
            setup: SETUPS[0],
            settings: String::new(),
            rss: Vec::new(),
            records_per_s: 0.0,
            peak_mib: 0.0,
            growth_mib,
        };
        assert!(check_bounded(&burst, &[run(1.0)]).is_ok());
        let error = check_bounded(&burst, &[run(1.0), run(5.0)]).expect_err("over the bound");
        assert!(error.contains("system (glibc) grew 5.0 MiB"), "{error}");
    }
}

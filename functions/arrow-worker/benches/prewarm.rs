//! First invocation vs steady state of the Arrow worker, with and without the
//! cold-start pre-warm, as time and minor page faults, measured in one run.
//!
//! `cargo bench -p arrow-worker --bench prewarm`
//!
//! Each trial is a fresh process (this binary re-run with `TRIAL_CHILD`): cold
//! start as the function does it with `MEMORY_RETURN=keep`, then invocations
//! grouping the orders by customer. Variants alternate, three trials each, and
//! the medians are reported; "steady" is the median of invocations 2 to 6.
//! Every variant runs twice: with transparent huge pages allowed (mimalloc's
//! default) and with 4 KiB pages only.
//! The goal: with pre-warming the first invocation takes at most 1.2x steady.

use arrow_worker::trial::ArenaPrewarm;
use std::process::Command;
use std::time::Duration;

const ROWS: usize = 300_000;
const ARENA: usize = 256 << 20;
const ROUNDS: usize = 6;
const TRIALS: usize = 3;

/// How the kernel maps pages: mimalloc's default lets it use transparent huge
/// pages (one fault per 2 MiB where the kernel allows), `MIMALLOC_ALLOW_THP=0`
/// keeps 4 KiB pages (one fault per page, as on a host without THP).
const PAGES: [(&str, Option<&str>); 2] = [("THP allowed", None), ("4 KiB", Some("0"))];

/// (name, arena bytes, code warm-up)
const VARIANTS: [(&str, usize, bool); 3] = [
    ("no pre-warm", 0, false),
    ("code warm-up only", 0, true),
    ("arena + code warm-up (shipped)", ARENA, true),
];

fn child(variant: usize) {
    let (_, bytes, code) = VARIANTS[variant];
    let arena = if bytes > 0 {
        ArenaPrewarm::Shipped(bytes)
    } else {
        ArenaPrewarm::Off
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let trial = runtime
        .block_on(arrow_worker::trial::run(ROWS, arena, code, ROUNDS))
        .expect("trial");
    let rounds: Vec<String> = trial
        .rounds
        .iter()
        .map(|r| format!("{}:{}", r.took.as_nanos(), r.minor_faults))
        .collect();
    let prewarm = trial.prewarm.map_or(0, |d| d.as_nanos());
    println!("TRIAL={prewarm};{}", rounds.join(","));
}

struct Measured {
    prewarm: Duration,
    rounds: Vec<(Duration, u64)>,
}

fn run_child(variant: usize, thp: Option<&str>) -> Measured {
    let mut command = Command::new(std::env::current_exe().expect("bench binary"));
    command.env("TRIAL_CHILD", variant.to_string());
    match thp {
        Some(value) => command.env("MIMALLOC_ALLOW_THP", value),
        None => command.env_remove("MIMALLOC_ALLOW_THP"),
    };
    let output = command.output().expect("child");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("TRIAL="))
        .unwrap_or_else(|| panic!("no TRIAL line in {stdout}"));
    let (prewarm, rounds) = line.split_once(';').expect("two parts");
    let number = |s: &str| s.parse::<u64>().expect("number");
    Measured {
        prewarm: Duration::from_nanos(number(prewarm)),
        rounds: rounds
            .split(',')
            .map(|r| {
                let (ns, faults) = r.split_once(':').expect("pair");
                (Duration::from_nanos(number(ns)), number(faults))
            })
            .collect(),
    }
}

fn median<T: Copy + Ord>(mut values: Vec<T>) -> T {
    values.sort_unstable();
    values[values.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn main() {
    if let Ok(variant) = std::env::var("TRIAL_CHILD") {
        child(variant.parse().expect("variant index"));
        return;
    }
    // trials[pages][variant]: every combination alternates within each trial.
    let mut trials: Vec<Vec<Vec<Measured>>> = PAGES
        .iter()
        .map(|_| VARIANTS.iter().map(|_| Vec::new()).collect())
        .collect();
    for _ in 0..TRIALS {
        for (per_pages, (_, thp)) in trials.iter_mut().zip(PAGES) {
            for (i, per_variant) in per_pages.iter_mut().enumerate() {
                per_variant.push(run_child(i, thp));
            }
        }
    }
    println!(
        "Arrow worker, {ROWS} orders grouped by customer, {} allocator, MEMORY_RETURN=keep, arena {} MiB; median of {TRIALS} fresh processes per row",
        shared::allocator::NAME,
        ARENA >> 20
    );
    println!();
    println!(
        "| pages | variant | pre-warm (background) | first ms | steady ms | first / steady | first faults | steady faults |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|");
    for ((pages, _), per_pages) in PAGES.iter().zip(&trials) {
        for ((name, ..), measured) in VARIANTS.iter().zip(per_pages) {
            let first = median(measured.iter().map(|m| m.rounds[0].0).collect());
            let first_faults = median(measured.iter().map(|m| m.rounds[0].1).collect());
            let steady = median(
                measured
                    .iter()
                    .flat_map(|m| m.rounds[1..].iter().map(|r| r.0))
                    .collect(),
            );
            let steady_faults = median(
                measured
                    .iter()
                    .flat_map(|m| m.rounds[1..].iter().map(|r| r.1))
                    .collect(),
            );
            let prewarm = median(measured.iter().map(|m| m.prewarm).collect());
            println!(
                "| {pages} | {name} | {:.0} ms | {:.1} | {:.1} | {:.2} | {first_faults} | {steady_faults} |",
                ms(prewarm),
                ms(first),
                ms(steady),
                first.as_secs_f64() / steady.as_secs_f64()
            );
        }
    }
}

//! `BENCHMARKS.md` and its plots, written from one lab run's measurements.

mod bcrypt;
mod cold_start;
mod concurrency;
mod fan_out;
mod first_invocation;
mod power;
mod splice;

pub use bcrypt::{rewritable as bcrypt_rewritable, rewrite as rewrite_bcrypt};
pub use cold_start::{rewritable as cold_start_rewritable, rewrite as rewrite_cold_start};
pub use concurrency::{
    Measurement as ConcurrencyMeasurement, rewritable as concurrency_rewritable,
    rewrite as rewrite_concurrency,
};
pub use fan_out::{FanOut, rewritable as fan_out_rewritable, rewrite as rewrite_fan_out};
pub use first_invocation::{
    rewritable as first_invocation_rewritable, rewrite as rewrite_first_invocation,
};
pub use power::{Tuning, rewritable as power_rewritable, rewrite as rewrite_power};

use super::memory::{GROWTH_BOUND_MIB, Pattern, Run};
use super::plot::{self, Chart, Kind, Series};
use super::prewarm::{self, Outcome};
use super::run::Results;
use super::scale::Scale;
use std::fmt::Write as _;
use std::path::Path;

/// The plots, relative to the report.
const PLOTS: &str = "tools/lab/plots";

/// Write the report as `dir/BENCHMARKS.md` and its plots under `dir/tools/lab/plots/`.
pub fn write(dir: &Path, results: &Results) -> Result<(), String> {
    let mut md = String::new();
    let m = &results.machine;
    let command = match results.scale {
        Scale::Full => "cargo xtask lab",
        Scale::Quick => "cargo xtask lab --quick",
    };
    let _ = writeln!(md, "# Benchmarks\n");
    let _ = writeln!(
        md,
        "Written by `{command}` (do not edit: run it again). Machine: {}.\n",
        m.line()
    );
    let _ = writeln!(
        md,
        "Absolute times drift on shared machines; what to compare are the ratios, measured side by side \
         in one run (alternating, medians). The probes are `tools/lab/probes/examples/lab_*.rs`: the functions' \
         real code, built once per allocator with the `lab` profile (release optimisation, no fat LTO).\n"
    );
    summary(&mut md, results);

    let _ = writeln!(
        md,
        "## 1. Allocators: RSS and throughput of the order processor\n"
    );
    let _ = writeln!(
        md,
        "The real handler (validation, idempotency cache, partial batch failures) with a store that keeps \
         nothing, on a multi-thread tokio runtime as in the function. Every allocator runs as the template \
         configures it (`MEMORY_RETURN=prompt`, see `shared/src/allocator/`), mimalloc also with its library \
         defaults. RSS is sampled after invocations; records per second count handler time only. \
         \"Growth\" is the RSS gained after warm-up (burst: after twice the invocations that fill the cache; \
         low traffic: the quiet phase above the spike); it must stay under {GROWTH_BOUND_MIB} MiB.\n"
    );
    for (pattern, runs) in &results.memory {
        memory_section(&mut md, dir, pattern, runs)?;
    }

    md.push_str(&bcrypt::section(dir, &results.bcrypt, &results.machine)?);
    prewarm_section(&mut md, results);
    md.push_str(&cold_start::section(&results.cold_start));
    md.push_str(&power::section(dir, &results.power, &results.machine)?);
    md.push_str(&fan_out::section(&results.fan_out, &results.machine));
    md.push_str(&first_invocation::section(
        &results.first_invocation,
        &results.machine,
    ));
    md.push_str(&concurrency::section(
        dir,
        &results.concurrency,
        &results.machine,
    )?);
    let path = dir.join("BENCHMARKS.md");
    std::fs::write(&path, md).map_err(|e| format!("{}: {e}", path.display()))
}

/// The shipped configuration's run in `runs`.
fn shipped(runs: &[Run]) -> Option<&Run> {
    runs.iter()
        .find(|r| r.setup.allocator == "mimalloc" && r.setup.policy == "template")
}

fn summary(md: &mut String, results: &Results) {
    let _ = writeln!(md, "## What to pick\n");
    allocator_summary(md, results);
    md.push_str(&power::summary(&results.power));
    prewarm_summary(md, results);
    let _ = writeln!(md);
}

/// Which allocator the template ships and why, in this run's numbers.
fn allocator_summary(md: &mut String, results: &Results) {
    let Some((pattern, runs)) = results.memory.first() else {
        return;
    };
    let Some(ours) = shipped(runs) else {
        return;
    };
    let fastest = runs
        .iter()
        .max_by(|a, b| a.records_per_s.total_cmp(&b.records_per_s))
        .unwrap_or(ours);
    let leanest = runs
        .iter()
        .min_by(|a, b| last_rss(a).total_cmp(&last_rss(b)))
        .unwrap_or(ours);
    let defaults = runs
        .iter()
        .find(|r| r.setup.allocator == "mimalloc" && r.setup.policy != "template");
    let speed = if std::ptr::eq(fastest, ours) {
        format!(
            "the fastest in the {} ({:.0} records/s)",
            pattern.name, ours.records_per_s
        )
    } else {
        format!(
            "{:.0}% of the fastest in the {} ({}, {:.0} records/s)",
            100.0 * ours.records_per_s / fastest.records_per_s.max(f64::MIN_POSITIVE),
            pattern.name,
            fastest.setup.label,
            fastest.records_per_s
        )
    };
    let policy = defaults.map_or(String::new(), |d| {
        format!(
            "; `MEMORY_RETURN=prompt` ended the {} at {:.1} MiB against {:.1} MiB with the library's defaults",
            pattern.name,
            last_rss(ours),
            last_rss(d)
        )
    });
    let _ = writeln!(
        md,
        "- **Allocator**: the template ships mimalloc with `MEMORY_RETURN=prompt` (`keep` for the Arrow \
         worker's arena). In this run it was {speed}{policy}. The least memory: {} ({:.1} MiB, at {:.0}% of \
         mimalloc's throughput): pick `system` where a few MiB matter more than that, e.g. at 128 MB. Every \
         configuration stayed within {GROWTH_BOUND_MIB} MiB after warm-up. mimalloc is also the one allocator \
         with which the arena pre-warm keeps its pages (section 3).",
        leanest.setup.label,
        last_rss(leanest),
        100.0 * leanest.records_per_s / ours.records_per_s.max(f64::MIN_POSITIVE)
    );
}

/// What the pre-warm did where the template uses it.
fn prewarm_summary(md: &mut String, results: &Results) {
    let measured = |variant: &str| {
        results.prewarm.iter().find_map(|r| match r.outcome {
            Outcome::Measured {
                first_ms,
                steady_ms,
                first_faults,
                ..
            } if r.allocator == "mimalloc" && r.variant == variant => {
                Some((first_ms / steady_ms.max(f64::MIN_POSITIVE), first_faults))
            }
            _ => None,
        })
    };
    if let (Some((cold, cold_faults)), Some((warm, warm_faults))) = (
        measured(prewarm::VARIANTS[0].1),
        measured(prewarm::VARIANTS[1].1),
    ) {
        let _ = writeln!(
            md,
            "- **Arena pre-warm** (Arrow worker, mimalloc): first invocation / steady {cold:.2} without, \
             {warm:.2} with; its minor page faults {cold_faults:.0} without, {warm_faults:.0} with."
        );
    }
}

fn last_rss(run: &Run) -> f64 {
    run.rss.last().map_or(0.0, |p| p.1)
}

fn memory_section(
    md: &mut String,
    dir: &Path,
    pattern: &Pattern,
    runs: &[Run],
) -> Result<(), String> {
    let _ = writeln!(md, "### {}: {}\n", pattern.name, pattern.description);
    let _ = writeln!(
        md,
        "| configuration | allocator settings | records/s | RSS at end MiB | peak RSS MiB | growth MiB |\n|---|---|---:|---:|---:|---:|"
    );
    for run in runs {
        let _ = writeln!(
            md,
            "| {} | {} | {:.0} | {:.1} | {:.1} | {:.2} |",
            run.setup.label,
            run.settings.replace('|', "/"),
            run.records_per_s,
            last_rss(run),
            run.peak_mib,
            run.growth_mib
        );
    }
    let series: Vec<Series> = runs
        .iter()
        .map(|r| Series {
            name: r.setup.label.to_owned(),
            points: r.rss.clone(),
            labels: Vec::new(),
        })
        .collect();
    let file = format!("{PLOTS}/{}.svg", pattern.file);
    plot::write_svg(
        &dir.join(&file),
        &Chart {
            title: &format!("Order processor RSS, {}", pattern.name),
            x_label: "invocation",
            y_label: "RSS (MiB)",
            kind: Kind::Lines,
            log_x: false,
            series: &series,
        },
    )?;
    let _ = writeln!(md, "\n![RSS over invocations, {}]({file})\n", pattern.name);
    Ok(())
}

fn prewarm_section(md: &mut String, results: &Results) {
    let (rows, arena_mib) = prewarm::rows(results.scale);
    let _ = writeln!(
        md,
        "## 3. Arena pre-warm: the Arrow worker's first invocation\n"
    );
    let _ = writeln!(
        md,
        "{rows} orders grouped by customer; each row the median of fresh processes (`MEMORY_RETURN=keep`, \
         arena {arena_mib} MiB, 4 KiB pages for mimalloc). \"Steady\" is the median of the later invocations. \
         The template pre-warms only with mimalloc: the others do not reliably reuse pages freed by another \
         thread (\"forced\" shows what pre-warming would give them).\n"
    );
    let _ = writeln!(
        md,
        "| allocator | variant | pre-warm ms (background) | first ms | steady ms | first / steady | first faults | steady faults |\n|---|---|---:|---:|---:|---:|---:|---:|"
    );
    for row in &results.prewarm {
        match &row.outcome {
            Outcome::Refused(why) => {
                let _ = writeln!(
                    md,
                    "| {} | {} | refused: {why} | | | | | |",
                    row.allocator, row.variant
                );
            }
            Outcome::Measured {
                prewarm_ms,
                first_ms,
                steady_ms,
                first_faults,
                steady_faults,
            } => {
                let _ = writeln!(
                    md,
                    "| {} | {} | {} | {first_ms:.1} | {steady_ms:.1} | {:.2} | {first_faults:.0} | {steady_faults:.0} |",
                    row.allocator,
                    row.variant,
                    prewarm_ms.map_or("-".to_owned(), |ms| format!("{ms:.0}")),
                    first_ms / steady_ms.max(f64::MIN_POSITIVE)
                );
            }
        }
    }
    let _ = writeln!(md);
}

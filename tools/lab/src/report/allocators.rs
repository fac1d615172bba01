//! Sections 1 and 2 of `BENCHMARKS.md` (the allocators under the traffic of
//! the first function with a `memory` probe, the arena pre-warm of the first
//! with a `prewarm` probe) and their lines in "What to pick". They sit between markers, so `cargo xtask lab allocators`
//! can replace them in an existing report without running the rest of the lab.

use super::PLOTS;
use crate::machine::Machine;
use crate::memory::{GROWTH_BOUND_MIB, Pattern, Run};
use crate::prewarm::{self, Outcome, Prewarm};
use crate::probes::{MIMALLOC_3, SHIPPED};
use crate::splice::{self, Markers};
use lab_probes::plot::{self, Chart, Kind, Series};
use std::fmt::Write as _;
use std::path::Path;

/// Markers around section 1.
pub const SECTION: Markers = ("<!-- allocators -->", "<!-- /allocators -->");
/// Markers around section 2.
pub const PREWARM: Markers = ("<!-- prewarm -->", "<!-- /prewarm -->");
/// Markers around the allocator's line in "What to pick".
pub const PICK: Markers = ("<!-- allocator-pick -->", "<!-- /allocator-pick -->");
/// Markers around the pre-warm's line in "What to pick".
pub const PREWARM_PICK: Markers = ("<!-- prewarm-pick -->", "<!-- /prewarm-pick -->");
const ALL: [Markers; 4] = [SECTION, PREWARM, PICK, PREWARM_PICK];

/// Section 1, between its markers, with its plots in `dir`.
pub fn section(
    dir: &Path,
    memory: &[(Pattern, Vec<Run>)],
    machine: &Machine,
) -> Result<String, String> {
    let mut md = String::new();
    let _ = writeln!(md, "{}", SECTION.0);
    let first = memory.iter().flat_map(|(_, runs)| runs).next();
    let _ = writeln!(
        md,
        "## 1. Allocators: RSS and throughput of {}\n",
        first.map_or("a function".to_owned(), |run| format!("`{}`", run.function))
    );
    let _ = writeln!(
        md,
        "Measured on {} (`cargo xtask lab allocators` measures sections 1 and 2 again on their own). \
         {}. Every allocator runs as the template \
         configures it (`MEMORY_RETURN=prompt`, see `shared/src/allocator/`), mimalloc also with its library \
         defaults. `mimalloc` is the 2.x the workspace builds; `{MIMALLOC_3}` is the `mimalloc` crate's \
         default build (3.3.2), not shipped for its open crash reports and measured beside it in the same run. \
         RSS is sampled after invocations; records per second count handler time only. \
         \"Growth\" is the RSS gained after warm-up (burst: after twice the invocations that fill the cache; \
         low traffic: the quiet phase above the spike); it must stay under {GROWTH_BOUND_MIB} MiB.\n",
        machine.line(),
        first.map_or("The function's handler", |run| run
            .handler
            .trim_end_matches('.'))
    );
    if memory.is_empty() {
        let _ = writeln!(md, "{}\n", super::not_measured("memory"));
    }
    for (pattern, runs) in memory {
        pattern_section(&mut md, dir, pattern, runs)?;
    }
    let _ = writeln!(md, "{}", SECTION.1);
    Ok(md)
}

/// The report in `dir`, if it has sections 1 and 2 and their lines to replace.
pub fn rewritable(dir: &Path) -> Result<String, String> {
    splice::rewritable(dir, &ALL)
}

/// Replace sections 1 and 2 and their lines in "What to pick" in the report in `dir`.
pub fn rewrite(
    dir: &Path,
    memory: &[(Pattern, Vec<Run>)],
    prewarm: Option<&Prewarm>,
    machine: &Machine,
) -> Result<(), String> {
    splice::rewrite(
        dir,
        &[
            (SECTION, section(dir, memory, machine)?),
            (PREWARM, prewarm_section(prewarm)),
            (PICK, summary(memory)),
            (PREWARM_PICK, prewarm_summary(prewarm)),
        ],
    )
}

/// The shipped configuration's run in `runs`.
fn shipped(runs: &[Run]) -> Option<&Run> {
    runs.iter()
        .find(|r| r.setup.allocator == SHIPPED && r.setup.policy == "template")
}

/// Which allocator the template ships and why, in this run's numbers.
pub fn summary(memory: &[(Pattern, Vec<Run>)]) -> String {
    let mut md = String::new();
    let _ = writeln!(md, "{}", PICK.0);
    if let Some((pattern, runs)) = memory.first()
        && let Some(ours) = shipped(runs)
    {
        allocator_pick(&mut md, pattern, runs, ours);
    }
    let _ = writeln!(md, "{}", PICK.1);
    md
}

fn allocator_pick(md: &mut String, pattern: &Pattern, runs: &[Run], ours: &Run) {
    let v3 = runs
        .iter()
        .find(|r| r.setup.allocator == MIMALLOC_3)
        .map_or(String::new(), |v3| {
            format!(
                " mimalloc 3.3 (the crate's default, not shipped for its open crash reports) ran at {:.0}% of \
                 that throughput and ended at {:.1} MiB.",
                100.0 * v3.records_per_s / ours.records_per_s.max(f64::MIN_POSITIVE),
                last_rss(v3)
            )
        });
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
        .find(|r| r.setup.allocator == SHIPPED && r.setup.policy != "template");
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
        "- **Allocator**: the template ships mimalloc 2 with `MEMORY_RETURN=prompt` (`keep` for a function \
         that pre-warms its arena). In this run it was {speed}{policy}.{v3} The least memory: {} ({:.1} MiB, at {:.0}% of \
         mimalloc's throughput): pick `system` where a few MiB matter more than that, e.g. at 128 MB. Every \
         configuration stayed within {GROWTH_BOUND_MIB} MiB after warm-up. mimalloc 3 is the one allocator \
         with which the arena pre-warm keeps its pages (section 2).",
        leanest.setup.label,
        last_rss(leanest),
        100.0 * leanest.records_per_s / ours.records_per_s.max(f64::MIN_POSITIVE)
    );
}

/// What the pre-warm did where the template uses it.
pub fn prewarm_summary(prewarm: Option<&Prewarm>) -> String {
    let mut md = String::new();
    let _ = writeln!(md, "{}", PREWARM_PICK.0);
    let Some(Prewarm { function, rows, .. }) = prewarm else {
        let _ = writeln!(md, "{}", PREWARM_PICK.1);
        return md;
    };
    // First invocation / steady and first faults of `allocator`'s `variant`.
    let measured = |allocator: &str, variant: &str| {
        rows.iter().find_map(|r| match r.outcome {
            Outcome::Measured {
                first_ms,
                steady_ms,
                first_faults,
                ..
            } if r.allocator == allocator && r.variant == variant => {
                Some((first_ms / steady_ms.max(f64::MIN_POSITIVE), first_faults))
            }
            _ => None,
        })
    };
    let [(_, off), (_, shipped), (_, forced)] = prewarm::VARIANTS;
    let effect = |allocator: &str, with: &str| {
        let ((cold, cold_faults), (warm, warm_faults)) =
            (measured(allocator, off)?, measured(allocator, with)?);
        Some(format!(
            "first invocation / steady {cold:.2} without, {warm:.2} with; its minor page faults \
             {cold_faults:.0} without, {warm_faults:.0} with"
        ))
    };
    if let Some(effect) = effect(SHIPPED, shipped) {
        let _ = writeln!(
            md,
            "- **Arena pre-warm** (`{function}`, mimalloc): {effect}."
        );
    } else if let Some(forced) = effect(SHIPPED, forced) {
        let v3 = effect(MIMALLOC_3, shipped).map_or(String::new(), |effect| {
            format!(" With {MIMALLOC_3} it would pay: {effect}.")
        });
        let _ = writeln!(
            md,
            "- **Arena pre-warm** (`{function}`): not with the shipped mimalloc 2, which fills each \
             thread's own segment with fresh pages first (forced: {forced}).{v3}"
        );
    }
    let _ = writeln!(md, "{}", PREWARM_PICK.1);
    md
}

fn last_rss(run: &Run) -> f64 {
    run.rss.last().map_or(0.0, |p| p.1)
}

fn pattern_section(
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
            title: &format!(
                "{} RSS, {}",
                runs.first().map_or("", |r| r.function.as_str()),
                pattern.name
            ),
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

pub fn prewarm_section(prewarm: Option<&Prewarm>) -> String {
    let mut md = String::new();
    let _ = writeln!(md, "{}", PREWARM.0);
    let Some(Prewarm {
        function,
        work,
        arena_mib,
        rows,
    }) = prewarm
    else {
        let _ = writeln!(md, "## 2. Arena pre-warm: a function's first invocation\n");
        let _ = writeln!(md, "{}\n\n{}", super::not_measured("prewarm"), PREWARM.1);
        return md;
    };
    let _ = writeln!(
        md,
        "## 2. Arena pre-warm: `{function}`'s first invocation\n"
    );
    let _ = writeln!(
        md,
        "{work}; each row the median of fresh processes (`MEMORY_RETURN=keep`, \
         arena {arena_mib} MiB, 4 KiB pages for mimalloc). \"Steady\" is the median of the later invocations. \
         The template pre-warms only with mimalloc 3: the others, the shipped mimalloc 2 among them, do not reliably reuse pages freed by another \
         thread (\"forced\" shows what pre-warming would give them).\n"
    );
    let _ = writeln!(
        md,
        "| allocator | variant | pre-warm ms (background) | first ms | steady ms | first / steady | first faults | steady faults |\n|---|---|---:|---:|---:|---:|---:|---:|"
    );
    for row in rows {
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
    let _ = writeln!(md, "{}", PREWARM.1);
    md
}

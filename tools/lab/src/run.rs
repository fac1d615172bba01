//! `cargo xtask lab [--quick]`: every section measured, `BENCHMARKS.md`
//! written, then the properties that must hold everywhere checked.

use crate::plan;
use crate::report::{self, Memory, Results};
use crate::scale::Scale;
use crate::{
    cold_start, concurrency, first_invocation, machine, memory, prewarm, probes, sections, tuning,
};
use indicatif::{ProgressBar, ProgressStyle};
use local_stack::template::Template;
use local_stack::workspace_root;
use std::time::Duration;

/// Run the lab at `scale`, write the report, then fail if a property broke.
/// `build_release` makes sure the release bootstraps exist (full scale only).
pub fn run(scale: Scale, build_release: &dyn Fn() -> Result<(), String>) -> Result<(), String> {
    let machine = machine::Machine::here();
    let bar = progress_bar(scale)?;
    let tick = |message: &str| {
        bar.inc(1);
        bar.set_message(message.to_owned());
        if scale == Scale::Quick {
            eprintln!("lab: {message}");
        }
    };
    let dir = match scale {
        Scale::Full => workspace_root(),
        Scale::Quick => workspace_root().join("target").join("lab-quick"),
    };
    let results = measure(scale, machine, &dir, build_release, &tick)?;
    bar.finish_and_clear();
    report::write(&dir, &results)?;
    println!("lab: wrote {}", dir.join("BENCHMARKS.md").display());
    check(&results)
}

/// The progress line of a whole run, one step per measurement (hidden in
/// quick mode, which prints its steps instead).
fn progress_bar(scale: Scale) -> Result<ProgressBar, String> {
    let bar = match scale {
        Scale::Full => ProgressBar::new_spinner(),
        Scale::Quick => ProgressBar::hidden(),
    };
    bar.set_style(
        ProgressStyle::with_template("{spinner} [{elapsed_precise}] step {pos}: {msg}")
            .map_err(|e| e.to_string())?,
    );
    bar.enable_steady_tick(Duration::from_millis(200));
    Ok(bar)
}

/// Every section at `scale`, in order, `tick` naming each step.
fn measure(
    scale: Scale,
    machine: machine::Machine,
    dir: &std::path::Path,
    build_release: &dyn Fn() -> Result<(), String>,
    tick: &dyn Fn(&str),
) -> Result<Results, String> {
    let probes = match scale {
        Scale::Full => probes::Probes::optimised(&probes::ALLOCATORS, tick)?,
        Scale::Quick => probes::Probes::debug()?,
    };
    let (memory, prewarm) = allocators(&probes, scale, tick)?;
    let (cold_start, power) = match scale {
        Scale::Full => {
            tick(
                "release builds for the cold starts, the power tuning and the functions' sections",
            );
            build_release()?;
            let cold_start = cold_start::measure(tick)?;
            let power = tuning::measure_if_limits_enforced(&probes, machine.cores, tick)?;
            (Some(cold_start), power)
        }
        Scale::Quick => (
            None,
            Err("not in quick mode (it needs the release builds)".to_owned()),
        ),
    };
    let first_invocation = match local_stack::cgroup::enforced() {
        Err(why) => Err(format!(
            "CPU and memory limits are not enforced here ({why})"
        )),
        Ok(()) => Ok(first_invocation::measure(scale, &probes, tick)?),
    };
    let concurrency = Ok(concurrency::measure(&probes, scale, tick)?);
    let sections = sections::measure(&probes, scale, &machine, dir, None, tick)?;
    Ok(Results {
        concurrency,
        power,
        first_invocation,
        scale,
        machine,
        memory,
        prewarm,
        cold_start,
        sections,
    })
}

/// Sections 1 and 2: the allocators under each traffic pattern, and the
/// arena pre-warm.
pub fn allocators(
    probes: &probes::Probes,
    scale: Scale,
    tick: &dyn Fn(&str),
) -> Result<(Memory, Option<prewarm::Prewarm>), String> {
    let trials = match scale {
        Scale::Full => 3,
        Scale::Quick => 1,
    };
    let template = Template::load(&workspace_root().join("template.yaml"))?;
    let functions = plan::functions(&template)?;
    let mut memory = Vec::new();
    if let Some(function) = probes.offering(&functions, "memory").next() {
        for pattern in memory::patterns(scale) {
            // Throughput is the burst's figure; low traffic is about RSS.
            let trials = if pattern.phases.len() > 1 { 1 } else { trials };
            let runs = memory::measure(probes, function, &pattern, trials, tick)?;
            memory.push((pattern, runs));
        }
    }
    let prewarm = match probes.offering(&functions, "prewarm").next() {
        Some(function) => Some(prewarm::measure(probes, &function.binary, scale, tick)?),
        None => None,
    };
    Ok((memory, prewarm))
}

/// The properties of sections 1 and 2: memory bounded, pre-warm effective.
pub fn check_allocators(
    memory: &[(memory::Pattern, Vec<memory::Run>)],
    prewarm: Option<&prewarm::Prewarm>,
) -> Result<(), String> {
    for (pattern, runs) in memory {
        memory::check_bounded(pattern, runs)?;
        println!(
            "lab: {}: memory bounded ({})",
            pattern.name,
            runs.iter()
                .map(|r| format!("{} +{:.2} MiB", r.setup.label, r.growth_mib))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    let Some(prewarm) = prewarm else {
        println!("lab: pre-warm: {}", report::not_measured("prewarm"));
        return Ok(());
    };
    match prewarm::check_faults_removed(&prewarm.rows)? {
        0 => println!(
            "lab: pre-warm: the template pre-warms with no allocator built here (mimalloc 2 and the others would not reuse the pages)"
        ),
        _ => println!("lab: pre-warm removes most first-invocation page faults"),
    }
    Ok(())
}

/// The properties that must hold on every machine.
fn check(results: &Results) -> Result<(), String> {
    check_allocators(&results.memory, results.prewarm.as_ref())?;
    if let Ok(measured) = &results.first_invocation {
        first_invocation::check(measured)?;
        println!(
            "lab: first invocation: no request opens a connection, and the pre-warm never makes it slower than none"
        );
    }
    if let Ok(measured) = &results.concurrency {
        concurrency::check_flat(measured)?;
        println!(
            "lab: many requests in one environment: RSS flat once warm, every request answered or Busy"
        );
    }
    sections::check(&results.sections)
}

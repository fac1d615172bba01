//! `cargo xtask lab power | allocators | cold-start | first-invocation | concurrency | section
//! FUNCTION`: measure one section and replace its part of an existing `BENCHMARKS.md`.

use crate::scale::Scale;
use crate::{
    cold_start, concurrency, first_invocation, machine, probes, report, run, sections, tuning,
};
use indicatif::{ProgressBar, ProgressStyle};
use local_stack::workspace_root;
use std::time::Duration;

/// The progress line of a command that measures one section.
fn spinner() -> Result<ProgressBar, String> {
    let bar = ProgressBar::new_spinner();
    bar.set_style(
        ProgressStyle::with_template("{spinner} [{elapsed_precise}] {msg}")
            .map_err(|e| e.to_string())?,
    );
    bar.enable_steady_tick(Duration::from_millis(200));
    Ok(bar)
}

/// `lab power`: measure the memory sizes only (building the x86_64 release
/// bootstraps if missing) and replace their part of `BENCHMARKS.md`.
pub fn power_only() -> Result<(), String> {
    let machine = machine::Machine::here();
    // Before measuring for minutes: the report must have the part to replace.
    report::power_rewritable(&workspace_root())?;
    tuning::build()?;
    let bar = spinner()?;
    let tick = |message: &str| bar.set_message(message.to_owned());
    let probes = probes::Probes::optimised(&[probes::SHIPPED], &tick)?;
    let curves = tuning::measure_if_limits_enforced(&probes, machine.cores, &tick)?;
    bar.finish_and_clear();
    let curves = curves.map_err(|why| format!("power tuning: {why}"))?;
    report::rewrite_power(&workspace_root(), &Ok(curves), &machine)?;
    println!(
        "lab: wrote the power tuning into {}",
        workspace_root().join("BENCHMARKS.md").display()
    );
    Ok(())
}

/// `lab cold-start`: measure each function's init and binary size (building
/// the x86_64 release bootstraps first, and each function without its
/// tracing exporter) and replace their section in `BENCHMARKS.md`.
pub fn cold_start_only() -> Result<(), String> {
    report::cold_start_rewritable(&workspace_root())?;
    tuning::build()?;
    let bar = spinner()?;
    let rows = cold_start::measure(&|message: &str| bar.set_message(message.to_owned()))?;
    bar.finish_and_clear();
    report::rewrite_cold_start(&workspace_root(), &rows)?;
    println!(
        "lab: wrote the cold-start section into {}",
        workspace_root().join("BENCHMARKS.md").display()
    );
    Ok(())
}

/// `lab allocators`: measure the allocators (section 1) and the arena
/// pre-warm (section 2) only, with the probes of every allocator and of
/// mimalloc 3.3, and replace them (and their lines in "What to pick") in
/// `BENCHMARKS.md`.
pub fn allocators_only() -> Result<(), String> {
    let machine = machine::Machine::here();
    report::allocators_rewritable(&workspace_root())?;
    let bar = spinner()?;
    let tick = |message: &str| bar.set_message(message.to_owned());
    let probes = probes::Probes::optimised(&probes::ALLOCATORS, &tick)?;
    let (memory, prewarm) = run::allocators(&probes, Scale::Full, &tick)?;
    bar.finish_and_clear();
    report::rewrite_allocators(&workspace_root(), &memory, prewarm.as_ref(), &machine)?;
    println!(
        "lab: wrote the allocator and pre-warm sections into {}",
        workspace_root().join("BENCHMARKS.md").display()
    );
    run::check_allocators(&memory, prewarm.as_ref())
}

/// `lab section FUNCTION`: measure that function's own section only (its
/// probes built with the shipped allocator) and replace it in
/// `BENCHMARKS.md`. A section that runs the release bootstraps (`sam build`)
/// says so if they are missing.
pub fn section_only(binary: &str) -> Result<(), String> {
    let machine = machine::Machine::here();
    let root = workspace_root();
    sections::rewritable(&root, binary)?;
    let bar = spinner()?;
    let tick = |message: &str| bar.set_message(message.to_owned());
    let probes = probes::Probes::optimised(&[probes::SHIPPED], &tick)?;
    let measured = sections::measure(&probes, Scale::Full, &machine, &root, Some(binary), &tick)?;
    bar.finish_and_clear();
    sections::rewrite(&root, &measured)?;
    println!(
        "lab: wrote {binary}'s section into {}",
        root.join("BENCHMARKS.md").display()
    );
    sections::check(&measured)
}

/// `lab first-invocation`: measure the first invocations only (building the
/// x86_64 release bootstraps and the hello-world probe first) and replace
/// their section in `BENCHMARKS.md`.
pub fn first_invocation_only() -> Result<(), String> {
    let machine = machine::Machine::here();
    report::first_invocation_rewritable(&workspace_root())?;
    local_stack::cgroup::enforced()
        .map_err(|why| format!("CPU and memory limits are not enforced here ({why})"))?;
    tuning::build()?;
    let bar = spinner()?;
    let tick = |message: &str| bar.set_message(message.to_owned());
    let probes = probes::Probes::optimised(&["mimalloc"], &tick)?;
    let measured = first_invocation::measure(Scale::Full, &probes, &tick)?;
    bar.finish_and_clear();
    report::rewrite_first_invocation(&workspace_root(), &Ok(measured.clone()), &machine)?;
    println!(
        "lab: wrote the first-invocation section into {}",
        workspace_root().join("BENCHMARKS.md").display()
    );
    first_invocation::check(&measured)
}

/// `lab concurrency`: measure many requests in one environment only (the
/// probes with every allocator) and replace its section in `BENCHMARKS.md`.
pub fn concurrency_only() -> Result<(), String> {
    let machine = machine::Machine::here();
    report::concurrency_rewritable(&workspace_root())?;
    let bar = spinner()?;
    let tick = |message: &str| bar.set_message(message.to_owned());
    let probes = probes::Probes::optimised(&probes::ALLOCATORS, &tick)?;
    let measured = concurrency::measure(&probes, Scale::Full, &tick)?;
    bar.finish_and_clear();
    report::rewrite_concurrency(&workspace_root(), &Ok(measured.clone()), &machine)?;
    println!(
        "lab: wrote the many-requests section into {}",
        workspace_root().join("BENCHMARKS.md").display()
    );
    concurrency::check_flat(&measured)
}

//! The performance lab. `cargo xtask lab` (this binary) measures, on this machine, what the
//! template's choices buy (allocators, bcrypt, arena pre-warm, cold start,
//! memory size) and writes `BENCHMARKS.md` with SVG plots in `benchmarks/`.
//! `cargo xtask lab power` measures only the memory sizes (power tuning) and
//! replaces their part of an existing `BENCHMARKS.md`; `cargo xtask lab bcrypt`,
//! `cargo xtask lab fan-out` and `cargo xtask lab first-invocation` do the same
//! for the bcrypt, the fan-out and the first-invocation sections.
//! `cargo xtask lab --quick` runs the same code small on the suite's debug
//! builds, writes into `target/lab-quick/`, and checks only what must hold
//! everywhere (memory stays bounded, pre-warm removes most page faults, every
//! bcrypt candidate computes the same hashes, no request opens a connection
//! that init could have, the pre-warm never slows the first invocation beyond
//! noise, side by side), never an absolute timing; it measures no memory sizes
//! (they need the release builds).
//!
//! Code map: `probes` builds and runs the probe programs; `stack` starts what
//! the bootstraps run against (DynamoDB Local with the orders, cold starts
//! under the emulator); `memory`, `prewarm`, `bcrypt`, `cold_start`, `tuning`
//! (with `power`, the prices and the model), `fan_out`, `first_invocation` and
//! `tls` (the TLS client's cold cost, reported with it) measure; `machine`
//! says where; `report` and `plot` write it down.

mod bcrypt;
mod cold_start;
mod fan_out;
mod first_invocation;
mod machine;
mod memory;
mod plot;
mod power;
mod prewarm;
mod probes;
mod report;
mod stack;
mod tls;
mod tuning;

use indicatif::{ProgressBar, ProgressStyle};
use local_stack::workspace_root;
use std::process::ExitCode;
use std::time::Duration;

fn main() -> ExitCode {
    // Ctrl-C stops the servers and emulators the lab started, and their cgroups.
    if let Err(e) = local_stack::process::stop_all_on_interrupt() {
        eprintln!("error: {e}");
        return ExitCode::FAILURE;
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        [] => run(Scale::Full, &local_stack::sam::release_builds),
        ["--quick"] => run(Scale::Quick, &|| Ok(())),
        ["power"] => power_only(),
        ["bcrypt"] => bcrypt_only(),
        ["fan-out"] => fan_out_only(),
        ["first-invocation"] => first_invocation_only(),
        _ => Err("usage: lab [--quick | power | bcrypt | fan-out | first-invocation]".to_owned()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// How big a lab run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scale {
    /// Every allocator, optimised builds, minutes.
    Full,
    /// The default allocator, debug builds, seconds: for the test suite.
    Quick,
}

/// Everything one run measured.
#[derive(Debug, Clone)]
pub struct Results {
    pub scale: Scale,
    pub machine: machine::Machine,
    pub memory: Vec<(memory::Pattern, Vec<memory::Run>)>,
    pub prewarm: Vec<prewarm::Row>,
    pub bcrypt: bcrypt::Bcrypt,
    /// Not in quick mode.
    pub cold_start: Option<Vec<cold_start::Row>>,
    /// The memory sizes measured, or why not.
    pub power: report::Tuning,
    /// The fan-out against one function, or why not.
    pub fan_out: report::FanOut,
    /// The first invocation against the steady state, or why not.
    pub first_invocation: Result<first_invocation::FirstInvocation, String>,
}

/// The median of `values` (0 for none).
pub fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(0.0)
}

/// Run the lab at `scale`, write the report, then fail if a property broke.
/// `build_release` makes sure the release bootstraps exist (full scale only).
pub fn run(scale: Scale, build_release: &dyn Fn() -> Result<(), String>) -> Result<(), String> {
    let machine = machine::Machine::here();
    let bar = match scale {
        Scale::Full => ProgressBar::new_spinner(),
        Scale::Quick => ProgressBar::hidden(),
    };
    bar.set_style(
        ProgressStyle::with_template("{spinner} [{elapsed_precise}] step {pos}: {msg}")
            .map_err(|e| e.to_string())?,
    );
    bar.enable_steady_tick(Duration::from_millis(200));
    let tick = |message: &str| {
        bar.inc(1);
        bar.set_message(message.to_owned());
        if scale == Scale::Quick {
            eprintln!("lab: {message}");
        }
    };

    let probes = match scale {
        Scale::Full => probes::Probes::optimised(&probes::ALLOCATORS, &tick)?,
        Scale::Quick => probes::Probes::debug()?,
    };
    let trials = match scale {
        Scale::Full => 3,
        Scale::Quick => 1,
    };
    let mut memory = Vec::new();
    for pattern in memory::patterns(scale) {
        // Throughput is the burst's figure; low traffic is about RSS.
        let trials = if pattern.phases.len() > 1 { 1 } else { trials };
        let runs = memory::measure(&probes, &pattern, trials, &tick)?;
        memory.push((pattern, runs));
    }
    let prewarm = prewarm::measure(&probes, scale, &tick)?;
    tick("bcrypt");
    let bcrypt = bcrypt::measure(&probes, scale, machine.cores)?;
    let (cold_start, power, fan_out) = match scale {
        Scale::Full => {
            tick("release builds for the cold starts and the power tuning");
            build_release()?;
            let cold_start = cold_start::measure(&tick)?;
            let power = power(machine.cores, &tick)?;
            (Some(cold_start), power, Ok(fan_out::measure(&tick)?))
        }
        Scale::Quick => (
            None,
            Err("not in quick mode (it needs the release builds)".to_owned()),
            Err("not in quick mode (it needs the release builds)".to_owned()),
        ),
    };
    let first_invocation = match local_stack::cgroup::enforced() {
        Err(why) => Err(format!(
            "CPU and memory limits are not enforced here ({why})"
        )),
        Ok(()) => Ok(first_invocation::measure(scale, &probes, &tick)?),
    };
    bar.finish_and_clear();

    let results = Results {
        power,
        fan_out,
        first_invocation,
        scale,
        machine,
        memory,
        prewarm,
        bcrypt,
        cold_start,
    };
    let dir = match scale {
        Scale::Full => workspace_root(),
        Scale::Quick => workspace_root().join("target").join("lab-quick"),
    };
    report::write(&dir, &results)?;
    println!("lab: wrote {}", dir.join("BENCHMARKS.md").display());
    check(&results)
}

/// The power tuning, or why it cannot run here (no CPU and memory limits).
fn power(cores: usize, tick: &dyn Fn(&str)) -> Result<report::Tuning, String> {
    match local_stack::cgroup::enforced() {
        Err(why) => Ok(Err(format!(
            "CPU and memory limits are not enforced here ({why})"
        ))),
        Ok(()) => Ok(Ok(tuning::measure(cores, tick)?)),
    }
}

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
fn power_only() -> Result<(), String> {
    let machine = machine::Machine::here();
    // Before measuring for minutes: the report must have the part to replace.
    report::power_rewritable(&workspace_root())?;
    tuning::build()?;
    let bar = spinner()?;
    let tuning = power(machine.cores, &|message: &str| {
        bar.set_message(message.to_owned())
    })?;
    bar.finish_and_clear();
    let tuning = tuning.map_err(|why| format!("power tuning: {why}"))?;
    report::rewrite_power(&workspace_root(), &Ok(tuning), &machine)?;
    println!(
        "lab: wrote the power tuning into {}",
        workspace_root().join("BENCHMARKS.md").display()
    );
    Ok(())
}

/// `lab bcrypt`: measure the bcrypt section only (building the probes with
/// one allocator) and replace it in `BENCHMARKS.md`.
fn bcrypt_only() -> Result<(), String> {
    let machine = machine::Machine::here();
    // Before building and measuring: the report must have the part to replace.
    report::bcrypt_rewritable(&workspace_root())?;
    let bar = spinner()?;
    let tick = |message: &str| bar.set_message(message.to_owned());
    let probes = probes::Probes::optimised(&[bcrypt::ALLOCATOR], &tick)?;
    tick("bcrypt");
    let bcrypt = bcrypt::measure(&probes, Scale::Full, machine.cores)?;
    bar.finish_and_clear();
    report::rewrite_bcrypt(&workspace_root(), &bcrypt, &machine)?;
    println!(
        "lab: wrote the bcrypt section into {}",
        workspace_root().join("BENCHMARKS.md").display()
    );
    bcrypt::check_agreement(&bcrypt)
}

/// `lab fan-out`: measure the fan-out section only (building the x86_64
/// release bootstraps first) and replace it in `BENCHMARKS.md`.
fn fan_out_only() -> Result<(), String> {
    let machine = machine::Machine::here();
    report::fan_out_rewritable(&workspace_root())?;
    tuning::build()?;
    let bar = spinner()?;
    let rows = fan_out::measure(&|message: &str| bar.set_message(message.to_owned()))?;
    bar.finish_and_clear();
    report::rewrite_fan_out(&workspace_root(), &Ok(rows), &machine)?;
    println!(
        "lab: wrote the fan-out section into {}",
        workspace_root().join("BENCHMARKS.md").display()
    );
    Ok(())
}

/// `lab first-invocation`: measure the first invocations only (building the
/// x86_64 release bootstraps and the hello-world probe first) and replace
/// their section in `BENCHMARKS.md`.
fn first_invocation_only() -> Result<(), String> {
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

/// The properties that must hold on every machine.
fn check(results: &Results) -> Result<(), String> {
    for (pattern, runs) in &results.memory {
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
    prewarm::check_faults_removed(&results.prewarm)?;
    println!("lab: pre-warm removes most first-invocation page faults");
    bcrypt::check_agreement(&results.bcrypt)?;
    println!("lab: bcrypt: every candidate's hashes equal the bcrypt crate's");
    if let Ok(measured) = &results.first_invocation {
        first_invocation::check(measured)?;
        println!(
            "lab: first invocation: no request opens a connection, and the pre-warm never makes it slower than none"
        );
    }
    Ok(())
}

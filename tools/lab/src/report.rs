//! `BENCHMARKS.md` and its plots, written from one lab run's measurements.

mod allocators;
mod cold_start;
mod concurrency;
mod first_invocation;
mod power;

pub use allocators::{rewritable as allocators_rewritable, rewrite as rewrite_allocators};
pub use cold_start::{rewritable as cold_start_rewritable, rewrite as rewrite_cold_start};
pub use concurrency::{
    Measurement as ConcurrencyMeasurement, rewritable as concurrency_rewritable,
    rewrite as rewrite_concurrency,
};
pub use first_invocation::{
    rewritable as first_invocation_rewritable, rewrite as rewrite_first_invocation,
};
pub use power::{Tuning, rewritable as power_rewritable, rewrite as rewrite_power};

use crate::scale::Scale;
use crate::{
    cold_start as measured_cold_start, first_invocation as measured_first_invocation, machine,
    memory, prewarm, sections,
};
use std::fmt::Write as _;
use std::path::Path;

/// Everything one run measured.
#[derive(Debug, Clone)]
pub struct Results {
    pub scale: Scale,
    pub machine: machine::Machine,
    pub memory: Memory,
    /// The arena pre-warm of the first function with a `prewarm` probe.
    pub prewarm: Option<prewarm::Prewarm>,
    /// Not in quick mode.
    pub cold_start: Option<Vec<measured_cold_start::Row>>,
    /// The memory sizes measured, or why not.
    pub power: Tuning,
    /// The first invocation against the steady state, or why not.
    pub first_invocation: Result<measured_first_invocation::FirstInvocation, String>,
    /// Many requests in one environment.
    pub concurrency: ConcurrencyMeasurement,
    /// The functions' own sections.
    pub sections: Vec<sections::Measured>,
}

/// What a section says when no function of the template has its probe.
pub fn not_measured(kind: &str) -> String {
    no_probe("function of the template", kind)
}

/// What a section says when none of `functions` has its probe.
pub fn no_probe(functions: &str, kind: &str) -> String {
    format!(
        "Not measured: no {functions} has a `{kind}` probe \
         (`functions/<name>/lab/examples/<binary>-{kind}.rs`)."
    )
}

/// Section 1's runs, by traffic pattern.
pub type Memory = Vec<(memory::Pattern, Vec<memory::Run>)>;

/// The plots, relative to the report.
const PLOTS: &str = "tools/lab/plots";

/// Write the report as `dir/BENCHMARKS.md` and its plots under `dir/tools/lab/plots/`.
pub fn write(dir: &Path, results: &Results) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
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
         in one run (alternating, medians). The probes are the functions' own (`functions/<name>/lab/`) and the lab's (`tools/lab/probes/`): the functions' \
         real code, built once per allocator with the `lab` profile (release optimisation, no fat LTO).\n"
    );
    summary(&mut md, results);

    md.push_str(&allocators::section(
        dir,
        &results.memory,
        &results.machine,
    )?);
    md.push_str(&allocators::prewarm_section(results.prewarm.as_ref()));
    md.push_str(&cold_start::section(&results.cold_start));
    md.push_str(&power::section(dir, &results.power, &results.machine)?);
    md.push_str(&first_invocation::section(
        &results.first_invocation,
        &results.machine,
    ));
    md.push_str(&concurrency::section(
        dir,
        &results.concurrency,
        &results.machine,
    )?);
    for section in &results.sections {
        md.push_str(&sections::text(section));
    }
    let path = dir.join("BENCHMARKS.md");
    std::fs::write(&path, md).map_err(|e| format!("{}: {e}", path.display()))
}

fn summary(md: &mut String, results: &Results) {
    let _ = writeln!(md, "## What to pick\n");
    md.push_str(&allocators::summary(&results.memory));
    md.push_str(&power::summary(&results.power));
    md.push_str(&allocators::prewarm_summary(results.prewarm.as_ref()));
    let _ = writeln!(md);
}

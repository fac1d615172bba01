//! The performance lab. `cargo xtask lab` (this binary) measures, on this
//! machine, what the template's choices buy (allocators, arena pre-warm, cold
//! start, memory size, the first invocation, many requests at once), for
//! whatever functions the template holds, then each function's own section
//! (its `section` probe), and writes `BENCHMARKS.md` with SVG plots
//! (`tools/lab/plots/`, and a function's own in its lab crate).
//! `cargo xtask lab power` measures only the memory sizes (power tuning) and
//! replaces their part of an existing `BENCHMARKS.md`; `allocators` (sections
//! 1 and 2, with mimalloc 3.3 beside the shipped 2.x), `cold-start` (with
//! binary sizes), `first-invocation`, `concurrency` and `section FUNCTION`
//! (that function's own section) do the same for theirs.
//! `cargo xtask lab --quick` runs the same code small on the suite's debug
//! builds, writes into `target/lab-quick/`, and checks only what must hold
//! everywhere (memory stays bounded, pre-warm removes most page faults, no
//! request opens a connection that init could have, the pre-warm never slows
//! the first invocation beyond noise, side by side, and what the functions'
//! sections check), never an absolute timing; it measures no memory sizes
//! (they need the release builds).
//!
//! Code map: this file only dispatches what `cli` parsed: `run` is the
//! whole lab (every section, the report, the checks), `one_section` the
//! commands that replace one section, `splice` how. `probes` finds (in the
//! functions' folders), builds and runs the probe programs; `plan` reads what
//! a function asks the generic sections to send it; `stack` starts what the
//! bootstraps run against (DynamoDB Local with the template's tables, cold
//! starts under the emulator); `memory`, `prewarm`, `cold_start`, `tuning`
//! (with `power`, the prices and the model), `first_invocation`,
//! `concurrency` and `tls` (the TLS client's cold cost, reported with it)
//! measure, at a `scale`; `sections` runs the functions' own; `machine` says
//! where; `report` writes it down.

mod cli;
mod cold_start;
mod concurrency;
mod export;
mod first_invocation;
mod machine;
mod memory;
mod one_section;
mod plan;
mod power;
mod prewarm;
mod probes;
mod report;
mod run;
mod scale;
mod sections;
mod splice;
mod stack;
mod tls;
mod tuning;

use cli::Command;
use scale::Scale;
use std::process::ExitCode;

fn main() -> ExitCode {
    // Ctrl-C stops the servers and emulators the lab started, and their cgroups.
    if let Err(e) = local_stack::process::stop_all_on_interrupt() {
        eprintln!("error: {e}");
        return ExitCode::FAILURE;
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let result = cli::parse(&args).and_then(|command| match command {
        Command::Full => run::run(Scale::Full, &local_stack::sam::release_builds),
        Command::Quick => run::run(Scale::Quick, &|| Ok(())),
        Command::Allocators => one_section::allocators_only(),
        Command::Power => one_section::power_only(),
        Command::ColdStart => one_section::cold_start_only(),
        Command::FirstInvocation => one_section::first_invocation_only(),
        Command::Concurrency => one_section::concurrency_only(),
        Command::Section(binary) => one_section::section_only(&binary),
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

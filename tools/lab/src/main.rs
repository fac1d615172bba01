//! The performance lab. `cargo xtask lab` (this binary) measures, on this machine, what the
//! template's choices buy (allocators, bcrypt, arena pre-warm, cold start,
//! memory size) and writes `BENCHMARKS.md` with SVG plots in `tools/lab/plots/`.
//! `cargo xtask lab power` measures only the memory sizes (power tuning) and
//! replaces their part of an existing `BENCHMARKS.md`; `cargo xtask lab allocators`
//! (sections 1 and 3, with mimalloc 3.3 beside the shipped 2.x), `cargo xtask lab bcrypt`,
//! `cargo xtask lab cold-start`, `cargo xtask lab fan-out` and `cargo xtask lab
//! first-invocation` do the same for the bcrypt, the cold-start (with binary
//! sizes), the fan-out and the first-invocation sections, and
//! `cargo xtask lab concurrency` for many requests in one environment.
//! `cargo xtask lab --quick` runs the same code small on the suite's debug
//! builds, writes into `target/lab-quick/`, and checks only what must hold
//! everywhere (memory stays bounded, pre-warm removes most page faults, every
//! bcrypt candidate computes the same hashes, no request opens a connection
//! that init could have, the pre-warm never slows the first invocation beyond
//! noise, side by side), never an absolute timing; it measures no memory sizes
//! (they need the release builds).
//!
//! Code map: this file only reads the arguments and dispatches: `run` is the
//! whole lab (every section, the report, the checks), `one_section` the
//! commands that replace one section. `probes` finds (in the functions'
//! folders), builds and runs the probe programs; `plan` reads what a function
//! asks the generic sections to send it; `stack` starts what the bootstraps
//! run against (DynamoDB Local with the template's tables, cold starts under
//! the emulator); `memory`, `prewarm`,
//! `bcrypt`, `cold_start`, `tuning` (with `power`, the prices and the model),
//! `fan_out`, `first_invocation`, `concurrency` and `tls` (the TLS client's cold cost,
//! reported with it) measure, at a `scale`, summarised by `stats`; `machine`
//! says where; `report` and `plot` write it down.

mod bcrypt;
mod cold_start;
mod concurrency;
mod export;
mod fan_out;
mod first_invocation;
mod machine;
mod memory;
mod one_section;
mod plan;
mod plot;
mod power;
mod prewarm;
mod probes;
mod report;
mod run;
mod scale;
mod stack;
mod stats;
mod tls;
mod tuning;

use scale::Scale;
use std::process::ExitCode;

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
        [] => run::run(Scale::Full, &local_stack::sam::release_builds),
        ["--quick"] => run::run(Scale::Quick, &|| Ok(())),
        ["allocators"] => one_section::allocators_only(),
        ["power"] => one_section::power_only(),
        ["bcrypt"] => one_section::bcrypt_only(),
        ["cold-start"] => one_section::cold_start_only(),
        ["fan-out"] => one_section::fan_out_only(),
        ["first-invocation"] => one_section::first_invocation_only(),
        ["concurrency"] => one_section::concurrency_only(),
        _ => Err(
            "usage: lab [--quick | allocators | power | bcrypt | cold-start | fan-out | first-invocation | concurrency]"
                .to_owned(),
        ),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

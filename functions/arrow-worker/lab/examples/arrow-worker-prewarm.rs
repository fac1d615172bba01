//! Performance-lab probe: a cold start of the Arrow worker followed by a few
//! invocations over generated orders (see `arrow_worker_lab::trial`), printing one
//! JSON line: each invocation's time and minor page faults.
//!
//! `arrow-worker-prewarm off|shipped|forced quick|full ROUNDS` (run by `cargo
//! xtask lab`; its `prewarm` contract is in `tools/lab/src/prewarm.rs`)
//! - `off`: no pre-warm, no code warm-up;
//! - `shipped`: what the function does (arena pre-warm + code warm-up); with
//!   an allocator the template refuses to pre-warm, the line says `refused`;
//! - `forced`: arena pre-faulted even where the template refuses, + code warm-up.
//!
//! Full: 300,000 orders grouped by customer, a 256 MiB arena. Quick: 20,000
//! orders and 64 MiB: grouping 20,000 orders by customer with money per
//! currency (about 7,500 per-currency entries) leaves about half of its first
//! faults with a 32 MiB arena; from 64 MiB on, about an eighth.

use arrow_worker_lab::trial::{self, ArenaPrewarm};
use shared::arena::{self, NotStarted};

lab_probes::declare_allocator!();

fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: arrow-worker-prewarm off|shipped|forced quick|full ROUNDS";
    let [variant, scale, rounds] = args.as_slice() else {
        return Err(usage.into());
    };
    let (rows, arena_mib) = match scale.as_str() {
        "full" => (300_000, 256),
        "quick" => (20_000, 64),
        _ => return Err(usage.into()),
    };
    let rounds: usize = rounds.parse().map_err(|_| usage.to_owned())?;
    let bytes = arena_mib << 20;
    let (arena, warm_code) = match variant.as_str() {
        "off" => (ArenaPrewarm::Off, false),
        "shipped" => (ArenaPrewarm::Shipped(bytes), true),
        "forced" => (ArenaPrewarm::Forced(bytes), true),
        other => return Err(format!("unknown variant {other:?}")),
    };
    let allocator = shared::allocator::name();
    let work = format!("{rows} orders grouped by customer");
    if matches!(arena, ArenaPrewarm::Shipped(_)) && !arena::supported() {
        let why = NotStarted::Unsupported(allocator).to_string();
        println!(
            "{}",
            serde_json::json!({"work": work, "arena_mib": arena_mib, "allocator": allocator, "variant": variant, "refused": why})
        );
        return Ok(());
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .map_err(|e| e.to_string())?;
    let trial = runtime.block_on(trial::run(rows, arena, warm_code, rounds))?;
    let rounds: Vec<_> = trial
        .rounds
        .iter()
        .map(|r| serde_json::json!([r.took.as_secs_f64() * 1e3, r.minor_faults]))
        .collect();
    println!(
        "{}",
        serde_json::json!({
            "work": work,
            "arena_mib": arena_mib,
            "allocator": allocator,
            "variant": variant,
            "prewarm_ms": trial.prewarm.map(|d| d.as_secs_f64() * 1e3),
            "rounds": rounds,
        })
    );
    Ok(())
}

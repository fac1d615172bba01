//! Performance-lab probe: one function's real handler serving several
//! invocations at once in one process, as one Lambda Managed Instances
//! environment does (`shared::run` spawns each invocation on the tokio
//! runtime); one JSON line.
//!
//! `lab_concurrency FUNCTION WARM_UP LEVEL:REQUESTS...` (run by `cargo xtask lab`)
//! - FUNCTION: `orders` (a batch of 10 new orders; the store answers after
//!   `STORE_MS`, as DynamoDB would), `hasher` (the sample event's first
//!   password alone, at its cost: one sign-in) or `arrow` (the sample
//!   aggregation over `ROWS` generated orders, pages answered after
//!   `STORE_MS`);
//! - WARM_UP requests first, one at a time, unmeasured (the lab fills the
//!   order processor's cache with them);
//! - then each LEVEL: REQUESTS requests by LEVEL clients at once, each sending
//!   its next request when its last is answered, twice: a warm-up pass, then
//!   the measured pass. RSS is sampled every few milliseconds.
//!
//! Cold start is the function's own (`shared::start` with the process
//! environment the lab sets from `template.yaml`). A request that fails is
//! an error, except the Arrow worker's `Busy` (its row budget refusing), counted.

use lab_probes::concurrency::{Level, Work, drive};
use shared::config::ProcessEnv;

lab_probes::declare_allocator!();

#[tokio::main]
async fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [function, warm_up, levels @ ..] = args.as_slice() else {
        return Err("usage: lab_concurrency orders|hasher|arrow WARM_UP LEVEL:REQUESTS...".into());
    };
    let warm_up: usize = warm_up
        .parse()
        .map_err(|_| format!("WARM_UP {warm_up:?}: expected a number"))?;
    let levels = levels
        .iter()
        .map(|l| Level::parse(l))
        .collect::<Result<Vec<_>, _>>()?;
    let (work, vcpus) = Work::start(function, &ProcessEnv)?;
    let measured = drive(work, warm_up, &levels).await?;
    println!(
        "{}",
        serde_json::json!({
            "function": function,
            "allocator": shared::allocator::name(),
            "vcpus": vcpus,
            "levels": measured,
        })
    );
    Ok(())
}

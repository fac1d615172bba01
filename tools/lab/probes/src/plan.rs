//! What a function asks the lab's generic sections to send it: the `plan`
//! probe (`functions/<name>/lab/examples/<name>-plan.rs`) prints a [`Plan`]
//! as one JSON line, and the lab reads it back with the same types.
//!
//! `<name>-plan quick|full COUNT`: COUNT is how many invocations the lab
//! sends a request at most; a request whose events must differ (new order
//! ids, say) lists that many, else one, and invocation `n` gets event
//! `n % events.len()`. A request may name what to `prepare` first: the lab
//! runs `<name>-prepare` with those arguments and the function's settings.
//! A function without a `plan` probe is sent its sample events
//! (`events/<name>/`), each a request of its own.

use serde::{Deserialize, Serialize};

/// Everything a function asks for.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Plan {
    /// The first invocation against the steady state.
    pub first_invocation: FirstInvocation,
    /// The fixed work of the power tuning (memory sizes).
    pub power: Request,
}

/// The first-invocation section's part of a plan.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FirstInvocation {
    /// The cold-start measures the function takes, each measured without:
    /// [`CONNECTIONS`], [`PREWARM`].
    pub measures: Vec<String>,
    /// Its requests, smallest first.
    pub requests: Vec<Request>,
}

/// Connections opened during init (`OPEN_CONNECTIONS_AT_INIT`).
pub const CONNECTIONS: &str = "connections";
/// The arena pre-warm (`PREWARM`, by initialisation type).
pub const PREWARM: &str = "prewarm";

/// One request, sent again and again.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Request {
    /// `small`, `typical`, `large` (the report's column).
    pub size: String,
    /// What it is, for the report.
    pub description: String,
    /// Steady invocations per environment, where the section leaves it to
    /// the function (the power tuning), after one warm-up.
    #[serde(default)]
    pub steady: Option<usize>,
    /// The `prepare` probe's arguments, run before the request's first
    /// invocation, if it reads data of its own.
    #[serde(default)]
    pub prepare: Option<Vec<String>>,
    /// The events, used in turn.
    pub events: Vec<serde_json::Value>,
}

impl Request {
    /// Event `n`, in turn.
    pub fn event(&self, n: u64) -> Option<&serde_json::Value> {
        let len = u64::try_from(self.events.len()).ok().filter(|&l| l > 0)?;
        self.events.get(usize::try_from(n % len).ok()?)
    }
}

/// A `plan` probe's arguments: whether the lab runs at full scale, and COUNT.
pub fn args() -> Result<(bool, u64), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = || "usage: PLAN quick|full COUNT".to_owned();
    let [scale, count] = args.as_slice() else {
        return Err(usage());
    };
    let full = match scale.as_str() {
        "full" => true,
        "quick" => false,
        _ => return Err(usage()),
    };
    Ok((full, count.parse().map_err(|_| usage())?))
}

/// Print `plan`, the probe's one line.
pub fn print(plan: &Plan) -> Result<(), String> {
    println!(
        "{}",
        serde_json::to_string(plan).map_err(|e| e.to_string())?
    );
    Ok(())
}

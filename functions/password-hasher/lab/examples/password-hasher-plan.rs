//! Lab probe: what the lab's generic sections send the password hasher
//! (`lab_probes::plan` says the contract): batches of hashes, the typical one
//! the sample event.

use lab_probes::plan::{self, FirstInvocation, Plan, Request};
use password_hasher_lab::figures::{BATCH, COST};
use serde_json::{Value, json};

/// The sample event.
const HASH_EVENT: &str = include_str!("../../../../events/password-hasher/hash.json");

fn main() -> Result<(), String> {
    plan::args()?;
    let request = |size: &str, description: String, event: Value| Request {
        size: size.to_owned(),
        description,
        steady: None,
        prepare: None,
        events: vec![event],
    };
    let sample: Value = serde_json::from_str(HASH_EVENT).map_err(|e| e.to_string())?;
    let mut power = request(
        "typical",
        format!("a batch of {BATCH} hashes at cost {COST} (the bcrypt section's)"),
        hashes(COST, BATCH),
    );
    power.steady = Some(3);
    plan::print(&Plan {
        first_invocation: FirstInvocation {
            measures: Vec::new(),
            requests: vec![
                request("small", "one hash at cost 4".into(), hashes(4, 1)),
                request(
                    "typical",
                    "`events/password-hasher/hash.json` (2 hashes at cost 10)".into(),
                    sample,
                ),
                request("large", "16 hashes at cost 10".into(), hashes(10, 16)),
            ],
        },
        power,
    })
}

/// A request to hash `count` passwords at `cost`.
fn hashes(cost: u32, count: usize) -> Value {
    let passwords: Vec<String> = (0..count)
        .map(|i| format!("correct horse battery staple {i}"))
        .collect();
    json!({ "operation": "hash", "cost": cost, "passwords": passwords })
}

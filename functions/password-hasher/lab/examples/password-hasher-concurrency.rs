//! Lab probe: the password hasher's real handler serving many requests at
//! once in one process, as one Lambda Managed Instances environment does
//! (`lab_probes::concurrency` drives it and says the arguments). Each
//! request is one sign-in: the sample event's first password alone, at its
//! cost.

use lab_probes::concurrency::{self, Work, diagnostic, invocation, text};
use password_hasher::calibration::Estimates;
use password_hasher::config::Config;
use password_hasher::handler::Handler;
use serde_json::{Value, json};

lab_probes::declare_allocator!();

/// One request, for the report.
const REQUEST: &str = "one password hashed at the sample event's cost (a sign-up)";

/// The sample event the requests are made of.
const HASH_EVENT: &str = include_str!("../../../../events/password-hasher/hash.json");

struct Hasher(Handler, Value);

impl Work for Hasher {
    async fn serve(&self, _: u64) -> Result<bool, String> {
        let raw = serde_json::value::to_raw_value(&self.1).map_err(text)?;
        let answer = self.0.handle(invocation(raw)).await.map_err(diagnostic)?;
        match answer["hashes"].as_array().map(Vec::len) {
            Some(1) => Ok(true),
            _ => Err(format!("not one hash: {answer}")),
        }
    }
}

#[tokio::main]
async fn main() -> Result<(), String> {
    concurrency::probe(REQUEST, |env| {
        let (init, config) = shared::start(env, Config::from_env).map_err(text)?;
        let handler = Handler::new(init.clone(), config, Estimates::on_demand());
        let mut event: Value = serde_json::from_str(HASH_EVENT).map_err(text)?;
        let first = event["passwords"][0].take();
        event["passwords"] = json!([first]);
        Ok((Hasher(handler, event), init.vcpus.share))
    })
    .await
}

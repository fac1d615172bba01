//! A function for the memory-limit test: each invocation allocates and touches
//! `{"mib": N}` MiB and keeps it (the process only grows), and answers
//! `{"invocation": K}`, K counting this process's invocations from 1 (so 1
//! means a cold start).

use lambda_runtime::{Error, LambdaEvent, service_fn};
use serde_json::{Value, json};
use std::sync::Mutex;

/// What every invocation so far allocated, kept until the process ends.
static KEPT: Mutex<Vec<Vec<u8>>> = Mutex::new(Vec::new());

async fn handle(event: LambdaEvent<Value>) -> Result<Value, Error> {
    let mib = event.payload["mib"]
        .as_u64()
        .ok_or("the event needs \"mib\": a whole number")?;
    let bytes = usize::try_from(mib)?
        .checked_mul(1024 * 1024)
        .ok_or("too many MiB")?;
    // Written, not only reserved: untouched pages would not count.
    let block = vec![1_u8; bytes];
    let mut kept = KEPT.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    kept.push(block);
    Ok(json!({ "invocation": kept.len() }))
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda_runtime::run(service_fn(handle)).await
}

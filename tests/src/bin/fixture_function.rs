//! The local stack's test function: a function built on `shared` as every
//! function of the project is (settings, logging, vCPUs and the Rayon pool,
//! traces, the runtime loop), so that the stack's behaviours (concurrency,
//! throttling, memory and CPU limits, the Invoke API, Step Functions tasks,
//! traces) are tested on it and not on a sample a user may remove.
//!
//! Each event may ask for, in this order:
//! - `{"mib": N}`: allocate, touch and keep N MiB (the process only grows);
//! - `{"sleep_ms": N}`: answer N milliseconds later (at most a minute);
//! - `{"fail": "message"}`: fail with `errorType` `FixtureFailure`.
//!
//! It answers `{"invocation": K}`, K counting this process's invocations
//! from 1 (so 1 means a cold start).

use lambda_runtime::{Diagnostic, LambdaEvent};
use serde_json::{Value, json};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

shared::global_allocator!(System);

/// What every invocation so far allocated, kept until the process ends.
static KEPT: Mutex<Vec<Vec<u8>>> = Mutex::new(Vec::new());
/// Invocations of this process so far.
static INVOCATIONS: AtomicU64 = AtomicU64::new(0);
/// The longest sleep asked for.
const MAX_SLEEP_MS: u64 = 60_000;

fn refused(message: impl Into<String>) -> Diagnostic {
    Diagnostic {
        error_type: "InvalidRequest".into(),
        error_message: message.into(),
    }
}

async fn handle(event: LambdaEvent<Value>) -> Result<Value, Diagnostic> {
    let invocation = INVOCATIONS.fetch_add(1, Ordering::Relaxed) + 1;
    let payload = event.payload;
    if let Some(mib) = payload.get("mib") {
        let bytes = mib
            .as_u64()
            .and_then(|mib| usize::try_from(mib).ok()?.checked_mul(1 << 20))
            .ok_or_else(|| refused("\"mib\" is a whole number of MiB"))?;
        // Written, not only reserved: untouched pages would not count.
        let block = vec![1_u8; bytes];
        KEPT.lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .push(block);
    }
    if let Some(ms) = payload.get("sleep_ms") {
        let ms = ms
            .as_u64()
            .filter(|ms| *ms <= MAX_SLEEP_MS)
            .ok_or_else(|| refused(format!("\"sleep_ms\" is at most {MAX_SLEEP_MS}")))?;
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }
    if let Some(message) = payload.get("fail") {
        return Err(Diagnostic {
            error_type: "FixtureFailure".into(),
            error_message: message.as_str().unwrap_or("asked to fail").into(),
        });
    }
    // A line inside the invocation's span (its request id, cold start).
    tracing::info!(invocation, "handled");
    Ok(json!({ "invocation": invocation }))
}

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    let (init, ()) = shared::start_or_exit(|_| Ok::<_, String>(()));
    shared::run(&init, lambda_runtime::service_fn(handle)).await
}

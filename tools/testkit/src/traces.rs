//! Checks of what a function traced: a producer's trace header, and the spans
//! a local X-Ray daemon received or Zipkin holds.

use local_stack::xray_daemon::Daemon;
use local_stack::zipkin::Zipkin;
use serde_json::Value;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// A producer's trace header: a new X-Ray trace id (its first part the time),
/// a parent segment id, sampled.
pub fn producer_header() -> (String, String) {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970");
    let random = format!(
        "{:024x}",
        u128::from(fastrand::u64(..)) << 32 | u128::from(fastrand::u32(..))
    );
    let trace_id = format!("{:08x}{random}", now.as_secs());
    let header = format!(
        "Root=1-{}-{random};Parent={:016x};Sampled=1",
        &trace_id[..8],
        fastrand::u64(1..)
    );
    (header, trace_id)
}

/// The parent segment id a trace header names (`Parent=`).
pub fn parent(header: &str) -> &str {
    header
        .split("Parent=")
        .nth(1)
        .and_then(|p| p.get(..16))
        .unwrap_or_default()
}

/// The spans of `trace_id` once Zipkin holds `wanted` of them (or what it
/// holds after 10 s).
pub fn trace(zipkin: &Zipkin, trace_id: &str, wanted: usize) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let spans = zipkin.trace(trace_id).unwrap_or_else(|e| panic!("{e}"));
        if spans.len() >= wanted || Instant::now() >= deadline {
            return spans;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The span named `name` (Zipkin stores names in lower case).
pub fn named<'a>(spans: &'a [Value], name: &str) -> &'a Value {
    spans
        .iter()
        .find(|s| s["name"].as_str() == Some(name.to_lowercase().as_str()))
        .unwrap_or_else(|| panic!("no span {name} in {spans:#?}"))
}

/// The first `wanted` spans named `name` the daemon received (waiting up
/// to 10 s for them).
pub fn spans_named(daemon: &Daemon, name: &str, wanted: usize) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let found: Vec<Value> = daemon
            .spans()
            .into_iter()
            .filter(|span| span["name"] == name)
            .collect();
        if found.len() >= wanted || Instant::now() >= deadline {
            return found;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

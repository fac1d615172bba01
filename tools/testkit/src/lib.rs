//! The generic harness of the tests of any function: builds the real function
//! binaries and runs them under the Lambda runtime interface emulator,
//! configured from `template.yaml`, beside the local AWS services, on free
//! loopback ports. Everything started is stopped on drop, also when a test
//! fails. It knows functions only through the template, the binaries and the
//! sample events; what is one function's lives in that function's folder.

pub mod bad_input;
pub mod deployed;
mod functions;
pub mod fuzz;
mod limits;
pub mod managed_instances;
mod scratch;
pub mod secrets;
mod servers;
pub mod throttling_proxy;
pub mod traces;

pub use functions::*;
pub use limits::*;
pub use local_stack::emulator::init_duration_ms;
pub use local_stack::workspace_root;
pub use scratch::*;
pub use servers::*;
use std::sync::{Mutex, MutexGuard};

/// `mutex` locked, also after a panic of another thread that held it (a
/// failed test still reports what it saw).
pub fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The JSON log lines among `logs` (the function's own lines under
/// `AWS_LAMBDA_LOG_FORMAT=JSON`; the emulator's lines are plain text).
pub fn json_lines(logs: &str) -> Vec<serde_json::Value> {
    logs.lines()
        .filter(|line| line.starts_with('{'))
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect()
}

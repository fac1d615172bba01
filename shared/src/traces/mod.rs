//! Traces: every invocation as an OpenTelemetry span in the caller's trace,
//! with the function's own spans and the AWS SDK's calls inside it.
//!
//! - `TRACING`: `off` (the default: no tracer, no exporter, nothing but the
//!   log) or `on`. The template sets `on` where Lambda's active tracing is on.
//! - `AWS_XRAY_DAEMON_ADDRESS`: where spans go when `TRACING` is `on`
//!   (`127.0.0.1:2000`). Lambda sets it with active tracing; so does the
//!   local stack. Where no daemon runs it is unset or empty (`sam local
//!   invoke` sets it empty), and tracing stays off: `shared init done` says
//!   `tracing: "no daemon"`.
//!
//! How spans leave the function ([`daemon`]): as OTLP protobuf in UDP
//! datagrams to Lambda's X-Ray daemon, the way AWS's OpenTelemetry
//! distributions export on Lambda. A datagram is one `sendto` on loopback: no
//! connection, no answer awaited, so exporting never adds a round trip to an
//! invocation, and what is sent is the daemon's to deliver, also after Lambda
//! freezes or ends the environment. Spans are sent when the invocation's span
//! ends (after the answer is posted) and at the end of init.
//!
//! Which spans: the spans of this workspace's crates at INFO and above, and
//! the AWS SDK's one span per operation (`DynamoDB.PutItem`, marked by its
//! `rpc.system` field). Log lines are not copied into spans; the SDK's inner
//! spans (attempts, serialisation) are left out. No span carries an event
//! body or a secret: a span's fields are what its code names (an order id,
//! counts), never the payload.
//!
//! Built in with `shared`'s `traces` feature (each function's manifest turns
//! it on with its own `traces` feature, a default one: `sam build` builds a
//! function with its own features, so one built without it carries no
//! exporter). Without it, every function here does nothing.
//!
//! Whether an invocation is recorded follows the trace header Lambda hands the
//! runtime (`Sampled=1`): Lambda samples, the function follows. An invocation
//! without a header (a local run) starts a trace of its own.

#[cfg(feature = "traces")]
pub mod daemon;
// The exporter when built in, else the same functions doing nothing.
#[cfg_attr(not(feature = "traces"), path = "not_built_in.rs")]
mod tracer;

#[cfg(feature = "traces")]
pub use tracer::from_header;
pub use tracer::{continue_trace, flush, link};
pub(crate) use tracer::{layer, warm};

use crate::config::{ConfigError, Env};
use std::net::SocketAddr;

/// The setting that turns tracing on.
pub const TRACING_VAR: &str = "TRACING";
/// Where Lambda's X-Ray daemon listens (set by Lambda with active tracing).
pub const DAEMON_ADDRESS_VAR: &str = "AWS_XRAY_DAEMON_ADDRESS";

/// Validated tracing settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settings {
    /// No tracer: spans are the log's only.
    Off,
    /// Spans exported to the daemon at this address.
    On {
        /// The X-Ray daemon's UDP address.
        daemon: SocketAddr,
    },
    /// `TRACING=on` where no daemon runs (no `AWS_XRAY_DAEMON_ADDRESS`): as
    /// off.
    NoDaemon,
    /// `TRACING=on` in a build without `shared`'s `traces` feature: as off.
    NotBuiltIn,
}

impl Settings {
    /// What `shared init done` says of tracing.
    pub fn describe(&self) -> &'static str {
        match self {
            Self::Off => "off",
            Self::On { .. } => "on",
            Self::NoDaemon => "no daemon",
            Self::NotBuiltIn => "not built in",
        }
    }
}

impl Settings {
    /// Read and validate `TRACING` and, when it is on, the daemon's address.
    pub fn from_env(env: &dyn Env) -> Result<Self, ConfigError> {
        match env.get(TRACING_VAR)?.as_deref().map(str::trim) {
            None | Some("off") => Ok(Self::Off),
            Some("on") if !cfg!(feature = "traces") => Ok(Self::NotBuiltIn),
            Some("on") => {
                // `sam local invoke` sets it empty.
                let address = env.get(DAEMON_ADDRESS_VAR)?;
                let Some(address) = address.filter(|a| !a.trim().is_empty()) else {
                    return Ok(Self::NoDaemon);
                };
                let daemon = daemon_address(&address).ok_or_else(|| {
                    ConfigError::new(DAEMON_ADDRESS_VAR, &address, "must be IP:port")
                })?;
                Ok(Self::On { daemon })
            }
            Some(other) => Err(ConfigError::new(
                TRACING_VAR,
                other,
                "must be \"on\" or \"off\"",
            )),
        }
    }
}

/// The daemon's UDP address. Lambda may give two (`UDP and TCP`:
/// `127.0.0.1:2000 127.0.0.1:2000`); the first is the UDP one.
fn daemon_address(value: &str) -> Option<SocketAddr> {
    value.split_whitespace().next()?.parse().ok()
}

#[cfg(all(test, feature = "traces"))]
mod tests;

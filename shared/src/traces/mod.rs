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
//! Whether an invocation is recorded follows the trace header Lambda hands the
//! runtime (`Sampled=1`): Lambda samples, the function follows. An invocation
//! without a header (a local run) starts a trace of its own.

pub mod daemon;

use crate::config::{ConfigError, Env};
use opentelemetry::trace::{SpanContext, TracerProvider as _};
use opentelemetry::{Context, KeyValue, trace::TraceContextExt};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider};
use std::net::SocketAddr;
use std::sync::OnceLock;
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::Layer;
use tracing_subscriber::filter::filter_fn;
use tracing_subscriber::registry::Registry;

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
}

impl Settings {
    /// What `shared init done` says of tracing.
    pub fn describe(&self) -> &'static str {
        match self {
            Self::Off => "off",
            Self::On { .. } => "on",
            Self::NoDaemon => "no daemon",
        }
    }
}

impl Settings {
    /// Read and validate `TRACING` and, when it is on, the daemon's address.
    pub fn from_env(env: &dyn Env) -> Result<Self, ConfigError> {
        match env.get(TRACING_VAR)?.as_deref().map(str::trim) {
            None | Some("off") => Ok(Self::Off),
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

/// The provider of this process, kept for [`flush`].
static PROVIDER: OnceLock<SdkTracerProvider> = OnceLock::new();

/// The `tracing` layer that turns spans into OpenTelemetry spans, or `None`
/// when tracing is off (then nothing is built: no socket, no tracer).
pub(crate) fn layer(
    settings: Settings,
    env: &dyn Env,
) -> Result<Option<Box<dyn Layer<Registry> + Send + Sync>>, std::io::Error> {
    let Settings::On { daemon } = settings else {
        return Ok(None);
    };
    let provider = SdkTracerProvider::builder()
        .with_span_processor(daemon::Processor::connect(daemon)?)
        .with_sampler(Sampler::ParentBased(Box::new(Sampler::AlwaysOn)))
        .with_id_generator(opentelemetry_aws::trace::XrayIdGenerator::default())
        .with_resource(resource(env))
        .build();
    let tracer = provider.tracer("shared");
    let _ = PROVIDER.set(provider);
    let layer = tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_threads(false)
        .with_location(false)
        .with_tracked_inactivity(false)
        .with_target(false)
        .with_filter(filter_fn(|meta| meta.is_span() && traced(meta)));
    Ok(Some(Box::new(layer)))
}

/// Whether a span is one of the trace's: this workspace's at INFO and above,
/// and the AWS SDK's per-operation span.
fn traced(meta: &tracing::Metadata<'_>) -> bool {
    if meta.fields().field(daemon::SDK_OPERATION_FIELD).is_some() {
        return true;
    }
    *meta.level() <= tracing::Level::INFO
        && !meta.target().starts_with("aws_")
        && !meta.target().starts_with("lambda_runtime")
        && !meta.target().starts_with("hyper")
        && !meta.target().starts_with("h2")
}

/// What every span of this process shares: the function, in OpenTelemetry's
/// names for a Lambda function.
fn resource(env: &dyn Env) -> Resource {
    let get = |name: &'static str| env.get(name).ok().flatten();
    let name = get("AWS_LAMBDA_FUNCTION_NAME").unwrap_or_else(|| "unknown_function".to_owned());
    let mut attributes = vec![
        KeyValue::new("cloud.provider", "aws"),
        KeyValue::new("cloud.platform", "aws_lambda"),
        KeyValue::new("faas.name", name.clone()),
    ];
    for (key, var) in [
        ("cloud.region", "AWS_REGION"),
        ("faas.version", "AWS_LAMBDA_FUNCTION_VERSION"),
        ("faas.instance", "AWS_LAMBDA_LOG_STREAM_NAME"),
    ] {
        if let Some(value) = get(var) {
            attributes.push(KeyValue::new(key, value));
        }
    }
    Resource::builder_empty()
        .with_service_name(name)
        .with_attributes(attributes)
        .build()
}

/// The span context an X-Ray trace header names (`Root=1-...;Parent=...;Sampled=1`),
/// as the parent or link it is for the spans of this function; `None` for an
/// absent or malformed header.
pub fn from_header(header: &str) -> Option<SpanContext> {
    opentelemetry_aws::trace::xray_propagator::span_context_from_str(header)
        .filter(SpanContext::is_valid)
}

/// Make `span` continue the trace `header` names (the invocation's, from
/// Lambda). Nothing happens when tracing is off or the header is not valid.
pub fn continue_trace(span: &tracing::Span, header: Option<&str>) {
    if let Some(parent) = header.and_then(from_header) {
        // Fails only when the span is already started in a trace: it then
        // stays there.
        let _ = span.set_parent(Context::new().with_remote_span_context(parent));
    }
}

/// Link `span` to the trace `header` names (a message's producer, when the
/// span already belongs to another trace): at most one link per call.
pub fn link(span: &tracing::Span, header: Option<&str>) {
    if let Some(producer) = header.and_then(from_header)
        && span.context().span().span_context().trace_id() != producer.trace_id()
    {
        span.add_link(producer);
    }
}

/// A trace header for [`warm`]: sampled, so the whole path runs.
const WARM_UP_HEADER: &str =
    "Root=1-00000000-000000000000000000000001;Parent=0000000000000001;Sampled=1";

/// Run once during init what a first traced invocation would otherwise pay
/// for the first time: a header's parsing, the sampler, the id generator, a
/// span's fields of each kind, a link, the encoding of a datagram. The
/// processor encodes the two spans it makes and drops them: nothing is sent.
pub(crate) fn warm() {
    let span = tracing::info_span!(
        daemon::WARM_UP_SPAN,
        request_id = daemon::WARM_UP_SPAN,
        cold_start = true,
        items = 1_u64,
        share = 1.0_f64
    );
    continue_trace(&span, Some(WARM_UP_HEADER));
    span.in_scope(|| {
        let child = tracing::info_span!(daemon::WARM_UP_SPAN, count = 1_i64);
        link(
            &child,
            Some(&WARM_UP_HEADER.replace("000000000000000000000001", "000000000000000000000002")),
        );
    });
}

/// Send every span that has ended. Called at the end of init; an
/// invocation's spans are sent when it ends.
pub fn flush() {
    if let Some(provider) = PROVIDER.get() {
        let _ = provider.force_flush();
    }
}

#[cfg(test)]
mod tests;

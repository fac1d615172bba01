//! The exporter (`shared`'s `traces` feature): `tracing` spans as
//! OpenTelemetry spans, sent to the daemon (see the module's documentation).

use super::{Settings, daemon};
use crate::config::Env;
use opentelemetry::trace::{SpanContext, TracerProvider as _};
use opentelemetry::{Context, KeyValue, trace::TraceContextExt};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider};
use std::sync::OnceLock;
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::Layer;
use tracing_subscriber::filter::filter_fn;
use tracing_subscriber::registry::Registry;

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
/// Another trace, for [`warm`]'s link.
const WARM_UP_LINK: &str =
    "Root=1-00000000-000000000000000000000002;Parent=0000000000000001;Sampled=1";

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
        link(&child, Some(WARM_UP_LINK));
    });
}

/// Send every span that has ended. Called at the end of init; an
/// invocation's spans are sent when it ends.
pub fn flush() {
    if let Some(provider) = PROVIDER.get() {
        let _ = provider.force_flush();
    }
}

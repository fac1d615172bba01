//! The span processor that sends finished spans to Lambda's X-Ray daemon as
//! OTLP over UDP: each datagram is the daemon's protocol header, a line
//! break, `T1S` (sampled spans) and the base64 of an OTLP
//! `ExportTraceServiceRequest` in protobuf, at most [`SPANS_PER_DATAGRAM`]
//! spans, so that a datagram stays well below UDP's 64 KiB.
//!
//! Spans wait in a bounded buffer until the invocation's span ends (or init
//! does, [`super::flush`]), then leave in one or a few datagrams. A full
//! buffer is sent at once rather than grown.

use opentelemetry::Context;
use opentelemetry::trace::SpanKind;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::transform::common::tonic::ResourceAttributesWithSchema;
use opentelemetry_proto::transform::trace::tonic::group_spans_by_resource_and_scope;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{Span, SpanData, SpanProcessor};
use prost::Message;
use std::net::{SocketAddr, UdpSocket};
use std::sync::Mutex;
use std::time::Duration;

/// The daemon's protocol header, then a line break.
pub(crate) const PROTOCOL_HEADER: &str = "{\"format\":\"json\",\"version\":1}\n";
/// Marks a datagram of sampled OTLP spans.
pub(crate) const SAMPLED_SPANS_PREFIX: &str = "T1S";
/// Spans per datagram (as AWS's distributions send).
pub const SPANS_PER_DATAGRAM: usize = 10;
/// Spans kept before they are sent even though no invocation ended.
const BUFFERED_SPANS: usize = 200;
/// The field the AWS SDK's per-operation span carries (`aws-api`).
pub(crate) const SDK_OPERATION_FIELD: &str = "rpc.system";
/// The name of the span of an invocation (`shared::invocation`).
const INVOCATION_SPAN: &str = "invocation";
/// The name of [`super::warm`]'s spans: encoded like any other, then dropped.
pub(crate) const WARM_UP_SPAN: &str = "warm-up";

/// Sends finished spans to the daemon.
#[derive(Debug)]
pub struct Processor {
    socket: UdpSocket,
    pending: Mutex<Vec<SpanData>>,
    resource: ResourceAttributesWithSchema,
}

impl Processor {
    /// A processor sending to `daemon`, from an unconnected local socket.
    pub fn connect(daemon: SocketAddr) -> std::io::Result<Self> {
        let local: SocketAddr = if daemon.is_ipv4() {
            ([127, 0, 0, 1], 0).into()
        } else {
            (std::net::Ipv6Addr::LOCALHOST, 0).into()
        };
        let socket = UdpSocket::bind(local)?;
        socket.connect(daemon)?;
        socket.set_nonblocking(true)?;
        Ok(Self {
            socket,
            pending: Mutex::new(Vec::new()),
            resource: ResourceAttributesWithSchema::default(),
        })
    }

    /// Send every pending span. A datagram the socket refuses (nobody
    /// listening, a full buffer) is dropped: tracing never fails or slows an
    /// invocation.
    fn send_pending(&self) {
        let spans = std::mem::take(&mut *self.lock());
        for chunk in spans.chunks(SPANS_PER_DATAGRAM) {
            let _ = self.socket.send(&datagram(chunk.to_vec(), &self.resource));
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<SpanData>> {
        // A panic while holding the lock left a valid Vec behind.
        self.pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// One datagram holding `spans`.
pub(crate) fn datagram(spans: Vec<SpanData>, resource: &ResourceAttributesWithSchema) -> Vec<u8> {
    use base64::Engine as _;
    let request = ExportTraceServiceRequest {
        resource_spans: group_spans_by_resource_and_scope(spans, resource),
    };
    let encoded = base64::engine::general_purpose::STANDARD.encode(request.encode_to_vec());
    [PROTOCOL_HEADER, SAMPLED_SPANS_PREFIX, &encoded]
        .concat()
        .into_bytes()
}

/// The kind `tracing` cannot say: an invocation serves a request, an SDK
/// operation is a client's call.
fn kind_of(span: &SpanData) -> SpanKind {
    if span.name == INVOCATION_SPAN {
        SpanKind::Server
    } else if span
        .attributes
        .iter()
        .any(|kv| kv.key.as_str() == SDK_OPERATION_FIELD)
    {
        SpanKind::Client
    } else {
        span.span_kind.clone()
    }
}

impl SpanProcessor for Processor {
    fn on_start(&self, _span: &mut Span, _cx: &Context) {}

    fn on_end(&self, mut span: SpanData) {
        if !span.span_context.is_sampled() {
            return;
        }
        span.span_kind = kind_of(&span);
        if span.name == WARM_UP_SPAN {
            std::hint::black_box(datagram(vec![span], &self.resource));
            return;
        }
        let ends_invocation = span.name == INVOCATION_SPAN;
        let full = {
            let mut pending = self.lock();
            pending.push(span);
            pending.len() >= BUFFERED_SPANS
        };
        if ends_invocation || full {
            self.send_pending();
        }
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.send_pending();
        Ok(())
    }

    fn shutdown_with_timeout(&self, _timeout: Duration) -> OTelSdkResult {
        self.send_pending();
        Ok(())
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.resource = resource.into();
    }
}

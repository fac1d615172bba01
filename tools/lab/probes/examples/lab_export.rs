//! Performance-lab probe: what handing an invocation's spans off costs the
//! invocation, for three ways spans can leave a Lambda function, side by side
//! in one environment (the rounds interleaved):
//!
//! - `udp`: what ships (`shared::traces::daemon::Processor`): OTLP protobuf
//!   in datagrams to the X-Ray daemon (`LAB_DAEMON`, the lab's receiver,
//!   outside the environment as Lambda's daemon is), no answer awaited;
//! - `http`: OTLP/HTTP, the same protobuf POSTed to a collector on loopback
//!   and its answer awaited, as an exporter flushing at the invocation's end
//!   does; the collector runs in the function's process, as a collector
//!   extension shares the environment;
//! - `log`: each span as one JSON line on stdout, for a log forwarder.
//!
//! The spans are an order processor's batch of ten: the invocation, ten
//! records, ten `PutItem` calls. Each invocation (`{"rounds": N}`) answers
//! the microseconds of each path per round and what each delivered.

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::service::service_fn as hyper_service;
use lambda_runtime::{Error, LambdaEvent, service_fn};
use opentelemetry::trace::{
    SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState,
};
use opentelemetry::{InstrumentationScope, KeyValue};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::transform::common::tonic::ResourceAttributesWithSchema;
use opentelemetry_proto::transform::trace::tonic::group_spans_by_resource_and_scope;
use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanLinks, SpanProcessor};
use prost::Message;
use serde_json::{Value, json};
use shared::traces::daemon::Processor;
use std::io::Write;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime};

lab_probes::declare_allocator!();

/// Records in the batch: one span each, and one `PutItem` span each.
const RECORDS: u64 = 10;
/// Rounds run before the measured ones (first-use costs of each path).
const WARM_UP_ROUNDS: usize = 5;
/// Largest OTLP request the collector reads.
const MAX_REQUEST_BYTES: usize = 4 << 20;

#[tokio::main]
async fn main() -> Result<(), Error> {
    let daemon: SocketAddr = std::env::var("LAB_DAEMON")
        .map_err(|e| format!("LAB_DAEMON: {e}"))?
        .parse()
        .map_err(|e| format!("LAB_DAEMON: {e}"))?;
    let collector = Collector::start().await?;
    lambda_runtime::run(service_fn(|event: LambdaEvent<Value>| {
        let collector = collector.clone();
        async move {
            let rounds = event.payload["rounds"]
                .as_u64()
                .ok_or("the event names no \"rounds\"")? as usize;
            tokio::task::spawn_blocking(move || measure(daemon, &collector, rounds)).await?
        }
    }))
    .await
}

/// `rounds` rounds of the three paths (after [`WARM_UP_ROUNDS`]).
fn measure(daemon: SocketAddr, collector: &Collector, rounds: usize) -> Result<Value, Error> {
    let udp = Processor::connect(daemon)?;
    let http = ureq::Agent::new_with_defaults();
    let spans = batch();
    let (mut udp_us, mut http_us, mut log_us) = (Vec::new(), Vec::new(), Vec::new());
    let (mut datagrams, mut lines) = (0, 0);
    let acknowledged_before = collector.spans.load(Ordering::SeqCst);
    for round in 0..WARM_UP_ROUNDS + rounds {
        let measured = round >= WARM_UP_ROUNDS;
        // The three in turn, their order shifted each round.
        for path in (0..3).map(|i| (i + round) % 3) {
            let spans = spans.clone();
            let started = Instant::now();
            match path {
                0 => {
                    for span in spans {
                        udp.on_end(span);
                    }
                }
                1 => post(&http, &collector.url, spans)?,
                _ => lines += log(spans)?,
            }
            let us = started.elapsed().as_secs_f64() * 1e6;
            if measured {
                [&mut udp_us, &mut http_us, &mut log_us][path].push(us);
            }
        }
        datagrams += spans
            .len()
            .div_ceil(shared::traces::daemon::SPANS_PER_DATAGRAM);
    }
    Ok(json!({
        "spans": spans.len(),
        "udp_us": udp_us,
        "http_us": http_us,
        "log_us": log_us,
        "udp_datagrams": datagrams,
        "http_spans_acknowledged": collector.spans.load(Ordering::SeqCst) - acknowledged_before,
        "log_lines": lines,
        "warm_up_rounds": WARM_UP_ROUNDS,
    }))
}

/// The OTLP/HTTP export of `spans`: encode, POST, read the answer.
fn post(agent: &ureq::Agent, url: &str, spans: Vec<SpanData>) -> Result<(), Error> {
    let request = ExportTraceServiceRequest {
        resource_spans: group_spans_by_resource_and_scope(
            spans,
            &ResourceAttributesWithSchema::default(),
        ),
    };
    let mut answer = agent
        .post(url)
        .header("content-type", "application/x-protobuf")
        .send(&request.encode_to_vec()[..])?;
    ExportTraceServiceResponse::decode(answer.body_mut().read_to_vec()?.as_slice())?;
    Ok(())
}

/// Each span as one JSON line on stdout; the lines written.
fn log(spans: Vec<SpanData>) -> Result<usize, Error> {
    let mut out = std::io::stdout().lock();
    let count = spans.len();
    for span in spans {
        let attributes: serde_json::Map<String, Value> = span
            .attributes
            .iter()
            .map(|kv| (kv.key.to_string(), json!(kv.value.to_string())))
            .collect();
        let line = json!({
            "trace_id": span.span_context.trace_id().to_string(),
            "span_id": span.span_context.span_id().to_string(),
            "parent_span_id": span.parent_span_id.to_string(),
            "name": span.name,
            "kind": format!("{:?}", span.span_kind),
            "start_unix_nano": nanos(span.start_time),
            "end_unix_nano": nanos(span.end_time),
            "attributes": attributes,
        });
        // One write per line, as a logging layer writes each event.
        out.write_all(format!("{line}\n").as_bytes())?;
    }
    out.flush()?;
    Ok(count)
}

fn nanos(time: SystemTime) -> u128 {
    time.duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos()
}

/// The order processor's spans for a batch of [`RECORDS`] orders, the
/// invocation's last (it ends last).
fn batch() -> Vec<SpanData> {
    let trace = TraceId::from(0x5759_e988_bd86_2e3f_e1be_46a9_9427_2793_u128);
    let invocation = SpanId::from(1_u64);
    let span = |id: u64, parent: SpanId, name: &'static str, attributes: Vec<KeyValue>| {
        let start = SystemTime::now();
        SpanData {
            span_context: SpanContext::new(
                trace,
                SpanId::from(id),
                TraceFlags::SAMPLED,
                false,
                TraceState::default(),
            ),
            parent_span_id: parent,
            parent_span_is_remote: false,
            span_kind: SpanKind::Internal,
            name: name.into(),
            start_time: start,
            end_time: start + Duration::from_micros(900),
            attributes,
            dropped_attributes_count: 0,
            events: SpanEvents::default(),
            links: SpanLinks::default(),
            status: Status::Unset,
            instrumentation_scope: InstrumentationScope::builder("shared").build(),
        }
    };
    let mut spans = Vec::new();
    for n in 0..RECORDS {
        let record = SpanId::from(100 + n);
        spans.push(span(
            200 + n,
            record,
            "DynamoDB.PutItem",
            vec![
                KeyValue::new("rpc.system", "aws-api"),
                KeyValue::new("rpc.service", "DynamoDB"),
                KeyValue::new("rpc.method", "PutItem"),
            ],
        ));
        spans.push(span(
            100 + n,
            invocation,
            "record",
            vec![
                KeyValue::new("message_id", format!("{n:08}-5fb0-4a4c-9d8a-4c3c1b2a9e10")),
                KeyValue::new("order_id", format!("ord-{n:06}")),
                KeyValue::new("outcome", "written"),
            ],
        ));
    }
    spans.push(span(
        1,
        SpanId::INVALID,
        "invocation",
        vec![
            KeyValue::new("request_id", "8476a536-e9f4-11e8-9739-2dfe598c3fcd"),
            KeyValue::new("cold_start", false),
        ],
    ));
    spans
}

/// An OTLP/HTTP collector on a free loopback port, counting the spans it
/// acknowledges.
#[derive(Clone)]
struct Collector {
    url: String,
    spans: Arc<AtomicUsize>,
}

impl Collector {
    async fn start() -> Result<Self, Error> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}/v1/traces", listener.local_addr()?);
        let spans = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&spans);
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let counted = Arc::clone(&counted);
                let service = hyper_service(move |request| export(request, Arc::clone(&counted)));
                tokio::spawn(
                    hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), service),
                );
            }
        });
        Ok(Self { url, spans })
    }
}

/// One export request: its spans counted, OTLP's empty success answered.
async fn export(
    request: hyper::Request<Incoming>,
    counted: Arc<AtomicUsize>,
) -> Result<hyper::Response<Full<Bytes>>, Error> {
    let body = Limited::new(request.into_body(), MAX_REQUEST_BYTES)
        .collect()
        .await?
        .to_bytes();
    let exported = ExportTraceServiceRequest::decode(body)?;
    let spans: usize = exported
        .resource_spans
        .iter()
        .flat_map(|r| &r.scope_spans)
        .map(|s| s.spans.len())
        .sum();
    counted.fetch_add(spans, Ordering::SeqCst);
    Ok(hyper::Response::builder()
        .header("content-type", "application/x-protobuf")
        .body(Full::new(Bytes::from(
            ExportTraceServiceResponse::default().encode_to_vec(),
        )))?)
}

//! The X-Ray daemon Lambda runs beside a function with active tracing, as far
//! as the functions meet it: a UDP address (`AWS_XRAY_DAEMON_ADDRESS`) taking
//! OTLP spans (the protocol header, `T1S`, the base64 of an OTLP protobuf
//! `ExportTraceServiceRequest`). Here it hands them to Zipkin, converted to
//! Zipkin's JSON v2, and keeps the last [`KEPT_SPANS`] for tests to read.
//! A datagram it cannot read is counted and dropped, as the daemon drops it.

use base64::Engine as _;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use prost::Message as _;
use serde_json::{Value, json};
use std::collections::VecDeque;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

/// The daemon's protocol header and line break, then the sampled spans' prefix.
const SAMPLED_SPANS: &str = "{\"format\":\"json\",\"version\":1}\nT1S";
/// Spans kept for [`Daemon::spans`]; older ones are dropped.
pub const KEPT_SPANS: usize = 50_000;
/// UDP's largest datagram.
const MAX_DATAGRAM: usize = 65_536;

/// A running local X-Ray daemon, stopped on drop.
#[derive(Debug)]
pub struct Daemon {
    address: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    shared: Arc<Shared>,
}

#[derive(Debug, Default)]
struct Shared {
    spans: Mutex<VecDeque<Value>>,
    unreadable: AtomicUsize,
}

impl Daemon {
    /// Listen on a free 127.0.0.1 UDP port; spans go to the Zipkin at
    /// `zipkin` (`http://127.0.0.1:PORT`) when one is given.
    pub fn start(zipkin: Option<String>) -> Result<Self, String> {
        let socket = UdpSocket::bind("127.0.0.1:0").map_err(|e| format!("X-Ray daemon: {e}"))?;
        let address = socket.local_addr().map_err(|e| e.to_string())?;
        socket
            .set_read_timeout(Some(Duration::from_millis(100)))
            .map_err(|e| e.to_string())?;
        let stop = Arc::new(AtomicBool::new(false));
        let shared = Arc::new(Shared::default());
        let thread = {
            let (stop, shared) = (Arc::clone(&stop), Arc::clone(&shared));
            std::thread::Builder::new()
                .name("xray-daemon".into())
                .spawn(move || receive(&socket, &stop, &shared, zipkin.as_deref()))
                .map_err(|e| e.to_string())?
        };
        Ok(Self {
            address,
            stop,
            thread: Some(thread),
            shared,
        })
    }

    /// `127.0.0.1:PORT`, for `AWS_XRAY_DAEMON_ADDRESS`.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// The spans received so far (Zipkin's JSON v2), oldest first.
    pub fn spans(&self) -> Vec<Value> {
        lock(&self.shared.spans).iter().cloned().collect()
    }

    /// Datagrams that were not OTLP spans.
    pub fn unreadable(&self) -> usize {
        self.shared.unreadable.load(Ordering::Relaxed)
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

fn receive(socket: &UdpSocket, stop: &AtomicBool, shared: &Shared, zipkin: Option<&str>) {
    let mut buffer = vec![0; MAX_DATAGRAM];
    while !stop.load(Ordering::Relaxed) {
        let Ok(n) = socket.recv(&mut buffer) else {
            continue;
        };
        let Some(spans) = buffer.get(..n).and_then(zipkin_spans) else {
            shared.unreadable.fetch_add(1, Ordering::Relaxed);
            continue;
        };
        if let Some(endpoint) = zipkin
            && let Err(e) = crate::zipkin::post(endpoint, &spans)
        {
            eprintln!("X-Ray daemon: {e}");
        }
        let mut kept = lock(&shared.spans);
        kept.extend(spans);
        let excess = kept.len().saturating_sub(KEPT_SPANS);
        kept.drain(..excess);
    }
}

/// The spans of one datagram in Zipkin's JSON v2; `None` if it is not a
/// datagram of sampled OTLP spans.
pub fn zipkin_spans(datagram: &[u8]) -> Option<Vec<Value>> {
    let body = std::str::from_utf8(datagram)
        .ok()?
        .strip_prefix(SAMPLED_SPANS)?;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(body)
        .ok()?;
    let request = ExportTraceServiceRequest::decode(bytes.as_slice()).ok()?;
    let mut spans = Vec::new();
    for resource in request.resource_spans {
        let service = resource
            .resource
            .iter()
            .flat_map(|r| &r.attributes)
            .find(|kv| kv.key == "service.name")
            .map_or_else(|| "unknown".to_owned(), |kv| text(kv.value.as_ref()));
        for scope in resource.scope_spans {
            for span in scope.spans {
                spans.push(zipkin_span(&service, span));
            }
        }
    }
    Some(spans)
}

/// One OTLP span as Zipkin's JSON v2: attributes and links become tags (Zipkin
/// has no links), events annotations, an error status the `error` tag.
fn zipkin_span(service: &str, span: opentelemetry_proto::tonic::trace::v1::Span) -> Value {
    let mut tags: serde_json::Map<String, Value> = span
        .attributes
        .iter()
        .map(|kv: &KeyValue| (kv.key.clone(), Value::String(text(kv.value.as_ref()))))
        .collect();
    for (n, link) in span.links.iter().enumerate() {
        tags.insert(
            format!("link.{n}"),
            Value::String(format!("{}-{}", hex(&link.trace_id), hex(&link.span_id))),
        );
    }
    if let Some(status) = &span.status
        && status.code == 2
    {
        tags.insert("error".into(), Value::String(status.message.clone()));
    }
    let kind = match span.kind {
        2 => Some("SERVER"),
        3 => Some("CLIENT"),
        4 => Some("PRODUCER"),
        5 => Some("CONSUMER"),
        _ => None,
    };
    let start = span.start_time_unix_nano / 1_000;
    let mut value = json!({
        "traceId": hex(&span.trace_id),
        "id": hex(&span.span_id),
        "name": span.name,
        "timestamp": start,
        "duration": (span.end_time_unix_nano / 1_000).saturating_sub(start).max(1),
        "localEndpoint": { "serviceName": service },
        "tags": tags,
        "annotations": span.events.iter().map(|e| json!({
            "timestamp": e.time_unix_nano / 1_000,
            "value": e.name,
        })).collect::<Vec<_>>(),
    });
    if !span.parent_span_id.is_empty() {
        value["parentId"] = Value::String(hex(&span.parent_span_id));
    }
    if let Some(kind) = kind {
        value["kind"] = Value::String(kind.to_owned());
    }
    value
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// An attribute's value as text.
fn text(value: Option<&AnyValue>) -> String {
    match value.and_then(|v| v.value.as_ref()) {
        Some(any_value::Value::StringValue(s)) => s.clone(),
        Some(any_value::Value::BoolValue(b)) => b.to_string(),
        Some(any_value::Value::IntValue(i)) => i.to_string(),
        Some(any_value::Value::DoubleValue(d)) => d.to_string(),
        Some(other) => format!("{other:?}"),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry_proto::tonic::resource::v1::Resource;
    use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span, span::Link};

    fn string(key: &str, value: &str) -> KeyValue {
        KeyValue {
            key: key.into(),
            value: Some(AnyValue {
                value: Some(any_value::Value::StringValue(value.into())),
            }),
            ..KeyValue::default()
        }
    }

    fn datagram(spans: Vec<Span>) -> Vec<u8> {
        let request = ExportTraceServiceRequest {
            resource_spans: vec![ResourceSpans {
                resource: Some(Resource {
                    attributes: vec![string("service.name", "OrderProcessorFunction")],
                    ..Resource::default()
                }),
                scope_spans: vec![ScopeSpans {
                    spans,
                    ..ScopeSpans::default()
                }],
                ..ResourceSpans::default()
            }],
        };
        let body = base64::engine::general_purpose::STANDARD.encode(request.encode_to_vec());
        format!("{SAMPLED_SPANS}{body}").into_bytes()
    }

    #[test]
    fn otlp_spans_become_zipkin_spans_of_their_service() {
        let span = Span {
            trace_id: vec![0xab; 16],
            span_id: vec![0x01; 8],
            parent_span_id: vec![0x02; 8],
            name: "record".into(),
            kind: 2,
            start_time_unix_nano: 5_000_000,
            end_time_unix_nano: 7_000_000,
            attributes: vec![string("order_id", "o-1")],
            links: vec![Link {
                trace_id: vec![0xcd; 16],
                span_id: vec![0x03; 8],
                ..Link::default()
            }],
            ..Span::default()
        };
        let spans = zipkin_spans(&datagram(vec![span])).expect("a datagram of spans");
        assert_eq!(spans.len(), 1);
        let s = &spans[0];
        assert_eq!(s["traceId"], "ab".repeat(16));
        assert_eq!(
            (s["id"].as_str(), s["parentId"].as_str()),
            (Some("0101010101010101"), Some("0202020202020202"))
        );
        assert_eq!(
            (s["timestamp"].as_u64(), s["duration"].as_u64()),
            (Some(5_000), Some(2_000))
        );
        assert_eq!(s["kind"], "SERVER");
        assert_eq!(s["localEndpoint"]["serviceName"], "OrderProcessorFunction");
        assert_eq!(s["tags"]["order_id"], "o-1");
        assert_eq!(
            s["tags"]["link.0"],
            format!("{}-{}", "cd".repeat(16), "03".repeat(8))
        );
    }

    #[test]
    fn what_is_not_sampled_otlp_spans_is_unreadable() {
        let good = datagram(Vec::new());
        let unsampled = String::from_utf8(good.clone())
            .expect("text")
            .replace("T1S", "T1U");
        for bad in [
            &b"junk"[..],
            unsampled.as_bytes(),
            &good[..good.len() - 3],
            &[0xff, 0xfe],
        ] {
            assert!(zipkin_spans(bad).is_none());
        }
        let daemon = Daemon::start(None).expect("daemon");
        let socket = UdpSocket::bind("127.0.0.1:0").expect("socket");
        socket.send_to(b"junk", daemon.address()).expect("send");
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while daemon.unreadable() == 0 && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!((daemon.unreadable(), daemon.spans().len()), (1, 0));
    }
}

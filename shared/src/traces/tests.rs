use super::*;
use opentelemetry::trace::{SpanId, TraceId};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::trace::v1::Span as ProtoSpan;
use std::time::Duration;
use tracing_subscriber::layer::SubscriberExt;

const HEADER: &str = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1";

#[test]
fn off_is_the_default_and_on_sends_to_the_daemon_if_there_is_one() {
    assert_eq!(Settings::from_env(&[]).unwrap(), Settings::Off);
    assert_eq!(
        Settings::from_env(&[("TRACING", "off")]).unwrap(),
        Settings::Off
    );
    let on = Settings::from_env(&[
        ("TRACING", "on"),
        (
            "AWS_XRAY_DAEMON_ADDRESS",
            "169.254.79.129:2000 169.254.79.129:2000",
        ),
    ])
    .unwrap();
    assert_eq!(
        on,
        Settings::On {
            daemon: "169.254.79.129:2000".parse().unwrap()
        }
    );
    // `sam local invoke` runs no daemon: nothing to send to, so no tracer.
    let no_daemon = Settings::from_env(&[("TRACING", "on")]).unwrap();
    assert_eq!(no_daemon, Settings::NoDaemon);
    // `sam local invoke` sets the variable, empty.
    let empty = [("TRACING", "on"), ("AWS_XRAY_DAEMON_ADDRESS", "")];
    assert_eq!(Settings::from_env(&empty).unwrap(), Settings::NoDaemon);
    assert!(layer(no_daemon, &[]).unwrap().is_none());
    for (env, setting) in [
        (vec![("TRACING", "yes")], "TRACING"),
        (
            vec![("TRACING", "on"), ("AWS_XRAY_DAEMON_ADDRESS", "localhost")],
            "AWS_XRAY_DAEMON_ADDRESS",
        ),
    ] {
        assert_eq!(
            Settings::from_env(&env.as_slice()).unwrap_err().setting,
            setting
        );
    }
}

#[test]
fn tracing_off_builds_nothing() {
    assert!(layer(Settings::Off, &[]).unwrap().is_none());
}

#[test]
fn a_malformed_header_names_no_trace() {
    for bad in [
        "",
        "Root=1-nothex;Parent=53995c3f42cd8ad8",
        "Root=;Parent=;Sampled=1",
        "junk",
    ] {
        assert!(from_header(bad).is_none(), "{bad}");
    }
    let parent = from_header(HEADER).unwrap();
    assert_eq!(
        parent.span_id(),
        SpanId::from_hex("53995c3f42cd8ad8").unwrap()
    );
    assert!(parent.is_sampled());
}

/// The spans of the datagrams `socket` received within a second.
fn received(socket: &std::net::UdpSocket) -> Vec<(String, ProtoSpan)> {
    use base64::Engine as _;
    use prost::Message as _;
    socket
        .set_read_timeout(Some(Duration::from_secs(1)))
        .unwrap();
    let mut spans = Vec::new();
    let mut buffer = vec![0; 65_536];
    while let Ok(n) = socket.recv(&mut buffer) {
        let text = std::str::from_utf8(&buffer[..n]).unwrap();
        let body = text
            .strip_prefix(daemon::PROTOCOL_HEADER)
            .and_then(|b| b.strip_prefix(daemon::SAMPLED_SPANS_PREFIX))
            .expect("header and prefix");
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(body)
            .unwrap();
        let request = ExportTraceServiceRequest::decode(bytes.as_slice()).unwrap();
        for resource in request.resource_spans {
            let service = resource
                .resource
                .iter()
                .flat_map(|r| &r.attributes)
                .find(|kv| kv.key == "service.name")
                .and_then(|kv| kv.value.clone())
                .map(|v| format!("{v:?}"))
                .unwrap_or_default();
            for scope in resource.scope_spans {
                spans.extend(scope.spans.into_iter().map(|s| (service.clone(), s)));
            }
        }
    }
    spans
}

/// Run `spans` with tracing on and a daemon listening (the function named
/// `orders`); what the daemon received by the end. `spans` gets the daemon's
/// socket, to look at what it received so far.
fn traced(spans: impl FnOnce(&std::net::UdpSocket)) -> Vec<(String, ProtoSpan)> {
    let daemon = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let address: &'static str = daemon.local_addr().unwrap().to_string().leak();
    let env = [
        ("TRACING", "on"),
        ("AWS_XRAY_DAEMON_ADDRESS", address),
        ("AWS_LAMBDA_FUNCTION_NAME", "orders"),
    ];
    let settings = Settings::from_env(&env).unwrap();
    let subscriber = tracing_subscriber::registry().with(layer(settings, &env).unwrap());
    tracing::subscriber::with_default(subscriber, || spans(&daemon));
    received(&daemon)
}

#[test]
fn an_invocation_continues_the_lambda_trace_and_reaches_the_daemon_when_it_ends() {
    let producer = "Root=1-5759e988-00000000000000000000abcd;Parent=1111111111111111;Sampled=1";
    let spans = traced(|daemon| {
        let invocation = tracing::info_span!("invocation", request_id = "r-1");
        continue_trace(&invocation, Some(HEADER));
        invocation.in_scope(|| {
            let record = tracing::info_span!("record", order_id = "o-1");
            link(&record, Some(producer));
            record.in_scope(|| {
                let call = tracing::debug_span!(
                    target: "aws_sdk_dynamodb::operation::put_item",
                    "DynamoDB.PutItem",
                    "rpc.system" = "aws-api"
                );
                call.in_scope(|| tracing::info!(password = "hunter2", "a log line"));
                let _ = tracing::debug_span!(target: "aws_smithy_runtime", "try_attempt").entered();
            });
        });
        assert!(
            received(daemon).is_empty(),
            "nothing is sent before the invocation ends"
        );
        drop(invocation);
    });
    let names: Vec<&str> = spans.iter().map(|(_, s)| s.name.as_str()).collect();
    assert_eq!(
        names,
        ["DynamoDB.PutItem", "record", "invocation"],
        "{spans:?}"
    );
    let lambda_trace = TraceId::from_hex("5759e988bd862e3fe1be46a994272793").unwrap();
    for (service, span) in &spans {
        assert_eq!(
            span.trace_id,
            lambda_trace.to_bytes().to_vec(),
            "{}",
            span.name
        );
        assert!(service.contains("orders"), "{service}");
        assert!(span.events.is_empty(), "log lines stay out of spans");
    }
    let by_name = |name: &str| &spans.iter().find(|(_, s)| s.name == name).unwrap().1;
    let (invocation, record, call) = (
        by_name("invocation"),
        by_name("record"),
        by_name("DynamoDB.PutItem"),
    );
    assert_eq!(
        invocation.parent_span_id,
        SpanId::from_hex("53995c3f42cd8ad8")
            .unwrap()
            .to_bytes()
            .to_vec()
    );
    assert_eq!(record.parent_span_id, invocation.span_id);
    assert_eq!(call.parent_span_id, record.span_id);
    assert_eq!(invocation.kind, 2, "server");
    assert_eq!(call.kind, 3, "client");
    assert_eq!(record.links.len(), 1, "the producer's trace, linked");
    assert_eq!(
        record.links[0].trace_id,
        TraceId::from_hex("5759e98800000000000000000000abcd")
            .unwrap()
            .to_bytes()
            .to_vec()
    );
}

#[test]
fn an_unsampled_invocation_sends_nothing() {
    let spans = traced(|_| {
        let invocation = tracing::info_span!("invocation");
        continue_trace(&invocation, Some(&HEADER.replace("Sampled=1", "Sampled=0")));
        invocation.in_scope(|| tracing::info_span!("record").in_scope(|| ()));
    });
    assert!(spans.is_empty());
}

#[test]
fn warming_up_sends_nothing() {
    let spans = traced(|_| {
        warm();
        // What init ends with: the spans that ended are sent.
        let _ = tracing::info_span!("invocation").entered();
    });
    let names: Vec<&str> = spans.iter().map(|(_, s)| s.name.as_str()).collect();
    assert_eq!(names, ["invocation"], "only what is not the warm-up");
}

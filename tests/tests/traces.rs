//! Traces on the local stack: the real functions send their spans to the
//! local X-Ray daemon, which hands them to Zipkin; the tests read the traces
//! back from Zipkin's API, as a person would see them in its viewer.

use aws_sdk_sqs::types::{MessageSystemAttributeNameForSends, MessageSystemAttributeValue};
use e2e::{order_source, servers, servers_env, start, template};
use local_stack::event_source::EventSource;
use local_stack::xray_daemon::Daemon;
use local_stack::zipkin::Zipkin;
use serde_json::Value;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// A producer's trace header: a new X-Ray trace id (its first part the time),
/// a parent segment id, sampled.
fn producer_header() -> (String, String) {
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

/// The spans of `trace_id` once Zipkin holds `wanted` of them (or what it
/// holds after 10 s).
fn trace(zipkin: &Zipkin, trace_id: &str, wanted: usize) -> Vec<Value> {
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
fn named<'a>(spans: &'a [Value], name: &str) -> &'a Value {
    spans
        .iter()
        .find(|s| s["name"].as_str() == Some(name.to_lowercase().as_str()))
        .unwrap_or_else(|| panic!("no span {name} in {spans:#?}"))
}

/// An order sent with a producer's trace header (`AWSTraceHeader`) is one
/// trace from the SQS-triggered invocation through the order's record span to
/// its `PutItem`, and that record links to the producer's trace.
///
/// The runtime interface emulator gives the runtime no trace header (Lambda
/// hands it the producer's, so on AWS the invocation itself continues that
/// trace): locally the invocation starts a trace of its own, and the record's
/// link is what ties the order to its producer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_order_is_one_trace_from_its_invocation_to_its_put_item_linked_to_its_producer() {
    let zipkin = Zipkin::start(&e2e::scratch("zipkin.log")).unwrap_or_else(|e| panic!("{e}"));
    let daemon = Daemon::start(Some(zipkin.endpoint())).unwrap_or_else(|e| panic!("{e}"));
    let template = template();
    let source = order_source(&template);
    let (dynamodb, queues) = servers(&template, None, 2).await;
    let (orders, _, _) = queues.with_dead_letters(&source);

    let (header, producer_trace) = producer_header();
    let order = testkit::orders::order(7);
    let body = testkit::orders::body(7);
    send_traced(&queues.client, &orders.url, &body, &header).await;

    let address = daemon.address().to_string();
    let mut env = servers_env(&dynamodb, &queues);
    env.push(("AWS_XRAY_DAEMON_ADDRESS", &address));
    let emulator = start("order-processor", &env);
    EventSource::new(&queues.client, orders, &source)
        .drain(Instant::now() + Duration::from_secs(60), &|event| {
            emulator.invoke(event)
        })
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", emulator.logs()));

    let record = record_span(&daemon, &order.order_id);
    let trace_id = record["traceId"].as_str().expect("a trace id").to_owned();
    let spans = trace(&zipkin, &trace_id, 3);
    let invocation = named(&spans, "invocation");
    let record = named(&spans, "record");
    let put = named(&spans, "DynamoDB.PutItem");
    assert_eq!(invocation["kind"], "SERVER");
    // The function's name, as Zipkin stores service names: in lower case.
    assert_eq!(
        invocation["localEndpoint"]["serviceName"],
        "orderprocessorfunction"
    );
    assert_eq!(invocation["tags"]["cold_start"], "true");
    assert_eq!(record["parentId"], invocation["id"]);
    assert_eq!(
        record["tags"]["order_id"].as_str(),
        Some(order.order_id.as_str())
    );
    assert_eq!(record["tags"]["outcome"], "stored");
    let producer_parent = header
        .split("Parent=")
        .nth(1)
        .and_then(|p| p.get(..16))
        .unwrap_or_default();
    assert_eq!(
        record["tags"]["link.0"].as_str(),
        Some(format!("{producer_trace}-{producer_parent}").as_str()),
        "{record}"
    );
    assert_eq!(put["parentId"], record["id"]);
    assert_eq!(put["kind"], "CLIENT");
    assert_eq!(put["tags"]["rpc.method"], "PutItem");
    println!("the order's trace: {}", zipkin.trace_url(&trace_id));

    // Nothing the function exported carries the order's body or a field of
    // it other than its id.
    let exported = serde_json::to_string(&daemon.spans()).expect("spans as JSON");
    for secret in [body.as_str(), &order.customer_id] {
        assert!(
            !exported.contains(secret),
            "{secret} in the spans: {exported}"
        );
    }
    assert_eq!(daemon.unreadable(), 0);
}

/// Send `body` to the queue at `url` as a producer in the trace `header` does.
async fn send_traced(sqs: &aws_sdk_sqs::Client, url: &str, body: &str, header: &str) {
    let trace = MessageSystemAttributeValue::builder()
        .data_type("String")
        .string_value(header)
        .build()
        .expect("attribute");
    sqs.send_message()
        .queue_url(url)
        .message_body(body)
        .message_system_attributes(MessageSystemAttributeNameForSends::AwsTraceHeader, trace)
        .send()
        .await
        .expect("send the order");
}

/// The record span of `order_id` among what the daemon received.
fn record_span(daemon: &Daemon, order_id: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let found = daemon.spans().into_iter().find(|span| {
            span["name"] == "record" && span["tags"]["order_id"].as_str() == Some(order_id)
        });
        match found {
            Some(span) => return span,
            None if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            None => panic!("no record span of {order_id}: {:#?}", daemon.spans()),
        }
    }
}

/// With `TRACING=off` no span leaves the function and it opens no socket for
/// them: the log says tracing is off and the daemon hears nothing.
#[test]
fn tracing_off_sends_nothing_and_opens_no_socket() {
    let daemon = Daemon::start(None).unwrap_or_else(|e| panic!("{e}"));
    let address = daemon.address().to_string();
    for (setting, traced) in [("off", false), ("on", true)] {
        let emulator = start(
            "password-hasher",
            &[("TRACING", setting), ("AWS_XRAY_DAEMON_ADDRESS", &address)],
        );
        let before = daemon.spans().len();
        let answer = emulator
            .invoke(r#"{"operation":"hash","passwords":["correct horse battery"],"cost":4}"#)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(answer.status, 200, "{}", answer.body);
        let logs = emulator.logs_when(|logs| logs.contains("REPORT"));
        let init = logs
            .lines()
            .find(|l| l.contains("shared init done"))
            .unwrap_or_else(|| panic!("no init line:\n{logs}"));
        assert!(
            init.contains(&format!("\"tracing\":\"{setting}\"")),
            "{init}"
        );
        let udp = e2e::udp_sockets_of_descendants(emulator.pid());
        assert_eq!(udp > 0, traced, "TRACING={setting}: {udp} UDP sockets");
        std::thread::sleep(Duration::from_millis(300));
        let sent = daemon.spans().len() - before;
        assert_eq!(sent > 0, traced, "TRACING={setting}: {sent} spans");
        let exported = serde_json::to_string(&daemon.spans()).expect("JSON");
        assert!(
            !exported.contains("correct horse"),
            "a password in the spans: {exported}"
        );
    }
}

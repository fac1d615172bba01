//! Traces on the local stack: the real functions send their spans to the
//! local X-Ray daemon, which hands them to Zipkin; the tests read the traces
//! back from Zipkin's API, as a person would see them in its viewer.

use aws_sdk_sqs::types::{MessageSystemAttributeNameForSends, MessageSystemAttributeValue};
use e2e::{LocalAnalytics, LocalDynamoDb, order_source, servers, servers_env, start, template};
use local_stack::event_source::EventSource;
use local_stack::jvm::Compiler;
use local_stack::pool::Options;
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

/// The parent segment id a trace header names (`Parent=`).
fn parent(header: &str) -> &str {
    header
        .split("Parent=")
        .nth(1)
        .and_then(|p| p.get(..16))
        .unwrap_or_default()
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
/// trace: the producer's, continued by the SQS-triggered invocation (as
/// Lambda hands the runtime the batch's first message's header), through the
/// order's record span to its `PutItem`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_order_sent_with_a_trace_header_is_one_trace_from_the_queue_to_its_put_item() {
    let zipkin = Zipkin::start(&e2e::scratch("zipkin.log"), Compiler::Quick)
        .unwrap_or_else(|e| panic!("{e}"));
    let daemon = Daemon::start(Some(zipkin.endpoint())).unwrap_or_else(|e| panic!("{e}"));
    let template = template();
    let source = order_source(&template);
    let (dynamodb, queues) = servers(&template, None, 2).await;
    let (orders, _, _) = queues.with_dead_letters(&source);

    let (header, producer_trace) = producer_header();
    let order = order_processor_testkit::orders::order(7);
    let body = order_processor_testkit::orders::body(7);
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

    let spans = trace(&zipkin, &producer_trace, 3);
    let invocation = named(&spans, "invocation");
    let record = named(&spans, "record");
    let put = named(&spans, "DynamoDB.PutItem");
    assert_eq!(invocation["parentId"], parent(&header), "{invocation}");
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
    assert!(record["tags"]["link.0"].is_null(), "its own trace: no link");
    assert_eq!(put["parentId"], record["id"]);
    assert_eq!(put["kind"], "CLIENT");
    assert_eq!(put["tags"]["rpc.method"], "PutItem");
    println!("the order's trace: {}", zipkin.trace_url(&producer_trace));

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

/// On Lambda Managed Instances one environment serves several invocations at
/// once, and each continues its own caller's trace: batches of one, two and
/// three passwords sent together, each with an `X-Amzn-Trace-Id` of its own,
/// are three traces, each holding its own invocation's batch.
#[test]
fn on_managed_instances_each_invocation_in_flight_continues_its_own_trace() {
    let zipkin = Zipkin::start(&e2e::scratch("zipkin.log"), Compiler::Quick)
        .unwrap_or_else(|e| panic!("{e}"));
    let daemon = Daemon::start(Some(zipkin.endpoint())).unwrap_or_else(|e| panic!("{e}"));
    let address = daemon.address().to_string();
    let template = template()
        .with_parameters(&local_stack::managed_instances::LOCAL_PARAMETERS)
        .unwrap_or_else(|e| panic!("{e}"));
    let pool = e2e::managed_pool(
        &template,
        "password-hasher",
        &[("AWS_XRAY_DAEMON_ADDRESS", &address)],
        None,
    );
    let calls: Vec<(usize, (String, String))> = (1..=3).map(|n| (n, producer_header())).collect();
    // Each batch with its own trace header, all sent at once.
    e2e::send_at_once(
        &pool,
        calls
            .iter()
            .map(|(passwords, (header, _))| {
                let event = serde_json::json!({
                    "operation": "hash",
                    "cost": 8,
                    "passwords": vec!["a password"; *passwords],
                });
                let options = Options {
                    trace_header: Some(header.clone()),
                    ..Options::default()
                };
                (event.to_string(), options)
            })
            .collect(),
    );
    for (passwords, (header, trace_id)) in &calls {
        let spans = trace(&zipkin, trace_id, 2);
        let invocation = named(&spans, "invocation");
        assert_eq!(invocation["parentId"], parent(header), "{invocation}");
        let batch = named(&spans, "batch");
        assert_eq!(batch["parentId"], invocation["id"]);
        assert_eq!(
            batch["tags"]["items"].as_str(),
            Some(passwords.to_string().as_str()),
            "{header}: {batch}"
        );
    }
}

/// A state machine's execution is one trace: with tracing enabled, Step
/// Functions hands each Lambda task the execution's trace header, so every
/// segment's invocation and the merge's continue it, with their scans and S3
/// writes and reads inside.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_state_machine_run_is_one_trace_with_every_segment_and_the_merge() {
    const SEGMENTS: usize = 4;
    let zipkin = Zipkin::start(&e2e::scratch("zipkin.log"), Compiler::Quick)
        .unwrap_or_else(|e| panic!("{e}"));
    let daemon = Daemon::start(Some(zipkin.endpoint())).unwrap_or_else(|e| panic!("{e}"));
    let ddb = LocalDynamoDb::start().await;
    let mut analytics = LocalAnalytics::new();
    let address = daemon.address().to_string();
    let mut env = ddb.env();
    env.extend(analytics.env());
    env.push(("AWS_XRAY_DAEMON_ADDRESS", &address));
    let (_pool, api) = e2e::worker_behind_invoke_api(&env);
    analytics.start(&api.endpoint());
    let client = analytics.client();
    let input = serde_json::json!({"query": {"group_by": "customer"}, "total_segments": SEGMENTS});
    let arn = analytics.state_machine_arn(e2e::REPORT);
    let started = client
        .start_execution(arn, &input, None)
        .unwrap_or_else(|e| panic!("{e}"));
    let execution = client
        .wait(&started, Duration::from_secs(120))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(execution.succeeded(), "{execution:?}");

    let invocations = spans_named(&daemon, "invocation", SEGMENTS + 1);
    let traces: std::collections::BTreeSet<&str> = invocations
        .iter()
        .filter_map(|span| span["traceId"].as_str())
        .collect();
    assert_eq!(traces.len(), 1, "one trace: {invocations:#?}");
    let trace_id = traces.first().copied().unwrap_or_default();
    let spans = trace(&zipkin, trace_id, 2 * SEGMENTS + 2);
    let count = |name: &str| spans.iter().filter(|s| s["name"] == name).count();
    assert_eq!(
        count("invocation"),
        SEGMENTS + 1,
        "every segment and the merge"
    );
    assert_eq!(count("scan"), SEGMENTS, "{spans:#?}");
    assert_eq!(count("s3.putobject"), SEGMENTS, "each segment's partial");
    assert_eq!(count("merge"), 1);
    assert!(
        count("s3.getobject") >= SEGMENTS,
        "the merge reads every partial"
    );
    println!("the execution's trace: {}", zipkin.trace_url(trace_id));
    drop(api);
}

/// The first `wanted` spans named `name` the daemon received (waiting up
/// to 10 s for them).
fn spans_named(daemon: &Daemon, name: &str, wanted: usize) -> Vec<Value> {
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

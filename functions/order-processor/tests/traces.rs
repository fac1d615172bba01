//! The order processor's traces: an order sent with a producer's trace
//! header is one trace from the queue to its `PutItem`.

mod support;

use aws_sdk_sqs::types::{MessageSystemAttributeNameForSends, MessageSystemAttributeValue};
use local_stack::event_source::EventSource;
use local_stack::jvm::Compiler;
use local_stack::xray_daemon::Daemon;
use local_stack::zipkin::Zipkin;
use std::time::{Duration, Instant};
use support::traces::{named, parent, producer_header, trace};
use support::{order_source, servers, servers_env, start, template};

/// An order sent with a producer's trace header (`AWSTraceHeader`) is one
/// trace: the producer's, continued by the SQS-triggered invocation (as
/// Lambda hands the runtime the batch's first message's header), through the
/// order's record span to its `PutItem`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_order_sent_with_a_trace_header_is_one_trace_from_the_queue_to_its_put_item() {
    let zipkin = Zipkin::start(&support::scratch("zipkin.log"), Compiler::Quick)
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

//! The Arrow worker's traces: a state machine's run is one trace with every
//! segment and the merge.

mod support;

use local_stack::jvm::Compiler;
use local_stack::xray_daemon::Daemon;
use local_stack::zipkin::Zipkin;
use std::time::Duration;
use support::traces::{spans_named, trace};
use support::{LocalAnalytics, LocalDynamoDb};

/// A state machine's execution is one trace: with tracing enabled, Step
/// Functions hands each Lambda task the execution's trace header, so every
/// segment's invocation and the merge's continue it, with their scans and S3
/// writes and reads inside.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_state_machine_run_is_one_trace_with_every_segment_and_the_merge() {
    const SEGMENTS: usize = 4;
    let zipkin = Zipkin::start(&support::scratch("zipkin.log"), Compiler::Quick)
        .unwrap_or_else(|e| panic!("{e}"));
    let daemon = Daemon::start(Some(zipkin.endpoint())).unwrap_or_else(|e| panic!("{e}"));
    let ddb = LocalDynamoDb::start().await;
    let mut analytics = LocalAnalytics::new();
    let address = daemon.address().to_string();
    let mut env = ddb.env();
    env.extend(analytics.env());
    env.push(("AWS_XRAY_DAEMON_ADDRESS", &address));
    let (_pool, api) = support::worker_behind_invoke_api(&env);
    analytics.start(&api.endpoint());
    let client = analytics.client();
    let input = serde_json::json!({"query": {"group_by": "customer"}, "total_segments": SEGMENTS});
    let arn = analytics.state_machine_arn(support::REPORT);
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

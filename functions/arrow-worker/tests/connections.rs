//! The Arrow worker opens its DynamoDB and S3 connections during init, and
//! its report reads on them.

use serde_json::Value;
use testkit::{LocalAnalytics, LocalDynamoDb, json_lines, start};

/// The Arrow worker opens, during init, a DynamoDB connection for each reader
/// a request runs at once (a scan per worker, at least the daily report's
/// shards) and one to S3, each service a spare more; the report then reads on
/// them. Turned off, init opens none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_arrow_worker_opens_its_connections_during_init() {
    let dynamodb = LocalDynamoDb::start().await;
    let mut analytics = LocalAnalytics::new();
    analytics.start(local_stack::local_aws::NO_SERVER);
    let mut env = dynamodb.env();
    env.extend(analytics.env());
    let readers = shared::orders::DAY_SHARDS as usize;
    let emulator = start("arrow-worker", &env);
    // A request refused before any call: the function initialises, nothing more.
    let refused = emulator.invoke("{}").expect("invoke");
    assert!(refused.body.contains("InvalidRequest"), "{}", refused.body);
    let opened: Vec<Value> = json_lines(&emulator.logs())
        .into_iter()
        .filter(|l| {
            l["message"]
                .as_str()
                .is_some_and(|m| m.ends_with("connections opened"))
        })
        .collect();
    assert_eq!(opened.len(), 2, "{}", emulator.logs());
    // A call that missed init's bound leaves no connection in the pool, and
    // the report would open one: say so here, not as a handshake of the report.
    for line in &opened {
        assert_eq!(
            line["failed"], 0,
            "a call of init did not answer in time: {line}"
        );
    }
    let workers = json_lines(&emulator.logs())
        .iter()
        .find(|l| l["message"] == "shared init done")
        .and_then(|l| l["workers"].as_u64())
        .expect("workers in the init line");
    let spare = shared::connections::SPARE;
    let expected = readers.max(usize::try_from(workers).expect("workers")) + spare;
    assert_eq!(dynamodb.tls_handshakes(), expected, "{}", emulator.logs());
    assert_eq!(analytics.tls_handshakes(), 1 + spare, "{}", emulator.logs());
    // The daily report reads its day's shards at once: on the connections of init.
    let report = serde_json::json!({ "operation": "daily_report", "day": "2026-11-21" });
    let answer = emulator.invoke(report.to_string()).expect("invoke");
    let body = answer.json().expect("JSON");
    assert!(body.get("errorType").is_none(), "{body}");
    assert_eq!(
        dynamodb.tls_handshakes(),
        expected,
        "no handshake in the report"
    );
    emulator.stop();

    let mut off = env.clone();
    off.push((shared::connections::SETTING, "false"));
    let emulator = start("arrow-worker", &off);
    emulator.invoke("{}").expect("invoke");
    assert_eq!(dynamodb.tls_handshakes(), expected, "{}", emulator.logs());
    assert_eq!(analytics.tls_handshakes(), 1 + spare, "{}", emulator.logs());
}

//! The template's `OrdersReportStateMachine` on the local stack (moto's
//! interpreter, see `tools/local-stack/src/moto.rs`) fans the real Arrow
//! worker out over scan segments (partials in the local S3), reached through
//! the Lambda Invoke API by ARN, and answers as one invocation does; a day
//! too large for one invocation is reported by the state machine.

mod support;

use arrow_worker_testkit::orders::of_customers;
use local_stack::pool::Pool;
use serde_json::{Value, json};
use support::{LocalAnalytics, LocalDynamoDb, REPORT, worker_behind_invoke_api};

/// The keys under `prefix` in `bucket` of the local S3, sorted.
fn stored_keys(analytics: &LocalAnalytics, bucket: &str, prefix: &str) -> Vec<String> {
    let url = format!(
        "{}/{bucket}?list-type=2&prefix={prefix}",
        analytics.server().endpoint()
    );
    let listing = ureq::get(&url)
        .header("authorization", local_stack::moto::authorization("s3"))
        .call()
        .and_then(|response| response.into_body().read_to_string())
        .unwrap_or_else(|e| panic!("{url}: {e}"));
    let mut keys: Vec<String> = listing
        .split("<Key>")
        .skip(1)
        .filter_map(|rest| rest.split_once("</Key>").map(|(key, _)| key.to_owned()))
        .collect();
    keys.sort();
    keys
}

#[test]
fn the_templates_report_state_machine_answers_as_one_invocation_does() {
    const ORDERS: u64 = 400;
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let dynamodb = runtime.block_on(LocalDynamoDb::start());
    // Orders of 50 customers on 2026-11-01, the day the report reads.
    runtime.block_on(support::write_items(
        &dynamodb.server.client(),
        of_customers(ORDERS, 50),
    ));
    let mut analytics = LocalAnalytics::new();
    let mut env = dynamodb.env();
    env.extend(analytics.env());
    // No time to read a day in the daily report's own invocation: every day
    // goes to the state machine (only the daily report reads this).
    env.extend([("REPORT_DAY_SECONDS", "0"), ("REPORT_LATE_DAYS", "0")]);
    let (pool, api) = worker_behind_invoke_api(&env);
    analytics.start(&api.endpoint());
    assert_eq!(analytics.buckets(), ["AnalyticsBucket"]);

    let direct = pool
        .invoke(
            json!({"operation": "aggregate", "query": {"group_by": "customer", "limit": 20000}})
                .to_string(),
        )
        .and_then(|answer| answer.json())
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(direct.get("errorType").is_none(), "{direct}");
    assert_eq!(direct["rows"]["matched"], json!(ORDERS), "{direct}");

    let report = analytics.run(
        REPORT,
        &json!({"query": {"group_by": "customer"}, "total_segments": 4}),
    );
    assert!(report.succeeded(), "{report:?}\n{}", last_lines(&pool, 20));
    let output = report.output.expect("output");
    assert_eq!(output["groups"], direct["groups"], "{output}");
    assert_eq!(output["rows"], direct["rows"], "{output}");
    assert_eq!(output["groups"].as_array().map(Vec::len), Some(50));
    each_segment_stored_its_partial_under_the_execution_name(&analytics);
    any_execution_name_names_a_run(&analytics, &direct);
    a_day_too_large_for_one_invocation_is_reported_by_the_state_machine(
        &analytics, &pool, &runtime, &dynamodb,
    );

    // A segment the worker refuses fails the execution with its errorType,
    // its message in the cause (InvalidRequest is not retried).
    let refused = analytics.run(
        REPORT,
        &json!({"query": {"group_by": "sku"}, "total_segments": 4}),
    );
    assert_eq!(refused.status, "FAILED", "{refused:?}");
    assert_eq!(
        refused.error.as_deref(),
        Some("InvalidRequest"),
        "{refused:?}"
    );
    let cause: Value = serde_json::from_str(refused.cause.as_deref().unwrap_or_default())
        .unwrap_or_else(|e| panic!("{e}: {refused:?}"));
    assert_eq!(cause["errorType"], "InvalidRequest");
    assert!(
        cause["errorMessage"]
            .as_str()
            .is_some_and(|m| m.contains("sku")),
        "{cause}"
    );
}

/// The last `n` lines of the logs of `pool`'s environments, newest first.
fn last_lines(pool: &local_stack::pool::Pool, n: usize) -> String {
    let logs = pool.logs();
    logs.lines().rev().take(n).collect::<Vec<_>>().join("\n")
}

/// Each segment of the report's run stored its partial under the execution's
/// name (a UUID when the caller gives none), one object per segment.
fn each_segment_stored_its_partial_under_the_execution_name(analytics: &LocalAnalytics) {
    let keys = stored_keys(analytics, "AnalyticsBucket", "partials/");
    let run_id = keys
        .first()
        .and_then(|key| key.split('/').nth(1))
        .unwrap_or_else(|| panic!("no partials: {keys:?}"));
    assert_eq!(run_id.len(), 36, "a UUID: {run_id}");
    assert_eq!(keys.len(), 4, "{keys:?}");
    for (segment, key) in (0..4).zip(&keys) {
        let attempt = key
            .rsplit_once('-')
            .and_then(|(_, end)| end.strip_suffix(".arrow"))
            .unwrap_or_else(|| panic!("{key}"));
        let expected = arrow_worker::partial::key(run_id, segment, 4, attempt);
        assert_eq!(key, &expected);
    }
}

/// The worker hands a day it has no time to read to the state machine (by
/// the ARN the template builds from its name), whose merge saves the report
/// the day's orders make; a retry of the run starts nothing new.
fn a_day_too_large_for_one_invocation_is_reported_by_the_state_machine(
    analytics: &LocalAnalytics,
    pool: &Pool,
    runtime: &tokio::runtime::Runtime,
    dynamodb: &LocalDynamoDb,
) {
    let invoke = |payload: Value| {
        pool.invoke(payload.to_string())
            .and_then(|answer| answer.json())
            .unwrap_or_else(|e| panic!("{e}"))
    };
    // The sample orders' day, read directly for comparison.
    let day = json!({"group_by": "currency",
                     "from": "2026-11-01T00:00:00Z", "to": "2026-11-02T00:00:00Z"});
    let direct = invoke(json!({"operation": "aggregate", "query": day}));
    assert!(direct["rows"]["matched"].as_u64() > Some(0), "{direct}");
    let report = json!({"operation": "daily_report", "scheduled_time": "2026-11-02T00:15:00Z"});
    let started = invoke(report.clone());
    assert!(started.get("groups").is_none(), "{started}");
    let name = started["fanned_out"][0]["execution"]
        .as_str()
        .unwrap_or_else(|| panic!("no fan-out: {started}"));
    assert_eq!(started["fanned_out"][0]["total_segments"], json!(4));
    let machine = analytics.state_machine_arn(REPORT);
    let execution = format!(
        "{}:{name}",
        machine.replacen(":stateMachine:", ":execution:", 1)
    );
    let ended = analytics
        .client()
        .wait(&execution, std::time::Duration::from_secs(120))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(ended.succeeded(), "{ended:?}");
    let output = ended.output.expect("output");
    assert_eq!(output["report_id"], "daily/2026-11-01", "{output}");
    assert_eq!(output["as_of"], "2026-11-02T00:15:00Z", "{output}");
    // The saved report is what the day's orders make.
    let item = runtime
        .block_on(
            dynamodb
                .server
                .client()
                .get_item()
                .table_name("ReportsTable")
                .key(
                    "report_id",
                    aws_sdk_dynamodb::types::AttributeValue::S("daily/2026-11-01".into()),
                )
                .send(),
        )
        .unwrap_or_else(|e| panic!("{e:?}"));
    let body = item
        .item()
        .and_then(|i| i.get("body"))
        .and_then(|b| b.as_s().ok())
        .expect("the report item");
    let saved: Value = serde_json::from_str(body).expect("JSON");
    assert_eq!(saved["groups"], direct["groups"], "{saved}");
    assert_eq!(saved["rows"]["matched"], direct["rows"]["matched"]);
    // The same run again (Lambda's retry, or the dead letter replayed)
    // finds its execution started: Step Functions refuses a second one of
    // that name, which the worker takes as done.
    let again = invoke(report);
    assert_eq!(again["fanned_out"], started["fanned_out"], "{again}");
}

/// Any name Step Functions allows names a run (`@ + = ( )`, any script), and
/// the run answers as one invocation (`direct`) does.
fn any_execution_name_names_a_run(analytics: &LocalAnalytics, direct: &Value) {
    let named = analytics.run_named(
        REPORT,
        &json!({"query": {"group_by": "customer"}, "total_segments": 2}),
        "report@2026+11=a(b)-über",
    );
    assert!(named.succeeded(), "{named:?}");
    let output = named.output.expect("output");
    assert_eq!(output["groups"], direct["groups"], "{output}");
}

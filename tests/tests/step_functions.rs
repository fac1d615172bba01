//! Step Functions on the local stack (moto's interpreter, see
//! `tools/local-stack/src/moto.rs`): Lambda tasks reach the local functions through
//! the Lambda Invoke API, by ARN; a function error fails the task with the
//! function's `errorType`, which `Retry` and `Catch` match as on AWS; and the
//! template's `OrdersReportStateMachine` fans the real Arrow worker out over
//! scan segments (partials in the local S3) and answers as one invocation does.

use e2e::{LocalAnalytics, LocalDynamoDb, template};
use local_stack::lambda_api::{LambdaApi, Served};
use local_stack::pool::{Overflow, Pool, Size};
use local_stack::step_functions::{Client, Execution, StateMachine, function_arn};
use order_processor::dynamodb::DynamoStore as OrderStore;
use order_processor::store::{OrderStore as _, PutOutcome};
use serde_json::{Value, json};
use std::sync::Arc;

/// `function` (a binary) of the template in a pool of `environments`,
/// behind a Lambda Invoke API under its logical id and binary.
fn served(function: &str, env: &[(&str, &str)], environments: usize) -> (Arc<Pool>, LambdaApi) {
    let template = template();
    let pool = Arc::new(e2e::pool(
        &template,
        function,
        env,
        Size {
            environments,
            overflow: Overflow::Wait,
        },
    ));
    let logical_id = template
        .function(function)
        .unwrap_or_else(|e| panic!("{e}"))
        .logical_id;
    let api = LambdaApi::start(vec![Served {
        names: vec![logical_id, function.to_owned()],
        pool: Arc::clone(&pool),
    }])
    .unwrap_or_else(|e| panic!("{e}"));
    (pool, api)
}

/// The event types of an execution's history, in order.
fn history(analytics: &LocalAnalytics, execution_arn: &str) -> Vec<String> {
    let answer = analytics
        .client()
        .call(
            "GetExecutionHistory",
            &json!({ "executionArn": execution_arn }),
        )
        .unwrap_or_else(|e| panic!("{e}"));
    answer["events"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|event| event["type"].as_str().map(str::to_owned))
        .collect()
}

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
fn lambda_tasks_reach_local_functions_by_arn_and_their_errors_are_named_by_error_type() {
    let mut analytics = LocalAnalytics::new();
    let (_pool, api) = served("password-hasher", &[], 1);
    analytics.start(&api.endpoint());
    let caught = hash_machine(&analytics, "Caught", true);
    let uncaught = hash_machine(&analytics, "Uncaught", false);
    let run = |arn: &str, request: Value| execute(analytics.client(), arn, request);

    // An answer becomes the task's result; the execution is named (a UUID)
    // even when started without a name, as on AWS.
    let (arn, hashed) = run(
        &caught,
        json!({ "operation": "hash", "cost": 4, "passwords": ["a password"] }),
    );
    assert!(hashed.succeeded(), "{hashed:?}");
    let output = hashed.output.expect("output");
    let hashes = output["result"]["hashes"].as_array().expect("hashes");
    assert_eq!(hashes.len(), 1, "{output}");
    assert!(hashes[0].as_str().is_some_and(|h| h.starts_with("$2b$04$")));
    let name = output["run"].as_str().expect("the execution's name");
    assert!(
        arn.ends_with(&format!(":{name}")) && name.len() == 36,
        "{arn} {name}"
    );

    // A function error is the error `errorType` names: retried twice, then caught.
    let refused = json!({ "operation": "hash", "cost": 99, "passwords": ["a password"] });
    let (arn, caught_error) = run(&caught, refused.clone());
    assert!(caught_error.succeeded(), "{caught_error:?}");
    let caught_output = caught_error.output.expect("output");
    assert_eq!(caught_output["caught"]["Error"], "InvalidRequest");
    let cause: Value =
        serde_json::from_str(caught_output["caught"]["Cause"].as_str().expect("a cause"))
            .expect("the cause is the function's error JSON");
    assert_eq!(cause["errorType"], "InvalidRequest");
    assert!(
        cause["errorMessage"]
            .as_str()
            .is_some_and(|m| !m.is_empty())
    );
    let scheduled = history(&analytics, &arn)
        .iter()
        .filter(|t| *t == "TaskScheduled")
        .count();
    assert_eq!(scheduled, 3, "one invocation and two retries");

    // Not caught, it fails the execution with that error and cause.
    let (_, failed) = run(&uncaught, refused);
    assert_eq!(failed.status, "FAILED", "{failed:?}");
    assert_eq!(failed.error.as_deref(), Some("InvalidRequest"));
    assert_eq!(
        failed.cause.as_deref(),
        caught_output["caught"]["Cause"].as_str()
    );
}

/// A task invoking the password hasher by ARN with `$.request`: retried
/// twice on `InvalidRequest`, then (with `catch`) caught to `Refused`.
fn hash_task(catch: bool) -> Value {
    let mut task = json!({
        "Type": "Task",
        "Resource": "arn:aws:states:::lambda:invoke",
        "Parameters": {
            "FunctionName": function_arn("PasswordHasherFunction"),
            "Payload.$": "$.request",
        },
        "ResultSelector": { "hashes.$": "$.Payload.hashes" },
        "ResultPath": "$.result",
        "Retry": [{
            "ErrorEquals": ["InvalidRequest"],
            "IntervalSeconds": 1,
            "BackoffRate": 1,
            "MaxAttempts": 2,
        }],
        "End": true,
    });
    if catch {
        task["Catch"] = json!([{
            "ErrorEquals": ["InvalidRequest"],
            "ResultPath": "$.caught",
            "Next": "Refused",
        }]);
    }
    task
}

/// The state machine `name` of [`hash_task`], which records the execution's
/// name first; its ARN.
fn hash_machine(analytics: &LocalAnalytics, name: &str, catch: bool) -> String {
    let definition = json!({
        "StartAt": "Named",
        "States": {
            "Named": {
                "Type": "Pass",
                "Parameters": { "request.$": "$.request", "run.$": "$$.Execution.Name" },
                "Next": "Hash",
            },
            "Hash": hash_task(catch),
            "Refused": { "Type": "Pass", "End": true },
        },
    });
    analytics
        .client()
        .create_state_machine(&StateMachine {
            logical_id: name.to_owned(),
            name: name.to_owned(),
            kind: "STANDARD".to_owned(),
            definition,
            tracing: false,
        })
        .unwrap_or_else(|e| panic!("{e}"))
}

/// Run the state machine `arn` on `{"request": request}` (no name) to its
/// end: the execution's ARN, and the execution.
fn execute(client: &Client, arn: &str, request: Value) -> (String, Execution) {
    let input = json!({ "request": request });
    let execution_arn = client
        .start_execution(arn, &input, None)
        .unwrap_or_else(|e| panic!("{e}"));
    let execution = client
        .wait(&execution_arn, std::time::Duration::from_secs(120))
        .unwrap_or_else(|e| panic!("{e}"));
    (execution_arn, execution)
}

#[test]
fn the_templates_report_state_machine_answers_as_one_invocation_does() {
    const ORDERS: u64 = 400;
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let dynamodb = runtime.block_on(LocalDynamoDb::start());
    let store = OrderStore::new(dynamodb.server.client(), "OrdersTable");
    runtime.block_on(async {
        for n in 0..ORDERS {
            let order = order_processor::order::validate(order_processor_testkit::orders::order(n))
                .expect("sample orders are valid");
            assert_eq!(
                store.put_order(&order).await.expect("put"),
                PutOutcome::Written
            );
        }
    });
    let mut analytics = LocalAnalytics::new();
    let mut env = dynamodb.env();
    env.extend(analytics.env());
    // No time to read a day in the daily report's own invocation: every day
    // goes to the state machine (only the daily report reads this).
    env.extend([("REPORT_DAY_SECONDS", "0"), ("REPORT_LATE_DAYS", "0")]);
    let (pool, api) = served("arrow-worker", &env, 2);
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
        e2e::REPORT,
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
        e2e::REPORT,
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

#[test]
fn moto_on_a_port_another_server_holds_is_an_error_not_a_start() {
    // A listener that accepts and never answers, as a server that took the
    // port between choosing it and starting moto would.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = taken.local_addr().expect("address").port();
    let error = local_stack::moto::Moto::start_on(
        port,
        "http://127.0.0.1:9",
        &e2e::scratch("moto-taken").with_extension("log"),
    )
    .expect_err("moto cannot serve a taken port");
    assert!(error.contains("exited"), "{error}");
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
    let machine = analytics.state_machine_arn(e2e::REPORT);
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
        e2e::REPORT,
        &json!({"query": {"group_by": "customer"}, "total_segments": 2}),
        "report@2026+11=a(b)-über",
    );
    assert!(named.succeeded(), "{named:?}");
    let output = named.output.expect("output");
    assert_eq!(output["groups"], direct["groups"], "{output}");
}

//! Step Functions on the local stack (moto's interpreter, see
//! `tools/local-stack/src/moto.rs`), on its test function: Lambda tasks reach
//! the local functions through the Lambda Invoke API, by ARN; a function
//! error fails the task with the function's `errorType`, which `Retry` and
//! `Catch` match as on AWS. The template's own state machines are tested
//! with the functions they call (`functions/*/tests/step_functions.rs`).

use e2e::LocalAnalytics;
use local_stack::lambda_api::{LambdaApi, Served};
use local_stack::pool::{Overflow, Pool, Size};
use local_stack::step_functions::{Client, Execution, StateMachine, function_arn};
use serde_json::{Value, json};
use std::sync::Arc;

/// The test function in a pool of `environments`, behind a Lambda Invoke
/// API as `FixtureFunction`.
fn served(environments: usize) -> (Arc<Pool>, LambdaApi) {
    let pool = Arc::new(e2e::fixture_pool(
        &[],
        Size {
            environments,
            overflow: Overflow::Wait,
        },
    ));
    let api = LambdaApi::start(vec![Served {
        names: vec!["FixtureFunction".into()],
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

#[test]
fn lambda_tasks_reach_local_functions_by_arn_and_their_errors_are_named_by_error_type() {
    let mut analytics = LocalAnalytics::new();
    let (_pool, api) = served(1);
    analytics.start(&api.endpoint());
    let caught = machine(&analytics, "Caught", true);
    let uncaught = machine(&analytics, "Uncaught", false);
    let run = |arn: &str, request: Value| execute(analytics.client(), arn, request);

    // An answer becomes the task's result; the execution is named (a UUID)
    // even when started without a name, as on AWS.
    let (arn, answered) = run(&caught, json!({ "sleep_ms": 1 }));
    assert!(answered.succeeded(), "{answered:?}");
    let output = answered.output.expect("output");
    assert_eq!(output["result"]["invocation"], 1, "{output}");
    let name = output["run"].as_str().expect("the execution's name");
    assert!(
        arn.ends_with(&format!(":{name}")) && name.len() == 36,
        "{arn} {name}"
    );

    // A function error is the error `errorType` names: retried twice, then caught.
    let refused = json!({ "fail": "refused on purpose" });
    let (arn, caught_error) = run(&caught, refused.clone());
    assert!(caught_error.succeeded(), "{caught_error:?}");
    let caught_output = caught_error.output.expect("output");
    assert_eq!(caught_output["caught"]["Error"], "FixtureFailure");
    let cause: Value =
        serde_json::from_str(caught_output["caught"]["Cause"].as_str().expect("a cause"))
            .expect("the cause is the function's error JSON");
    assert_eq!(cause["errorType"], "FixtureFailure");
    assert_eq!(cause["errorMessage"], "refused on purpose");
    let scheduled = history(&analytics, &arn)
        .iter()
        .filter(|t| *t == "TaskScheduled")
        .count();
    assert_eq!(scheduled, 3, "one invocation and two retries");

    // Not caught, it fails the execution with that error and cause.
    let (_, failed) = run(&uncaught, refused);
    assert_eq!(failed.status, "FAILED", "{failed:?}");
    assert_eq!(failed.error.as_deref(), Some("FixtureFailure"));
    assert_eq!(
        failed.cause.as_deref(),
        caught_output["caught"]["Cause"].as_str()
    );
}

/// A task invoking the test function by ARN with `$.request`: retried
/// twice on `FixtureFailure`, then (with `catch`) caught to `Refused`.
fn task(catch: bool) -> Value {
    let mut task = json!({
        "Type": "Task",
        "Resource": "arn:aws:states:::lambda:invoke",
        "Parameters": {
            "FunctionName": function_arn("FixtureFunction"),
            "Payload.$": "$.request",
        },
        "ResultSelector": { "invocation.$": "$.Payload.invocation" },
        "ResultPath": "$.result",
        "Retry": [{
            "ErrorEquals": ["FixtureFailure"],
            "IntervalSeconds": 1,
            "BackoffRate": 1,
            "MaxAttempts": 2,
        }],
        "End": true,
    });
    if catch {
        task["Catch"] = json!([{
            "ErrorEquals": ["FixtureFailure"],
            "ResultPath": "$.caught",
            "Next": "Refused",
        }]);
    }
    task
}

/// The state machine `name` of [`task`], which records the execution's
/// name first; its ARN.
fn machine(analytics: &LocalAnalytics, name: &str, catch: bool) -> String {
    let definition = json!({
        "StartAt": "Named",
        "States": {
            "Named": {
                "Type": "Pass",
                "Parameters": { "request.$": "$.request", "run.$": "$$.Execution.Name" },
                "Next": "Call",
            },
            "Call": task(catch),
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

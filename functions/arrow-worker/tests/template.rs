//! The Arrow worker's resources in `template.yaml`, as CloudFormation
//! deploys them: the day index it reads, the partials it may read back, the
//! one state machine it may start.

use testkit::deployed::{ON_DEMAND, deployed};

/// The day index the order processor writes and the daily report reads is
/// the one the template declares, and the worker may query it (and only it).
#[test]
fn the_day_index_matches_the_code_and_the_worker_may_query_it() {
    use shared::orders::{DAY_INDEX, attr};
    let template = deployed(ON_DEMAND);
    let resources = &template["Resources"];
    let indexes = resources["OrdersTable"]["Properties"]["GlobalSecondaryIndexes"]
        .as_array()
        .expect("OrdersTable has global secondary indexes");
    let index = indexes
        .iter()
        .find(|i| i["IndexName"] == DAY_INDEX)
        .unwrap_or_else(|| panic!("no index {DAY_INDEX}"));
    let keys: Vec<_> = index["KeySchema"]
        .as_array()
        .expect("key schema")
        .iter()
        .map(|k| (k["AttributeName"].as_str(), k["KeyType"].as_str()))
        .collect();
    assert_eq!(
        keys,
        [
            (Some(attr::DAY_SHARD), Some("HASH")),
            (Some(attr::CREATED_AT_MS), Some("RANGE"))
        ]
    );
    let projected: Vec<_> = index["Projection"]["NonKeyAttributes"]
        .as_array()
        .expect("projected attributes")
        .iter()
        .filter_map(|a| a.as_str())
        .collect();
    for needed in arrow_worker::columns::PROJECTION {
        let is_key = [attr::CREATED_AT_MS, attr::DAY_SHARD, attr::ORDER_ID].contains(&needed);
        assert!(
            is_key || projected.contains(&needed),
            "{needed} is read by the daily report but not projected into {DAY_INDEX}"
        );
    }
    let statements =
        resources["ArrowWorkerRole"]["Properties"]["Policies"][0]["PolicyDocument"]["Statement"]
            .to_string();
    assert!(
        statements.contains(&format!("${{OrdersTable.Arn}}/index/{DAY_INDEX}")),
        "{statements}"
    );
}

/// The Arrow worker writes partials and large answers but reads back only the
/// partials (the merge): no `s3:GetObject` on anything else.
#[test]
fn the_worker_reads_back_only_the_partials() {
    use arrow_worker::partial::PARTIALS_PREFIX;
    let template = deployed(ON_DEMAND);
    let statements = &template["Resources"]["ArrowWorkerRole"]["Properties"]["Policies"][0]["PolicyDocument"]
        ["Statement"];
    let mut readable = Vec::new();
    for statement in statements.as_array().expect("statements") {
        let actions = statement["Action"].to_string();
        if actions.contains("s3:GetObject") || actions.contains("s3:*") {
            match &statement["Resource"] {
                serde_json::Value::Array(all) => readable.extend(all.iter().map(|r| r.to_string())),
                one => readable.push(one.to_string()),
            }
        }
    }
    assert!(!readable.is_empty(), "the merge reads the partials");
    for resource in readable {
        assert!(
            resource.contains(&format!("/{PARTIALS_PREFIX}*")),
            "s3:GetObject on {resource}: the worker reads only {PARTIALS_PREFIX}"
        );
    }
}

/// The worker starts the report state machine by an ARN built from the
/// machine's `Name` (a reference would be circular): the environment, the
/// grant and the name must spell the same machine.
#[test]
fn the_worker_may_start_exactly_the_report_state_machine() {
    let template = deployed(ON_DEMAND);
    let resources = &template["Resources"];
    let name = &resources["OrdersReportStateMachine"]["Properties"]["StateMachineName"];
    assert_eq!(
        name,
        &serde_json::json!({"Fn::Sub": "${AWS::StackName}-orders-report"})
    );
    let arn = serde_json::json!({"Fn::Sub": "arn:${AWS::Partition}:states:${AWS::Region}:${AWS::AccountId}:stateMachine:${AWS::StackName}-orders-report"});
    let env = &resources["ArrowWorkerFunction"]["Properties"]["Environment"]["Variables"];
    assert_eq!(env["REPORT_STATE_MACHINE_ARN"], arn);
    let statements =
        &resources["ArrowWorkerRole"]["Properties"]["Policies"][0]["PolicyDocument"]["Statement"];
    let start = statements
        .as_array()
        .expect("statements")
        .iter()
        .find(|s| s["Action"].to_string().contains("states:StartExecution"))
        .expect("a StartExecution statement");
    assert_eq!(start["Resource"], arn, "{start}");
}

/// Every task of the template's state machines that invokes the worker
/// retries the worker's transient failures (a DynamoDB or S3 call that
/// failed: `DynamoDBError`, `S3Error`): the merge ends by writing the
/// report item, and a retry of it is safe (the write is conditional).
#[test]
fn every_task_that_invokes_the_worker_retries_its_store_failures() {
    use local_stack::step_functions::{function_arn, state_machines};
    use serde_json::Value;
    fn tasks<'a>(value: &'a Value, found: &mut Vec<&'a Value>) {
        match value {
            Value::Object(map) => {
                if map.get("Type").and_then(Value::as_str) == Some("Task") {
                    found.push(value);
                }
                map.values().for_each(|v| tasks(v, found));
            }
            Value::Array(values) => values.iter().for_each(|v| tasks(v, found)),
            _ => {}
        }
    }
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let template =
        local_stack::template::Template::load(&root.join("template.yaml")).expect("template.yaml");
    let worker = function_arn("ArrowWorkerFunction");
    let mut checked = 0;
    for machine in state_machines(&template).expect("state machines") {
        let mut found = Vec::new();
        tasks(&machine.definition, &mut found);
        for task in found {
            if task["Parameters"]["FunctionName"] != worker.as_str() {
                continue;
            }
            let retried: Vec<&str> = task["Retry"]
                .as_array()
                .into_iter()
                .flatten()
                .flat_map(|r| r["ErrorEquals"].as_array().into_iter().flatten())
                .filter_map(Value::as_str)
                .collect();
            for error in ["DynamoDBError", "S3Error"] {
                assert!(
                    retried.contains(&error),
                    "{}: a task does not retry {error}: {task}",
                    machine.logical_id
                );
            }
            checked += 1;
        }
    }
    assert!(checked >= 2, "the scan and the merge invoke the worker");
}

/// The daily schedule's undelivered runs are not dropped: Scheduler sends
/// them to the reports' dead-letter queue (the one Lambda sends the runs that
/// failed to, under its alarm), and the role SAM makes for the schedule may.
#[test]
fn a_run_the_schedule_cannot_deliver_lands_in_the_reports_dead_letter_queue() {
    let template = deployed(ON_DEMAND);
    let resources = template["Resources"].as_object().expect("resources");
    let (_, schedule) = resources
        .iter()
        .find(|(_, r)| r["Type"] == "AWS::Scheduler::Schedule")
        .expect("the daily schedule");
    let queue = serde_json::json!({"Fn::GetAtt": ["ReportsDeadLetterQueue", "Arn"]});
    let target = &schedule["Properties"]["Target"];
    assert_eq!(target["DeadLetterConfig"]["Arn"], queue, "{target}");
    let role = target["RoleArn"]["Fn::GetAtt"][0]
        .as_str()
        .expect("a role of the template");
    let policies = resources[role]["Properties"]["Policies"].to_string();
    assert!(
        policies.contains("sqs:SendMessage") && policies.contains(&queue.to_string()),
        "{role} may not send to the queue: {policies}"
    );
}

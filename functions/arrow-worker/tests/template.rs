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

//! `template.yaml` grants no more than it needs, passes checkov, and every
//! alarm notifies someone. (cfn-lint runs in the suite as `sam validate
//! --lint`; parameter combinations are walked in `template_parameters.rs`.)

use local_stack::template::Template;
use local_stack::{checkov, least_privilege, workspace_root};

#[test]
fn no_iam_grant_is_wider_than_needed() {
    let template = least_privilege::transformed(&workspace_root().join("template.yaml"))
        .expect("the SAM transform of template.yaml");
    let roles = template["Resources"]
        .as_object()
        .expect("resources")
        .values()
        .filter(|r| r["Type"] == "AWS::IAM::Role")
        .count();
    assert!(
        roles >= 5,
        "three functions, the schedule and the state machine have roles: {roles}"
    );
    let findings = least_privilege::findings(&template);
    assert!(
        findings.is_empty(),
        "wider than needed:\n{}",
        findings.join("\n")
    );
}

#[test]
fn checkov_finds_nothing_unexplained() {
    let failed = checkov::failed_checks(&workspace_root().join("template.yaml")).expect("checkov");
    assert!(failed.is_empty(), "checkov:\n{}", failed.join("\n"));
}

#[test]
fn every_alarm_notifies_and_every_dead_letter_queue_has_one() {
    let template = Template::load(&workspace_root().join("template.yaml")).expect("template.yaml");
    let alarms = template.alarms().expect("alarms");
    let mut missing = Vec::new();
    for alarm in &alarms {
        if alarm.actions.is_empty() {
            missing.push(format!(
                "{} has no AlarmActions: it notifies nobody",
                alarm.logical_id
            ));
        }
    }
    let on_queue = |queue: &str, metric: &str| {
        alarms.iter().find(|a| {
            a.namespace == "AWS/SQS"
                && a.metric == metric
                && a.dimensions
                    .contains(&("QueueName".to_owned(), queue.to_owned()))
        })
    };
    let dead_letter_queues = template.dead_letter_queues().expect("dead-letter queues");
    assert!(dead_letter_queues.len() >= 2, "{dead_letter_queues:?}");
    for queue in &dead_letter_queues {
        if on_queue(queue, "ApproximateNumberOfMessagesVisible").is_none() {
            missing.push(format!(
                "dead-letter queue {queue} has no alarm on ApproximateNumberOfMessagesVisible"
            ));
        }
    }
    let sources = template.sqs_sources().expect("SQS events");
    for queue in template.queues().expect("queues") {
        if !sources.iter().any(|s| s.queue == queue.logical_id) {
            continue;
        }
        match on_queue(&queue.logical_id, "ApproximateAgeOfOldestMessage") {
            None => missing.push(format!(
                "{} feeds a function but has no alarm on the age of its oldest message",
                queue.logical_id
            )),
            Some(alarm) if alarm.threshold >= f64::from(queue.message_retention_s) => {
                missing.push(format!(
                    "{} fires after {} s, when {} has already deleted messages ({} s)",
                    alarm.logical_id, alarm.threshold, queue.logical_id, queue.message_retention_s
                ));
            }
            Some(_) => {}
        }
    }
    for function in template.functions().expect("functions") {
        let errors = alarms.iter().any(|a| {
            a.namespace == "AWS/Lambda"
                && a.metric == "Errors"
                && a.dimensions
                    .contains(&("FunctionName".to_owned(), function.logical_id.clone()))
        });
        if !errors {
            missing.push(format!(
                "{} has no alarm on its Errors",
                function.logical_id
            ));
        }
    }
    for (machine, _) in template.resources("AWS::Serverless::StateMachine") {
        let failed = alarms.iter().any(|a| {
            a.namespace == "AWS/States"
                && a.metric == "ExecutionsFailed"
                && a.dimensions
                    .contains(&("StateMachineArn".to_owned(), machine.clone()))
        });
        if !failed {
            missing.push(format!("{machine} has no alarm on its failed executions"));
        }
    }
    assert!(missing.is_empty(), "{}", missing.join("\n"));
}

/// `SSEEnabled: true` without a key of one's own selects the AWS *managed* key
/// (`aws/dynamodb`, billed per KMS request); the template promises the free
/// AWS owned key (its comments and checkov skips say so).
#[test]
fn tables_are_encrypted_with_the_aws_owned_key() {
    let template = least_privilege::transformed(&workspace_root().join("template.yaml"))
        .expect("the SAM transform of template.yaml");
    let tables: Vec<_> = template["Resources"]
        .as_object()
        .expect("resources")
        .iter()
        .filter(|(_, r)| r["Type"] == "AWS::DynamoDB::Table")
        .collect();
    assert!(tables.len() >= 2, "orders and reports tables");
    for (id, table) in tables {
        let sse = &table["Properties"]["SSESpecification"];
        let managed = sse["SSEEnabled"] == true && sse["KMSMasterKeyId"].is_null();
        assert!(
            !managed,
            "{id}: SSEEnabled true selects the AWS managed key"
        );
    }
}

/// `sam delete` succeeds: CloudFormation cannot delete a bucket that still
/// holds objects, so every bucket is retained (and the README says how to
/// remove it); tables keep their data the same way.
#[test]
fn sam_delete_can_succeed_with_data_left_in_buckets_and_tables() {
    let template = least_privilege::transformed(&workspace_root().join("template.yaml"))
        .expect("the SAM transform of template.yaml");
    let kept: Vec<_> = template["Resources"]
        .as_object()
        .expect("resources")
        .iter()
        .filter(|(_, r)| {
            matches!(
                r["Type"].as_str(),
                Some("AWS::S3::Bucket" | "AWS::DynamoDB::Table")
            )
        })
        .collect();
    assert!(kept.len() >= 3, "the analytics bucket and two tables");
    for (id, resource) in kept {
        for policy in ["DeletionPolicy", "UpdateReplacePolicy"] {
            assert_eq!(resource[policy], "Retain", "{id}: {policy}");
        }
    }
}

/// The day index the order processor writes and the daily report reads is
/// the one the template declares, and the worker may query it (and only it).
#[test]
fn the_day_index_matches_the_code_and_the_worker_may_query_it() {
    use shared::orders::{DAY_INDEX, attr};
    let template = least_privilege::transformed(&workspace_root().join("template.yaml"))
        .expect("the SAM transform of template.yaml");
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

/// Every bucket refuses requests without TLS, whoever makes them (a bucket
/// policy denying `aws:SecureTransport = false` on the bucket and its objects,
/// what Security Hub's S3.5 checks).
#[test]
fn every_bucket_refuses_requests_without_tls() {
    let template = least_privilege::transformed(&workspace_root().join("template.yaml"))
        .expect("the SAM transform of template.yaml");
    let resources = template["Resources"].as_object().expect("resources");
    let buckets: Vec<&String> = resources
        .iter()
        .filter(|(_, r)| r["Type"] == "AWS::S3::Bucket")
        .map(|(id, _)| id)
        .collect();
    assert!(!buckets.is_empty(), "the analytics bucket");
    for bucket in buckets {
        let denies_plain_http = resources.values().any(|r| {
            r["Type"] == "AWS::S3::BucketPolicy"
                && r["Properties"]["Bucket"]["Ref"] == bucket.as_str()
                && r["Properties"]["PolicyDocument"]["Statement"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|s| {
                        let resources = s["Resource"].to_string();
                        s["Effect"] == "Deny"
                            && s["Principal"] == "*"
                            && s["Action"] == "s3:*"
                            && s["Condition"]["Bool"]["aws:SecureTransport"] == "false"
                            && resources.contains(&format!("{bucket}.Arn"))
                            && resources.contains("/*")
                    })
        });
        assert!(
            denies_plain_http,
            "{bucket}: no policy denying requests without TLS"
        );
    }
}

/// The Arrow worker writes partials and large answers but reads back only the
/// partials (the merge): no `s3:GetObject` on anything else.
#[test]
fn the_worker_reads_back_only_the_partials() {
    use arrow_worker::partial::PARTIALS_PREFIX;
    let template = least_privilege::transformed(&workspace_root().join("template.yaml"))
        .expect("the SAM transform of template.yaml");
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

/// Only passing failures reach SQS's redrive (the function dead-letters what
/// can never succeed), so a valid order must survive a throttle or two:
/// `MaxReceiveCount` cannot be set below 3.
#[test]
fn a_valid_order_survives_a_passing_failure_or_two() {
    let template =
        || Template::load(&workspace_root().join("template.yaml")).expect("template.yaml");
    for refused in ["1", "2"] {
        let deployed = template().with_parameters(&[("MaxReceiveCount", refused)]);
        assert!(deployed.is_err(), "MaxReceiveCount {refused} is accepted");
    }
    assert!(
        template()
            .with_parameters(&[("MaxReceiveCount", "3")])
            .is_ok()
    );
}

/// The order processor may read the one key it opens its connections with
/// (and no other): the template's condition names the code's key.
#[test]
fn the_connection_check_key_is_the_codes() {
    use order_processor::dynamodb::CONNECTION_CHECK_ID;
    let template = least_privilege::transformed(&workspace_root().join("template.yaml"))
        .expect("the SAM transform of template.yaml");
    let statements = &template["Resources"]["OrderProcessorRole"]["Properties"]["Policies"][0]["PolicyDocument"]
        ["Statement"];
    let get_item = statements
        .as_array()
        .expect("statements")
        .iter()
        .find(|s| s["Action"].to_string().contains("dynamodb:GetItem"))
        .expect("a GetItem statement");
    let keys = &get_item["Condition"]["ForAllValues:StringEquals"]["dynamodb:LeadingKeys"];
    assert_eq!(
        keys,
        &serde_json::json!([CONNECTION_CHECK_ID]),
        "{get_item}"
    );
}

/// The worker starts the report state machine by an ARN built from the
/// machine's `Name` (a reference would be circular): the environment, the
/// grant and the name must spell the same machine.
#[test]
fn the_worker_may_start_exactly_the_report_state_machine() {
    let template = least_privilege::transformed(&workspace_root().join("template.yaml"))
        .expect("the SAM transform of template.yaml");
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

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

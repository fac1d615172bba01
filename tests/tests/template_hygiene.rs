//! `template.yaml` grants no more than it needs, passes checkov, and every
//! alarm notifies someone, deployed either way: on demand (the default) and
//! on Lambda Managed Instances (`ManagedInstancesSubnetIds` and
//! `ManagedInstancesSecurityGroupIds` given). (cfn-lint runs in the suite as
//! `sam validate --lint`; parameter combinations are walked in
//! `template_parameters.rs`.)

use local_stack::template::Template;
use local_stack::{checkov, least_privilege, workspace_root};
use serde_json::{Value, json};
use serde_norway::Value as Yaml;
use testkit::deployed::{MANAGED_INSTANCES, ON_DEMAND, deployed, of_type, resolved, scalar};

/// Lambda's ratios of memory to vCPUs on Managed Instances, in GiB per vCPU.
const LMI_RATIOS: [u64; 3] = [2, 4, 8];

/// Execution environments Lambda starts for each function version on Managed
/// Instances before it marks the version active (three Availability Zones).
const LMI_MIN_ENVIRONMENTS: u64 = 3;

/// The operator role Lambda assumes to run the managed instances.
const OPERATOR_ROLE: &str = "ManagedInstancesOperatorRole";

/// The logical ids of the template's functions that declare a
/// `CapacityProviderConfig` (under the condition `OnManagedInstances`): on
/// Managed Instances when they are on. (A function added by `cargo xtask
/// new-function` runs on demand until it is given one too.)
fn declared_on_managed_instances() -> Vec<String> {
    let text = std::fs::read_to_string(workspace_root().join("template.yaml")).expect("template");
    let doc: Yaml = serde_norway::from_str(&text).expect("template.yaml parses");
    doc["Resources"]
        .as_mapping()
        .expect("resources")
        .iter()
        .filter(|(_, r)| r["Type"].as_str() == Some("AWS::Serverless::Function"))
        .filter(|(_, r)| r["Properties"].get("CapacityProviderConfig").is_some())
        .filter_map(|(id, _)| scalar(id))
        .collect()
}

/// How many functions `template.yaml` declares.
fn function_count() -> usize {
    Template::load(&workspace_root().join("template.yaml"))
        .and_then(|t| t.functions())
        .expect("the template's functions")
        .len()
}

/// The operator role's statements, each with the wildcards it cannot do
/// without: those of the AWS managed policy AWSLambdaManagedEC2ResourceOperator
/// (the minimum the Lambda guide documents), narrowed to this account and
/// Region. (actions, resources, condition.)
fn operator_statements() -> Vec<Value> {
    let arn = |kind: &str| json!({"Fn::Sub": format!("arn:${{AWS::Partition}}:ec2:${{AWS::Region}}:${{AWS::AccountId}}:{kind}/*")});
    vec![
        // Created resources get ids no template can know; only those Lambda's
        // scaler manages.
        json!({"Effect": "Allow",
            "Action": ["ec2:RunInstances", "ec2:CreateTags", "ec2:AttachNetworkInterface"],
            "Resource": [arn("instance"), arn("network-interface"), arn("volume")],
            "Condition": {"StringEquals": {"ec2:ManagedResourceOperator": "scaler.lambda.amazonaws.com"}}}),
        // EC2's Describe actions take no resource-level permissions.
        json!({"Effect": "Allow",
            "Action": ["ec2:DescribeAvailabilityZones", "ec2:DescribeCapacityReservations",
                "ec2:DescribeInstances", "ec2:DescribeInstanceStatus",
                "ec2:DescribeInstanceTypeOfferings", "ec2:DescribeInstanceTypes",
                "ec2:DescribeSecurityGroups", "ec2:DescribeSubnets"],
            "Resource": "*"}),
        // A list parameter cannot be turned into one ARN per id; a launch
        // also needs the first statement, limited to Lambda's scaler.
        json!({"Effect": "Allow",
            "Action": ["ec2:RunInstances", "ec2:CreateNetworkInterface"],
            "Resource": [arn("subnet"), arn("security-group")]}),
        // Amazon's own machine images (their ARNs name no account).
        json!({"Effect": "Allow",
            "Action": ["ec2:RunInstances"],
            "Resource": {"Fn::Sub": "arn:${AWS::Partition}:ec2:${AWS::Region}::image/*"},
            "Condition": {"StringEquals": {"ec2:Owner": "amazon"}}}),
    ]
}

/// Least-privilege findings, less the operator role's wildcards that IAM
/// cannot do without: a resource wildcard of a statement that is exactly one
/// of [`operator_statements`]. Anything else in that role is a finding.
fn unexplained_findings(template: &Value) -> Vec<String> {
    let statements = &template["Resources"][OPERATOR_ROLE]["Properties"]["Policies"][0]["PolicyDocument"]
        ["Statement"];
    let allowed = operator_statements();
    least_privilege::findings(template)
        .into_iter()
        .filter(|finding| {
            let Some(rest) =
                finding.strip_prefix(&format!("{OPERATOR_ROLE}/least-privilege statement "))
            else {
                return true;
            };
            let Some((index, what)) = rest.split_once(": ") else {
                return true;
            };
            let statement = index.parse::<usize>().ok().map(|i| &statements[i]);
            let documented = statement.is_some_and(|s| allowed.contains(s));
            !(documented && what.starts_with("resource "))
        })
        .collect()
}

#[test]
fn no_iam_grant_is_wider_than_needed() {
    for (mode, overrides, operator) in [
        ("on demand", ON_DEMAND, 0),
        ("on managed instances", MANAGED_INSTANCES, 1),
    ] {
        let template = deployed(overrides);
        let roles = of_type(&template, "AWS::IAM::Role").len();
        // Every function, state machine and schedule has a role of its own,
        // and so has the capacity provider's operator on Managed Instances.
        let least_roles = [
            "AWS::Lambda::Function",
            "AWS::StepFunctions::StateMachine",
            "AWS::Scheduler::Schedule",
        ]
        .iter()
        .map(|kind| of_type(&template, kind).len())
        .sum::<usize>()
            + operator;
        assert!(
            roles >= least_roles,
            "{mode}: every function, state machine and schedule has a role (and the capacity provider's operator): {roles} for {least_roles}"
        );
        let findings = unexplained_findings(&template);
        assert!(
            findings.is_empty(),
            "{mode}: wider than needed:\n{}",
            findings.join("\n")
        );
    }
}

/// The operator role is the documented minimum and nothing more: its
/// wildcards are excused only statement by statement, so an added action
/// or resource, or a dropped condition, is a finding.
#[test]
fn the_operator_role_is_the_documented_minimum() {
    let template = deployed(MANAGED_INSTANCES);
    let role = &template["Resources"][OPERATOR_ROLE];
    assert_eq!(role["Type"], "AWS::IAM::Role");
    assert_eq!(role["Condition"], "OnManagedInstances");
    assert_eq!(
        role["Properties"]["AssumeRolePolicyDocument"]["Statement"],
        json!([{"Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"},
            "Action": "sts:AssumeRole"}])
    );
    let policies = role["Properties"]["Policies"].as_array().expect("policies");
    assert_eq!(policies.len(), 1, "one inline policy: {policies:?}");
    assert!(role["Properties"]["ManagedPolicyArns"].is_null());
    assert_eq!(
        policies[0]["PolicyDocument"]["Statement"],
        Value::Array(operator_statements())
    );
}

#[test]
fn checkov_finds_nothing_unexplained() {
    let as_is = workspace_root().join("template.yaml");
    let managed = resolved(MANAGED_INSTANCES, "checkov-managed-instances");
    let failed = checkov::failed_checks(&[&as_is, &managed]);
    let _ = std::fs::remove_file(&managed);
    let failed = failed.expect("checkov");
    assert!(
        failed.is_empty(),
        "checkov, as is ({}) and on managed instances ({}):\n{}",
        as_is.display(),
        managed.display(),
        failed.join("\n")
    );
}

/// The default deployment is what it was before Managed Instances existed:
/// no function has a capacity provider, and what exists only for them is
/// created only with `OnManagedInstances`.
#[test]
fn the_default_deployment_runs_every_function_on_demand() {
    let template = deployed(ON_DEMAND);
    let functions = of_type(&template, "AWS::Lambda::Function");
    assert_eq!(functions.len(), function_count(), "{functions:?}");
    for (id, function) in functions {
        let properties = &function["Properties"];
        assert!(
            properties["CapacityProviderConfig"].is_null(),
            "{id}: {properties}"
        );
        let memory = properties["MemorySize"].as_u64().expect("a memory size");
        assert!(
            (128..=10_240).contains(&memory),
            "{id}: {memory} MB on demand"
        );
    }
    for kind in [
        "AWS::Lambda::CapacityProvider",
        "AWS::Serverless::CapacityProvider",
    ] {
        for (id, resource) in of_type(&template, kind) {
            assert_eq!(resource["Condition"], "OnManagedInstances", "{id}");
        }
    }
    assert_eq!(
        template["Resources"][OPERATOR_ROLE]["Condition"],
        "OnManagedInstances"
    );
}

/// With subnets and security groups given, every shipped function runs on the
/// one capacity provider, and every function that does is within what Lambda
/// Managed Instances accepts: at least 2 GB and one whole vCPU at a ratio
/// Lambda offers, 1 to 1,600 invocations per environment, its own
/// architecture, and none of the settings that exclude a capacity provider.
#[test]
fn on_managed_instances_the_functions_run_on_the_capacity_provider() {
    let template = deployed(MANAGED_INSTANCES);
    let providers = of_type(&template, "AWS::Lambda::CapacityProvider");
    assert_eq!(providers.len(), 1, "one capacity provider");
    let (provider_id, provider) = providers[0];
    let p = &provider["Properties"];
    assert_eq!(
        p["PermissionsConfig"]["CapacityProviderOperatorRoleArn"],
        json!({"Fn::GetAtt": [OPERATOR_ROLE, "Arn"]})
    );
    assert_eq!(
        p["VpcConfig"]["SubnetIds"],
        json!({"Fn::Split": [",", {"Ref": "ManagedInstancesSubnetIds"}]})
    );
    assert_eq!(
        p["VpcConfig"]["SecurityGroupIds"],
        json!({"Fn::Split": [",", {"Ref": "ManagedInstancesSecurityGroupIds"}]})
    );
    let max_vcpus = p["CapacityProviderScalingConfig"]["MaxVCpuCount"]
        .as_u64()
        .expect("a MaxVCpuCount bound");
    let functions = of_type(&template, "AWS::Lambda::Function");
    for declared in declared_on_managed_instances() {
        let config = &template["Resources"][&declared]["Properties"]["CapacityProviderConfig"];
        assert!(!config.is_null(), "{declared} runs on demand");
    }
    let mut least_vcpus = 0;
    for (id, function) in functions {
        let f = &function["Properties"];
        if f["CapacityProviderConfig"].is_null() {
            continue;
        }
        let config = &f["CapacityProviderConfig"]["LambdaManagedInstancesCapacityProviderConfig"];
        assert_eq!(
            config["CapacityProviderArn"],
            json!({"Fn::GetAtt": [provider_id, "Arn"]}),
            "{id}: {f}"
        );
        let ratio = config["ExecutionEnvironmentMemoryGiBPerVCpu"]
            .as_u64()
            .unwrap_or_else(|| panic!("{id}: a whole ExecutionEnvironmentMemoryGiBPerVCpu"));
        assert!(LMI_RATIOS.contains(&ratio), "{id}: {ratio} GiB per vCPU");
        let concurrency = config["PerExecutionEnvironmentMaxConcurrency"]
            .as_u64()
            .unwrap_or_else(|| panic!("{id}: PerExecutionEnvironmentMaxConcurrency"));
        assert!((1..=1_600).contains(&concurrency), "{id}: {concurrency}");
        let memory = f["MemorySize"].as_u64().expect("a memory size");
        assert!((2_048..=32_768).contains(&memory), "{id}: {memory} MB");
        assert_eq!(
            memory % (ratio * 1_024),
            0,
            "{id}: {memory} MB is not a whole number of vCPUs at {ratio} GiB each"
        );
        least_vcpus += LMI_MIN_ENVIRONMENTS * memory / (ratio * 1_024);
        assert_eq!(
            f["Architectures"], p["InstanceRequirements"]["Architectures"],
            "{id}: runs only on instances of its own architecture"
        );
        for refused in ["VpcConfig", "ReservedConcurrentExecutions"] {
            assert!(
                f[refused].is_null(),
                "{id}: {refused} with a capacity provider"
            );
        }
        let timeout = f["Timeout"].as_u64().expect("a timeout");
        assert!(timeout <= 900, "{id}: {timeout} s");
    }
    for (id, resource) in template["Resources"].as_object().expect("resources") {
        assert!(
            resource["Properties"]["ProvisionedConcurrencyConfig"].is_null(),
            "{id}: provisioned concurrency with a capacity provider"
        );
    }
    assert!(
        (least_vcpus..=15_000).contains(&max_vcpus),
        "MaxVCpuCount {max_vcpus}: three environments of each function need {least_vcpus}"
    );
}

/// The local stack runs each function with the memory and timeout
/// CloudFormation deploys it with, in either mode. (It resolves the `!If`s
/// itself; CloudFormation resolves them before the SAM transform merges
/// `Globals`, so a function property that is `AWS::NoValue` takes the
/// `Globals` value.)
#[test]
fn the_local_stack_reads_each_function_as_it_is_deployed() {
    for overrides in [ON_DEMAND, MANAGED_INSTANCES] {
        let template = deployed(overrides);
        let local = Template::load(&workspace_root().join("template.yaml"))
            .and_then(|t| t.with_parameters(overrides))
            .and_then(|t| t.functions())
            .expect("the local stack reads the functions");
        assert_eq!(local.len(), function_count(), "{local:?}");
        for function in local {
            let deployed = &template["Resources"][&function.logical_id]["Properties"];
            // Lambda's defaults where the property is left out.
            let memory = deployed["MemorySize"].as_u64().unwrap_or(128);
            let timeout = deployed["Timeout"].as_u64().unwrap_or(3);
            assert_eq!(
                (memory, timeout),
                (u64::from(function.memory_mb), u64::from(function.timeout_s)),
                "{overrides:?}: {}",
                function.logical_id
            );
        }
    }
}

/// AWS::LanguageExtensions (which the functions' `!If`s need) drops every key
/// whose value is null, so a state machine's `"day": null` would vanish.
#[test]
fn no_value_in_the_template_is_null() {
    fn nulls(value: &Yaml, at: &str, found: &mut Vec<String>) {
        match value {
            Yaml::Null => found.push(at.to_owned()),
            Yaml::Mapping(map) => {
                for (k, v) in map {
                    let key = scalar(k).unwrap_or_default();
                    nulls(v, &format!("{at}/{key}"), found);
                }
            }
            Yaml::Sequence(list) => {
                for (i, v) in list.iter().enumerate() {
                    nulls(v, &format!("{at}/{i}"), found);
                }
            }
            Yaml::Tagged(tagged) => nulls(&tagged.value, at, found),
            _ => {}
        }
    }
    let text = std::fs::read_to_string(workspace_root().join("template.yaml")).expect("template");
    let doc: Yaml = serde_norway::from_str(&text).expect("template.yaml parses");
    let mut found = Vec::new();
    nulls(&doc, "", &mut found);
    assert!(
        found.is_empty(),
        "null values (AWS::LanguageExtensions drops them): {found:?}"
    );
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
    // Which queues are dead-letter queues is the template module's own
    // tests' (local-stack, `template::queues`).
    let dead_letter_queues = template.dead_letter_queues().expect("dead-letter queues");
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
    let template = deployed(ON_DEMAND);
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
    let template = deployed(ON_DEMAND);
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
    for (id, resource) in kept {
        for policy in ["DeletionPolicy", "UpdateReplacePolicy"] {
            assert_eq!(resource[policy], "Retain", "{id}: {policy}");
        }
    }
}

/// Every bucket refuses requests without TLS, whoever makes them (a bucket
/// policy denying `aws:SecureTransport = false` on the bucket and its objects,
/// what Security Hub's S3.5 checks).
#[test]
fn every_bucket_refuses_requests_without_tls() {
    let template = deployed(ON_DEMAND);
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

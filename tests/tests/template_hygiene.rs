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
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The default deployment: every function on demand.
const ON_DEMAND: &[(&str, &str)] = &[];

/// A deployment on Lambda Managed Instances.
const MANAGED_INSTANCES: &[(&str, &str)] = &[
    (
        "ManagedInstancesSubnetIds",
        "subnet-0123456789abcdef0,subnet-0fedcba9876543210",
    ),
    ("ManagedInstancesSecurityGroupIds", "sg-0123456789abcdef0"),
];

/// Lambda's ratios of memory to vCPUs on Managed Instances, in GiB per vCPU.
const LMI_RATIOS: [u64; 3] = [2, 4, 8];

/// Execution environments Lambda starts for each function version on Managed
/// Instances before it marks the version active (three Availability Zones).
const LMI_MIN_ENVIRONMENTS: u64 = 3;

/// `template.yaml` with these parameter values, as the SAM transform receives
/// it: what AWS::LanguageExtensions does first that the transform depends on
/// (every `!If` resolved with the parameters, `AWS::NoValue` dropped), written
/// to a file of its own. The parameters' defaults become the values, so
/// checkov and the transform see them too.
fn resolved(overrides: &[(&str, &str)], label: &str) -> PathBuf {
    let path = workspace_root().join("template.yaml");
    // Refuses a name the template lacks or a value it does not allow.
    Template::load(&path)
        .and_then(|t| t.with_parameters(overrides))
        .expect("the parameter values");
    let text = std::fs::read_to_string(&path).expect("template.yaml");
    let mut doc: Yaml = serde_norway::from_str(&text).expect("template.yaml parses");
    let mut values = BTreeMap::new();
    for (name, declaration) in doc["Parameters"].as_mapping().expect("parameters") {
        let name = name.as_str().expect("parameter name").to_owned();
        let given = overrides.iter().find(|(n, _)| *n == name).map(|(_, v)| *v);
        let value = match given {
            Some(v) => v.to_owned(),
            None => scalar(&declaration["Default"]).expect("a default"),
        };
        values.insert(name, value);
    }
    let conditions = doc["Conditions"].clone();
    let holds = |name: &str| condition(&conditions, &values, &conditions[name]);
    for section in ["Globals", "Resources", "Outputs"] {
        if let Some(value) = doc.get(section).map(|v| resolve_ifs(v, &holds)) {
            doc[section] = value.unwrap_or(Yaml::Null);
        }
    }
    for (name, value) in &values {
        doc["Parameters"][name.as_str()]["Default"] = Yaml::String(value.clone());
    }
    doc["Transform"] = Yaml::String("AWS::Serverless-2016-10-31".to_owned());
    // Tests run in parallel threads of one process: one file per call.
    static CALLS: AtomicUsize = AtomicUsize::new(0);
    let call = CALLS.fetch_add(1, Ordering::Relaxed);
    // JSON (a YAML PyYAML reads as CloudFormation does: no `2010-09-09` date).
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "template-{label}-{}-{call}.json",
        std::process::id()
    ));
    std::fs::write(&out, to_json(&doc).to_string()).expect("write");
    out
}

/// A template in JSON: each short-form intrinsic function (`!Ref`,
/// `!GetAtt A.B`, `!Sub`, ...) in its long form.
fn to_json(value: &Yaml) -> Value {
    match value {
        Yaml::Null => Value::Null,
        Yaml::Bool(b) => Value::Bool(*b),
        Yaml::Number(n) => serde_json::to_value(n).expect("a number"),
        Yaml::String(s) => Value::String(s.clone()),
        Yaml::Sequence(list) => Value::Array(list.iter().map(to_json).collect()),
        Yaml::Mapping(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (scalar(k).expect("a key"), to_json(v)))
                .collect(),
        ),
        Yaml::Tagged(tagged) => {
            let tag = tagged.tag.to_string();
            let name = tag.trim_start_matches('!');
            let inner = match (name, &tagged.value) {
                ("GetAtt", Yaml::String(path)) => {
                    let (resource, attribute) = path.split_once('.').expect("!GetAtt A.B");
                    json!([resource, attribute])
                }
                (_, inner) => to_json(inner),
            };
            let key = match name {
                "Ref" | "Condition" => name.to_owned(),
                _ => format!("Fn::{name}"),
            };
            json!({ key: inner })
        }
    }
}

/// `template.yaml` deployed with these parameter values, after the SAM
/// transform: what CloudFormation creates.
fn deployed(overrides: &[(&str, &str)]) -> Value {
    let label = if overrides.is_empty() {
        "on-demand"
    } else {
        "managed-instances"
    };
    let path = resolved(overrides, label);
    let template = least_privilege::transformed(&path);
    let _ = std::fs::remove_file(&path);
    template.expect("the SAM transform")
}

/// `value` with each `!If` replaced by its chosen branch and `!Ref
/// AWS::NoValue` dropped (`None` where it is dropped).
fn resolve_ifs(value: &Yaml, holds: &dyn Fn(&str) -> bool) -> Option<Yaml> {
    match value {
        Yaml::Tagged(tagged) if tagged.tag == "If" => {
            let parts = tagged
                .value
                .as_sequence()
                .expect("!If [condition, then, else]");
            let name = parts[0].as_str().expect("!If names a condition");
            resolve_ifs(&parts[if holds(name) { 1 } else { 2 }], holds)
        }
        Yaml::Tagged(tagged)
            if tagged.tag == "Ref" && tagged.value.as_str() == Some("AWS::NoValue") =>
        {
            None
        }
        Yaml::Tagged(tagged) => {
            let mut tagged = tagged.clone();
            tagged.value = resolve_ifs(&tagged.value, holds).unwrap_or(Yaml::Null);
            Some(Yaml::Tagged(tagged))
        }
        Yaml::Mapping(map) => Some(Yaml::Mapping(
            map.iter()
                .filter_map(|(k, v)| Some((k.clone(), resolve_ifs(v, holds)?)))
                .collect(),
        )),
        Yaml::Sequence(list) => Some(Yaml::Sequence(
            list.iter().filter_map(|v| resolve_ifs(v, holds)).collect(),
        )),
        other => Some(other.clone()),
    }
}

/// A condition of the template (`!Equals`, `!Not`, `!And`, `!Or`,
/// `!Condition`) with these parameter values.
fn condition(all: &Yaml, values: &BTreeMap<String, String>, definition: &Yaml) -> bool {
    let Yaml::Tagged(tagged) = definition else {
        panic!("not a condition: {definition:?}");
    };
    let operands = tagged
        .value
        .as_sequence()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let text = |operand: &Yaml| match operand {
        Yaml::Tagged(r) if r.tag == "Ref" => {
            let name = r.value.as_str().expect("!Ref of a name");
            values
                .get(name)
                .cloned()
                .unwrap_or_else(|| panic!("no parameter {name}"))
        }
        literal => scalar(literal).unwrap_or_else(|| panic!("not a scalar: {literal:?}")),
    };
    let tag = tagged.tag.to_string();
    match (tag.trim_start_matches('!'), operands) {
        ("Equals", [a, b]) => text(a) == text(b),
        ("Not", [inner]) => !condition(all, values, inner),
        ("And", all_of) => all_of.iter().all(|c| condition(all, values, c)),
        ("Or", any_of) => any_of.iter().any(|c| condition(all, values, c)),
        ("Condition", _) => {
            let name = tagged.value.as_str().expect("!Condition name");
            condition(all, values, &all[name])
        }
        (other, _) => panic!("a condition this test cannot evaluate: !{other}"),
    }
}

fn scalar(value: &Yaml) -> Option<String> {
    match value {
        Yaml::String(s) => Some(s.clone()),
        Yaml::Number(n) => Some(n.to_string()),
        Yaml::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// The template's resources of `kind`, by logical id.
fn of_type<'a>(template: &'a Value, kind: &str) -> Vec<(&'a String, &'a Value)> {
    template["Resources"]
        .as_object()
        .expect("resources")
        .iter()
        .filter(|(_, r)| r["Type"] == kind)
        .collect()
}

/// The operator role Lambda assumes to run the managed instances.
const OPERATOR_ROLE: &str = "ManagedInstancesOperatorRole";

/// The functions the template ships, each on Managed Instances when they are
/// on. (A function added later, `cargo xtask new-function`, runs on demand
/// until it is given a CapacityProviderConfig too.)
const SHIPPED_FUNCTIONS: [&str; 3] = [
    "OrderProcessorFunction",
    "PasswordHasherFunction",
    "ArrowWorkerFunction",
];

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
    for (mode, overrides, least_roles) in [
        ("on demand", ON_DEMAND, 5),
        ("on managed instances", MANAGED_INSTANCES, 6),
    ] {
        let template = deployed(overrides);
        let roles = of_type(&template, "AWS::IAM::Role").len();
        assert!(
            roles >= least_roles,
            "{mode}: three functions, the schedule and the state machine have roles (and the capacity provider's operator): {roles}"
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
    assert!(functions.len() >= SHIPPED_FUNCTIONS.len(), "{functions:?}");
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
    for shipped in SHIPPED_FUNCTIONS {
        let config = &template["Resources"][shipped]["Properties"]["CapacityProviderConfig"];
        assert!(!config.is_null(), "{shipped} runs on demand");
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
        assert!(local.len() >= SHIPPED_FUNCTIONS.len(), "{local:?}");
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
    let template = deployed(ON_DEMAND);
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

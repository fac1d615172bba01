//! Every combination of parameter values `template.yaml` allows deploys a
//! stack AWS accepts and that works as intended, and the template's `Rules`
//! refuse only combinations that would not.
//!
//! Each parameter's every allowed value is walked (`AllowedValues`, or
//! `MinValue` to `MaxValue`; a range of more than [`LONGEST_RANGE`] values at
//! its ends, its default and [`LONGEST_RANGE`] values spread between): the
//! parameters that interact as a cross product, every other one alone with the
//! rest at their defaults. For each combination
//! the `Rules` are evaluated and every SQS event source mapping is resolved
//! (batch size, the window as SAM passes it, the queue's FIFO flag and
//! visibility timeout, the function's timeout) and checked against
//! - Lambda: `lambda_rules::SqsMapping::check`, what `CreateEventSourceMapping` refuses;
//! - AWS's recommendation, the template's own rule: a visibility timeout of at
//!   least six function timeouts plus the batching window (otherwise messages
//!   reappear while still in flight and are processed twice);
//! - the template's own rule: a message that keeps failing reaches its
//!   dead-letter queue (`maxReceiveCount` receives, a visibility timeout apart)
//!   before the queue's retention period deletes it;
//! - CloudFormation: Lambda Managed Instances' capacity provider needs
//!   security groups (`VpcConfig.SecurityGroupIds`, each an `sg-` id) beside
//!   its subnets. (The functions' own settings on Managed Instances are checked
//!   as the local stack reads them, `Template::functions`.)
//!
//! A combination the `Rules` accept must pass them all; one they refuse must
//! fail at least one (no refusal without a reason).

use local_stack::template::Template;
use local_stack::workspace_root;

/// Parameters that interact, each group walked as a cross product (those
/// the template declares: a project without the order processor has none of
/// its queue's).
const TOGETHER: &[&[&str]] = &[
    &[
        "OrderBatchSize",
        "OrderBatchingWindowSeconds",
        "OrdersQueueFifo",
    ],
    &["MaxReceiveCount", "OrderBatchingWindowSeconds"],
    &[
        "ManagedInstancesSubnetIds",
        "ManagedInstancesSecurityGroupIds",
    ],
];

/// Values to try for parameters whose values cannot be listed (free text).
const SAMPLES: &[(&str, &[&str])] = &[
    ("AlarmEmail", &["", "ops@example.com"]),
    // On demand, or on Lambda Managed Instances in two subnets.
    (
        "ManagedInstancesSubnetIds",
        &["", "subnet-0123456789abcdef0,subnet-0fedcba9876543210"],
    ),
    (
        "ManagedInstancesSecurityGroupIds",
        &["", "sg-0123456789abcdef0"],
    ),
];

/// A walk this long means an interacting parameter needs `AllowedValues`.
const MOST_COMBINATIONS: usize = 20_000;

/// Ranges longer than this are sampled. Only `OrderCacheCapacity` (1 to
/// 100,000) is: an environment variable the function checks at cold start,
/// read by no rule and no mapping; every value would cost seconds for nothing.
const LONGEST_RANGE: usize = 1_000;

/// The walk stops after this many failures: they tell enough.
const MOST_FAILURES: usize = 20;

#[test]
fn every_allowed_parameter_combination_deploys_and_only_invalid_ones_are_refused() {
    let template = Template::load(&workspace_root().join("template.yaml")).expect("template.yaml");
    assert_eq!(
        verdict(&template, &[]),
        (Ok(()), vec![]),
        "the defaults must deploy and work"
    );
    let walks = walks(&template);
    let mut failures = Vec::new();
    let mut combinations = 0;
    'walk: for (names, values) in &walks {
        for combination in cross_product(values) {
            combinations += 1;
            let overrides: Vec<(&str, &str)> = names
                .iter()
                .map(String::as_str)
                .zip(combination.iter().map(String::as_str))
                .collect();
            let deployed = template
                .clone()
                .with_parameters(&overrides)
                .unwrap_or_else(|e| panic!("{overrides:?} is allowed: {e}"));
            match verdict(&deployed, &overrides) {
                (Ok(()), problems) if !problems.is_empty() => failures.push(format!(
                    "{overrides:?} is allowed, but: {}",
                    problems.join("; ")
                )),
                (Err(rule), problems) if problems.is_empty() => failures.push(format!(
                    "{overrides:?} is refused ({rule}), yet Lambda and the template's own rules accept it"
                )),
                _ => {}
            }
            if failures.len() >= MOST_FAILURES {
                break 'walk;
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} parameter combinations are wrong (the walk stops at {MOST_FAILURES}):\n{}",
        failures.len(),
        failures.join("\n")
    );
    let total: usize = walks.iter().map(|(_, values)| size(values)).sum();
    assert!(
        total <= MOST_COMBINATIONS,
        "{total} combinations to walk: give the interacting parameters AllowedValues"
    );
    assert_eq!(combinations, total);
}

/// The `Rules`' verdict, and what is wrong with the stack they would allow.
fn verdict(template: &Template, overrides: &[(&str, &str)]) -> (Result<(), String>, Vec<String>) {
    (template.check_rules(), problems(template, overrides))
}

/// Why the stack would be refused by Lambda or not work as intended; empty if
/// it deploys and works.
fn problems(template: &Template, overrides: &[(&str, &str)]) -> Vec<String> {
    let mappings = template.sqs_mappings().expect("the SQS events resolve");
    let queues = template.queues().expect("queues");
    let mut problems = capacity_provider_problems(template, overrides);
    for (source, mapping) in mappings {
        if let Err(reason) = mapping.check() {
            problems.push(format!("Lambda refuses the mapping: {reason}"));
        }
        let recommended = mapping.recommended_visibility_timeout_s();
        if mapping.visibility_timeout_s < recommended {
            problems.push(format!(
                "{}'s visibility timeout {} s is below 6 x the function timeout + the window = {recommended} s: \
                 messages reappear while in flight",
                source.queue, mapping.visibility_timeout_s
            ));
        }
        let queue = queues
            .iter()
            .find(|q| q.logical_id == source.queue)
            .expect("the mapping's queue");
        if let Some(redrive) = &queue.redrive {
            let to_dead_letters =
                u64::from(redrive.max_receive_count) * u64::from(queue.visibility_timeout_s);
            if to_dead_letters >= u64::from(queue.message_retention_s) {
                problems.push(format!(
                    "a failing message needs {to_dead_letters} s ({} receives, {} s apart) to reach {}, \
                     but {} deletes it after {} s",
                    redrive.max_receive_count,
                    queue.visibility_timeout_s,
                    redrive.dead_letter_queue,
                    queue.logical_id,
                    queue.message_retention_s
                ));
            }
        }
    }
    problems
}

/// Why CloudFormation would refuse the Lambda Managed Instances capacity
/// provider: with subnets given (`!Split` of `ManagedInstancesSubnetIds`),
/// its `VpcConfig.SecurityGroupIds` is `!Split` of
/// `ManagedInstancesSecurityGroupIds`, and every item must be an `sg-` id
/// (the resource schema), which the split of an empty value is not.
fn capacity_provider_problems(template: &Template, overrides: &[(&str, &str)]) -> Vec<String> {
    let parameters = template.parameters().expect("parameters");
    let value = |name: &str| -> String {
        overrides
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| (*v).to_owned())
            .or_else(|| {
                parameters
                    .iter()
                    .find(|p| p.name == name)
                    .and_then(|p| p.default.clone())
            })
            .unwrap_or_else(|| panic!("template.yaml has no parameter {name} with a default"))
    };
    if value("ManagedInstancesSubnetIds").is_empty() {
        return Vec::new();
    }
    let groups = value("ManagedInstancesSecurityGroupIds");
    groups
        .split(',')
        .filter(|id| !id.starts_with("sg-"))
        .map(|id| {
            format!(
                "CloudFormation refuses the capacity provider: SecurityGroupIds item {id:?} is not a security group id"
            )
        })
        .collect()
}

/// The walks: each group of [`TOGETHER`], then every other parameter alone;
/// (names, each name's values).
fn walks(template: &Template) -> Vec<(Vec<String>, Vec<Vec<String>>)> {
    let parameters = template.parameters().expect("parameters");
    let values = |name: &str| -> Vec<String> {
        let parameter = parameters
            .iter()
            .find(|p| p.name == name)
            .unwrap_or_else(|| panic!("template.yaml has no parameter {name}"));
        parameter
            .every_value()
            .map(|every| sampled(every, parameter.default.as_deref()))
            .or_else(|| {
                SAMPLES
                    .iter()
                    .find(|(n, _)| *n == name)
                    .map(|(_, v)| v.iter().map(|s| (*s).to_owned()).collect())
            })
            .unwrap_or_else(|| {
                panic!("{name} allows values that cannot be listed: add samples to SAMPLES")
            })
    };
    let declared = |name: &&str| parameters.iter().any(|p| p.name == *name);
    let mut walks: Vec<(Vec<String>, Vec<Vec<String>>)> = TOGETHER
        .iter()
        .map(|group| group.iter().copied().filter(declared).collect::<Vec<_>>())
        .filter(|group| !group.is_empty())
        .map(|group| {
            let names = group.iter().map(|n| (*n).to_owned()).collect();
            (names, group.iter().map(|n| values(n)).collect())
        })
        .collect();
    for parameter in &parameters {
        if !TOGETHER
            .iter()
            .any(|g| g.contains(&parameter.name.as_str()))
        {
            walks.push((vec![parameter.name.clone()], vec![values(&parameter.name)]));
        }
    }
    walks
}

/// `every` if it has at most [`LONGEST_RANGE`] values, else its ends, its
/// `default` and [`LONGEST_RANGE`] values evenly spread between.
fn sampled(every: Vec<String>, default: Option<&str>) -> Vec<String> {
    if every.len() <= LONGEST_RANGE {
        return every;
    }
    let step = every.len() / LONGEST_RANGE;
    let ends_and_default = every.last().map(String::as_str).into_iter().chain(default);
    let mut values: Vec<String> = every.iter().step_by(step).cloned().collect();
    for value in ends_and_default {
        if !values.iter().any(|v| v == value) {
            values.push(value.to_owned());
        }
    }
    values
}

/// How many combinations `values` makes.
fn size(values: &[Vec<String>]) -> usize {
    values.iter().map(Vec::len).product()
}

/// Every combination of one value per list, the first list varying fastest.
fn cross_product(values: &[Vec<String>]) -> impl Iterator<Item = Vec<String>> + '_ {
    (0..size(values)).map(move |mut index| {
        values
            .iter()
            .map(|list| {
                let value = list[index % list.len()].clone();
                index /= list.len();
                value
            })
            .collect()
    })
}

//! What the generic sections send each function: its plan
//! (`lab_probes::plan`), from its `plan` probe or else its sample events,
//! and the `prepare` probe a request may name first.

use super::probes::{self, Probes, SHIPPED};
use super::scale::Scale;
use lab_probes::plan::{FirstInvocation, Plan, Request};
use local_stack::local_aws;
use local_stack::template::{Function, Template};

/// The template's functions, each with its settings as the lab runs it: a
/// queue it names is a URL on a closed local port.
pub use local_stack::elasticmq::functions_without_queues as functions;

/// The template's function with the least memory (the smallest CPU share,
/// where a cold cost weighs most) among those `keep` accepts.
pub fn smallest(
    template: &Template,
    keep: impl Fn(&Function) -> bool,
) -> Result<Option<Function>, String> {
    Ok(template
        .functions()?
        .into_iter()
        .filter(|f| keep(f))
        .min_by_key(|f| f.memory_mb))
}

/// `spec`'s plan at `scale`, each request with events for `count`
/// invocations (fewer if they need not differ).
pub fn of(probes: &Probes, spec: &Function, scale: Scale, count: usize) -> Result<Plan, String> {
    let probe = probes::of(&spec.binary, "plan");
    if !probes.has(&probe) {
        return from_samples(spec);
    }
    let scale = match scale {
        Scale::Full => "full",
        Scale::Quick => "quick",
    };
    let line = probes.run(SHIPPED, &probe, &[scale.to_owned(), count.to_string()], &[])?;
    serde_json::from_value(line).map_err(|e| format!("{probe}: not a plan: {e}"))
}

/// The plan of a function without a `plan` probe: each sample event it is
/// invoked with (`events/<binary>/`) a request of its own, the first the
/// power tuning's work.
fn from_samples(spec: &Function) -> Result<Plan, String> {
    let requests: Vec<Request> = local_stack::events::samples(&spec.binary)?
        .into_iter()
        .filter(|sample| sample.state_machine().is_none())
        .map(|sample| Request {
            size: sample.file_name().trim_end_matches(".json").to_owned(),
            description: format!("`events/{}/{}`", spec.binary, sample.file_name()),
            steady: None,
            prepare: None,
            events: vec![sample.event],
        })
        .collect();
    // Its steady invocations are the power tuning's default.
    let power = requests
        .first()
        .cloned()
        .ok_or_else(|| format!("{}: no plan probe and no sample event", spec.binary))?;
    Ok(Plan {
        first_invocation: FirstInvocation {
            measures: Vec::new(),
            requests,
        },
        power,
    })
}

/// Run `spec`'s `prepare` probe with `args`, its settings and DynamoDB at
/// `dynamodb` (plain HTTP).
pub fn prepare(
    probes: &Probes,
    spec: &Function,
    args: &[String],
    dynamodb: &str,
) -> Result<(), String> {
    let probe = probes::of(&spec.binary, "prepare");
    if !probes.has(&probe) {
        return Err(format!(
            "{}'s plan asks to prepare {args:?}, and it has no `{probe}` probe",
            spec.binary
        ));
    }
    let env = settings(
        spec,
        &local_aws::function_env(&[
            ("AWS_ENDPOINT_URL_DYNAMODB", dynamodb),
            ("AWS_REGION", local_aws::REGION),
        ]),
    );
    probes.run(SHIPPED, &probe, args, &env).map(drop)
}

/// `function`'s settings, then `extra` ones (a later one wins where a
/// program reads the last).
pub fn settings<'a>(
    function: &'a Function,
    extra: &[(&'a str, &'a str)],
) -> Vec<(&'a str, &'a str)> {
    function
        .env
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .chain(extra.iter().copied())
        .collect()
}

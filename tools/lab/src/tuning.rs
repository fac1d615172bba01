//! Measured power tuning: each function's release bootstrap (`sam build`)
//! under the runtime interface emulator at every memory size of
//! [`MEMORY_SIZES_MB`], in a cgroup with that size's CPU quota and memory
//! limit (`local_stack::cgroup`), doing a fixed piece of work: its plan's
//! `power` request (`lab_probes::plan`). One warm-up
//! invocation, then steady ones; the durations are the emulator's `REPORT`
//! lines (what Lambda bills), the detected vCPUs the function's init line.

use super::cold_start::{BUILD_DIRS, bootstrap};
use super::plan;
use super::power::{MEMORY_SIZES_MB, Measured, Outcome, Point};
use super::probes::Probes;
use super::scale::Scale;
use super::stack::{Tables, logs_dir};
use lab_probes::plan::Request;
use local_stack::emulator::{Emulator, Invocation};
use local_stack::template::{Function, Template};
use local_stack::{cgroup, local_aws, tools, workspace_root};
use serde_json::Value;
use std::path::Path;

/// Steady invocations per size where a plan does not say.
const STEADY: usize = 5;
/// Events asked of a plan per memory size: the warm-up and up to this many
/// steady invocations get one each (a plan asking for more sends them in turn).
const MOST_STEADY: usize = 10;

/// One function's fixed work.
struct Workload {
    spec: Function,
    request: Request,
    steady: usize,
}

/// One function's curve.
#[derive(Debug, Clone)]
pub struct Curve {
    pub binary: String,
    /// The memory size `template.yaml` gives it.
    pub template_mb: u64,
    pub description: String,
    pub steady: usize,
    pub points: Vec<Point>,
}

/// `sam build` (x86_64): the bootstraps of the code as it is now (cargo
/// rebuilds only what changed).
pub fn build() -> Result<(), String> {
    tools::install()?;
    local_stack::sam::sam(&["build"])
}

/// Measure every function's work at every size. Needs the x86_64 release
/// bootstraps and enforced limits (else the sizes would not differ).
pub fn measure(probes: &Probes, cores: usize, tick: &dyn Fn(&str)) -> Result<Vec<Curve>, String> {
    let template = Template::load(&workspace_root().join("template.yaml"))?;
    let rie = tools::emulator()?;
    let logs = logs_dir()?;

    tick("power tuning: DynamoDB Local");
    let tables = Tables::start(&template, &logs.join("power-dynamodb.log"))?;
    let endpoint = tables.endpoint();
    let env = local_aws::function_env(&[("AWS_ENDPOINT_URL_DYNAMODB", &endpoint)]);
    let count = MEMORY_SIZES_MB.len() * (1 + MOST_STEADY);
    let mut workloads = Vec::new();
    for spec in plan::functions(&template)? {
        let request = plan::of(probes, &spec, Scale::Full, count)?.power;
        let steady = request.steady.unwrap_or(STEADY);
        workloads.push(Workload {
            spec,
            request,
            steady,
        });
    }
    // The functions that prepare what they read first, so that their tables
    // hold exactly that; the curves are reported in the template's order.
    let mut order: Vec<&Workload> = workloads.iter().collect();
    order.sort_by_key(|w| w.request.prepare.is_none());
    let mut curves: Vec<Curve> = Vec::new();
    for workload in order {
        if let Some(args) = &workload.request.prepare {
            tick(&format!(
                "power tuning: {}, preparing {}",
                workload.spec.binary,
                args.join(" ")
            ));
            plan::prepare(probes, &workload.spec, args, &endpoint)?;
        }
        curves.push(curve(&rie, &env, &logs, workload, cores, tick)?);
    }
    curves.sort_by_key(|c| workloads.iter().position(|w| w.spec.binary == c.binary));
    drop(tables);
    Ok(curves)
}

/// The power tuning, or why it cannot run here (no CPU and memory limits).
pub fn measure_if_limits_enforced(
    probes: &Probes,
    cores: usize,
    tick: &dyn Fn(&str),
) -> Result<Result<Vec<Curve>, String>, String> {
    match cgroup::enforced() {
        Err(why) => Ok(Err(format!(
            "CPU and memory limits are not enforced here ({why})"
        ))),
        Ok(()) => Ok(Ok(measure(probes, cores, tick)?)),
    }
}

/// One workload's curve: its release bootstrap at every memory size in turn
/// (the invocations numbered across sizes, so that every event is new).
fn curve(
    rie: &Path,
    env: &[(&str, &str)],
    logs: &Path,
    workload: &Workload,
    cores: usize,
    tick: &dyn Fn(&str),
) -> Result<Curve, String> {
    let (spec, name) = (&workload.spec, &workload.spec.binary);
    let binary = bootstrap(BUILD_DIRS[0].1, &spec.logical_id);
    built(&binary)?;
    let mut invocations = 0;
    let mut points = Vec::new();
    for mb in MEMORY_SIZES_MB {
        tick(&format!("power tuning: {} at {mb} MB", name));
        let mut sized = spec.clone();
        sized.memory_mb = u32::try_from(mb).map_err(|e| e.to_string())?;
        let log = logs.join(format!("power-{}-{mb}.log", name));
        let outcome = at_size(rie, &binary, &sized, env, &log, workload, &mut invocations)?;
        points.push(Point {
            mb,
            capped: cgroup::cpu_quota(mb, cores).capped,
            outcome,
        });
    }
    let failures: Vec<&str> = points
        .iter()
        .filter_map(|p| match &p.outcome {
            Outcome::Failed(why) => Some(why.as_str()),
            Outcome::Measured(_) => None,
        })
        .collect();
    if failures.len() == points.len() {
        // A setup problem, not a measurement.
        return Err(format!(
            "{} failed at every memory size ({}); see {}",
            name,
            failures.first().unwrap_or(&"no size tried"),
            logs.join(format!("power-{}-*.log", name)).display()
        ));
    }
    Ok(Curve {
        binary: name.clone(),
        template_mb: u64::from(spec.memory_mb),
        description: workload.request.description.clone(),
        steady: workload.steady,
        points,
    })
}

/// One size: start, warm up, the steady invocations, then read the log.
fn at_size(
    rie: &Path,
    binary: &Path,
    spec: &Function,
    env: &[(&str, &str)],
    log: &Path,
    workload: &Workload,
    invocations: &mut u64,
) -> Result<Outcome, String> {
    let emulator = Emulator::start(rie, binary, spec, env, log)?;
    for _ in 0..=workload.steady {
        let event = workload
            .request
            .event(*invocations)
            .ok_or_else(|| format!("{}: a power request without events", spec.binary))?;
        let answer = emulator.invoke(event.to_string())?;
        *invocations += 1;
        if let Some(failure) = failure(&answer) {
            return Ok(Outcome::Failed(failure));
        }
    }
    let logs = emulator.logs_when(|l| report_durations_ms(l).len() > workload.steady);
    emulator.stop();
    let durations = report_durations_ms(&logs);
    let steady = durations
        .len()
        .checked_sub(workload.steady)
        .filter(|&warm_up| warm_up >= 1)
        .map(|warm_up| durations[warm_up..].to_vec())
        .ok_or_else(|| {
            format!(
                "{}: {} REPORT line(s) for {} invocations",
                log.display(),
                durations.len(),
                workload.steady + 1
            )
        })?;
    let init = init_line(&logs).ok_or_else(|| format!("{}: no init line", log.display()))?;
    let (Some(detected_vcpus), Some(workers)) =
        (init["cpu_share"].as_f64(), init["workers"].as_u64())
    else {
        return Err(format!(
            "{}: no cpu_share or workers in {init}",
            log.display()
        ));
    };
    Ok(Outcome::Measured(Measured {
        all_ms: steady,
        detected_vcpus,
        workers,
    }))
}

/// `Ok` if the release bootstrap `binary` exists.
fn built(binary: &Path) -> Result<(), String> {
    if binary.is_file() {
        Ok(())
    } else {
        Err(format!("{} is missing: run `sam build`", binary.display()))
    }
}

/// Why `answer` is not a success: the function's `errorType`, or the records
/// of a batch it did not acknowledge.
pub fn failure(answer: &Invocation) -> Option<String> {
    let Ok(json) = answer.json() else {
        return Some(format!("HTTP {}: not JSON", answer.status));
    };
    if let Some(error) = json["errorType"].as_str() {
        return Some(error.to_owned());
    }
    match json["batchItemFailures"].as_array() {
        Some(failed) if !failed.is_empty() => Some(format!("{} record(s) failed", failed.len())),
        _ => None,
    }
}

/// The `Duration` of every `REPORT` line the emulator wrote, in order, ms
/// (not its `Init Duration` or `Billed Duration`).
pub fn report_durations_ms(logs: &str) -> Vec<f64> {
    logs.lines()
        .filter_map(|line| line.split_once("REPORT RequestId:").map(|(_, rest)| rest))
        .filter_map(|rest| {
            rest.split('\t')
                .find_map(|field| field.trim().strip_prefix("Duration: "))
                .and_then(|d| d.trim_end_matches("ms").trim().parse().ok())
        })
        .collect()
}

/// The shared crate's `shared init done` line (JSON logs).
fn init_line(logs: &str) -> Option<Value> {
    logs.lines()
        .filter(|line| line.starts_with('{'))
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .find(|line| line["message"] == "shared init done")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_come_from_report_lines_only() {
        let logs = "START RequestId: a Version: $LATEST\n\
            {\"message\":\"Duration: 99 ms\"}\n\
            END RequestId: a\n\
            REPORT RequestId: a\tInit Duration: 12.50 ms\tDuration: 2103.27 ms\tBilled Duration: 2104 ms\tMemory Size: 3538 MB\tMax Memory Used: 3538 MB\t\n\
            INIT REPORT(durationMs: 12.5)\n\
            REPORT RequestId: b\tDuration: 7.01 ms\tBilled Duration: 8 ms\tMemory Size: 128 MB\tMax Memory Used: 128 MB\t\n\
            REPORT RequestId: c\tno duration\n";
        assert_eq!(report_durations_ms(logs), vec![2103.27, 7.01]);
        assert!(report_durations_ms("").is_empty());
    }

    #[test]
    fn failures_are_error_types_or_unacknowledged_records() {
        let answer = |body: &str| Invocation {
            status: 200,
            body: body.into(),
        };
        assert_eq!(failure(&answer(r#"{"hashes":["x"]}"#)), None);
        assert_eq!(failure(&answer(r#"{"batchItemFailures":[]}"#)), None);
        assert_eq!(
            failure(&answer(
                r#"{"errorType":"Runtime.OutOfMemory","errorMessage":"m"}"#
            )),
            Some("Runtime.OutOfMemory".into())
        );
        assert_eq!(
            failure(&answer(r#"{"batchItemFailures":[{"itemIdentifier":"1"}]}"#)),
            Some("1 record(s) failed".into())
        );
        assert!(failure(&answer("<html>")).is_some());
    }
}

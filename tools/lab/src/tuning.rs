//! Measured power tuning: each function's release bootstrap (`sam build`)
//! under the runtime interface emulator at every memory size of
//! [`MEMORY_SIZES_MB`], in a cgroup with that size's CPU quota and memory
//! limit (`local_stack::cgroup`), doing a fixed piece of work. One warm-up
//! invocation, then steady ones; the durations are the emulator's `REPORT`
//! lines (what Lambda bills), the detected vCPUs the function's init line.

use super::bcrypt;
use super::cold_start::{BUILD_DIRS, bootstrap};
use super::power::{MEMORY_SIZES_MB, Measured, Outcome, Point};
use super::stack::{Tables, logs_dir};
use local_stack::emulator::{Emulator, Invocation};
use local_stack::template::{Function, Template};
use local_stack::{cgroup, events, local_aws, tools, workspace_root};
use serde_json::{Value, json};
use std::path::Path;

/// Orders in the table the Arrow worker aggregates (written once, through
/// the order processor).
pub const TABLE_ORDERS: u64 = 3_000;
/// Orders per order-processor invocation (an SQS batch).
pub const BATCH_ORDERS: u64 = 10;
/// The Arrow worker's request, one of its sample events.
pub const ARROW_EVENT: &str = "report-by-customer.json";
/// The memory size the table is loaded at (two whole vCPUs: loading is not measured).
const LOADING_MB: u32 = 3_538;

/// One function's fixed work.
pub struct Workload {
    pub binary: &'static str,
    /// What one invocation does, for the report.
    pub description: String,
    /// Steady invocations per size, after one warm-up.
    pub steady: usize,
    /// Settings beside the template's.
    env: Vec<(&'static str, &'static str)>,
    /// The `n`-th invocation's event.
    event: Box<dyn Fn(u64) -> String>,
}

/// One function's curve.
#[derive(Debug, Clone)]
pub struct Curve {
    pub binary: &'static str,
    /// The memory size `template.yaml` gives it.
    pub template_mb: u64,
    pub description: String,
    pub steady: usize,
    pub points: Vec<Point>,
}

/// The three workloads: the hasher's batch (the one of the bcrypt section),
/// an SQS batch of valid orders with fresh ids (every record a real write),
/// and an aggregation over [`TABLE_ORDERS`] orders.
pub fn workloads() -> Result<Vec<Workload>, String> {
    let passwords: Vec<String> = (0..bcrypt::BATCH)
        .map(|i| format!("correct horse battery staple {i}"))
        .collect();
    let hash =
        json!({ "operation": "hash", "cost": bcrypt::COST, "passwords": passwords }).to_string();
    let (_, aggregate) = events::of("arrow-worker")?
        .into_iter()
        .find(|(path, _)| path.ends_with(ARROW_EVENT))
        .ok_or_else(|| format!("events/arrow-worker/{ARROW_EVENT} is missing"))?;
    Ok(vec![
        Workload {
            binary: "password-hasher",
            description: format!(
                "a batch of {} hashes at cost {} (section 2's)",
                bcrypt::BATCH,
                bcrypt::COST
            ),
            steady: 3,
            env: Vec::new(),
            event: Box::new(move |_| hash.clone()),
        },
        Workload {
            binary: "order-processor",
            description: format!(
                "an SQS batch of {BATCH_ORDERS} valid orders, new ids each time, written to DynamoDB Local"
            ),
            steady: 5,
            // A queue URL its settings accept; valid orders send no dead
            // letters (and SQS calls go to the closed local endpoint).
            env: vec![(
                "DEAD_LETTER_QUEUE_URL",
                order_processor_testkit::dead_letters::QUEUE_URL,
            )],
            // After the orders of the Arrow worker's table.
            event: Box::new(|n| orders_event(TABLE_ORDERS + n * BATCH_ORDERS)),
        },
        Workload {
            binary: "arrow-worker",
            description: format!(
                "`events/arrow-worker/{ARROW_EVENT}` over a table of {TABLE_ORDERS} orders in DynamoDB Local"
            ),
            steady: 5,
            env: Vec::new(),
            event: Box::new(move |_| aggregate.clone()),
        },
    ])
}

/// An SQS event of [`BATCH_ORDERS`] sample orders from `first`.
fn orders_event(first: u64) -> String {
    let records = order_processor_testkit::orders::records(
        first..first + BATCH_ORDERS,
        order_processor_testkit::orders::body,
    );
    json!({ "Records": records }).to_string()
}

/// `sam build` (x86_64): the bootstraps of the code as it is now (cargo
/// rebuilds only what changed).
pub fn build() -> Result<(), String> {
    tools::install()?;
    local_stack::sam::sam(&["build"])
}

/// Measure every workload at every size. Needs the x86_64 release bootstraps
/// and enforced limits (else the sizes would not differ).
pub fn measure(cores: usize, tick: &dyn Fn(&str)) -> Result<Vec<Curve>, String> {
    let template = Template::load(&workspace_root().join("template.yaml"))?;
    let rie = tools::emulator()?;
    let logs = logs_dir()?;

    tick("power tuning: DynamoDB Local");
    let tables = Tables::start(&template, &logs.join("power-dynamodb.log"))?;
    let endpoint = tables.endpoint();
    let env = local_aws::function_env(&[("AWS_ENDPOINT_URL_DYNAMODB", &endpoint)]);

    let workloads = workloads()?;
    let with = |workload: &Workload| [env.as_slice(), &workload.env].concat();
    tick("power tuning: loading the orders table");
    let processor = workloads.iter().find(|w| w.binary == "order-processor");
    load_table(
        &rie,
        &template.function("order-processor")?,
        &processor.map(with).unwrap_or_default(),
        &logs,
    )?;
    // The Arrow worker first, so that its table holds exactly the loaded
    // orders; the curves are reported in the workloads' order.
    let mut order: Vec<&Workload> = workloads.iter().collect();
    order.sort_by_key(|w| w.binary != "arrow-worker");
    let mut curves: Vec<Curve> = Vec::new();
    for workload in order {
        let spec = template.function(workload.binary)?;
        curves.push(curve(
            &rie,
            &spec,
            &with(workload),
            &logs,
            workload,
            cores,
            tick,
        )?);
    }
    curves.sort_by_key(|c| workloads.iter().position(|w| w.binary == c.binary));
    drop(tables);
    Ok(curves)
}

/// The power tuning, or why it cannot run here (no CPU and memory limits).
pub fn measure_if_limits_enforced(
    cores: usize,
    tick: &dyn Fn(&str),
) -> Result<Result<Vec<Curve>, String>, String> {
    match cgroup::enforced() {
        Err(why) => Ok(Err(format!(
            "CPU and memory limits are not enforced here ({why})"
        ))),
        Ok(()) => Ok(Ok(measure(cores, tick)?)),
    }
}

/// One workload's curve: its release bootstrap at every memory size in turn
/// (the invocations numbered across sizes, so that every event is new).
fn curve(
    rie: &Path,
    spec: &Function,
    env: &[(&str, &str)],
    logs: &Path,
    workload: &Workload,
    cores: usize,
    tick: &dyn Fn(&str),
) -> Result<Curve, String> {
    let binary = bootstrap(BUILD_DIRS[0].1, &spec.logical_id);
    built(&binary)?;
    let mut invocations = 0;
    let mut points = Vec::new();
    for mb in MEMORY_SIZES_MB {
        tick(&format!("power tuning: {} at {mb} MB", workload.binary));
        let mut sized = spec.clone();
        sized.memory_mb = u32::try_from(mb).map_err(|e| e.to_string())?;
        let log = logs.join(format!("power-{}-{mb}.log", workload.binary));
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
            workload.binary,
            failures.first().unwrap_or(&"no size tried"),
            logs.join(format!("power-{}-*.log", workload.binary))
                .display()
        ));
    }
    Ok(Curve {
        binary: workload.binary,
        template_mb: u64::from(spec.memory_mb),
        description: workload.description.clone(),
        steady: workload.steady,
        points,
    })
}

/// Write the Arrow worker's [`TABLE_ORDERS`] orders through the order processor.
fn load_table(
    rie: &Path,
    spec: &Function,
    env: &[(&str, &str)],
    logs: &Path,
) -> Result<(), String> {
    let mut spec = spec.clone();
    spec.memory_mb = LOADING_MB;
    let binary = bootstrap(BUILD_DIRS[0].1, &spec.logical_id);
    built(&binary)?;
    let emulator = Emulator::start(rie, &binary, &spec, env, &logs.join("power-loading.log"))?;
    for first in (0..TABLE_ORDERS).step_by(BATCH_ORDERS as usize) {
        let answer = emulator.invoke(orders_event(first))?;
        if let Some(failure) = failure(&answer) {
            return Err(format!("loading the orders table: {failure}"));
        }
    }
    emulator.stop();
    Ok(())
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
        let answer = emulator.invoke((workload.event)(*invocations))?;
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

    #[test]
    fn order_batches_are_valid_and_fresh() {
        let first: Value = serde_json::from_str(&orders_event(0)).expect("JSON");
        let second: Value = serde_json::from_str(&orders_event(BATCH_ORDERS)).expect("JSON");
        let bodies = |event: &Value| -> Vec<String> {
            event["Records"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|r| r["body"].as_str().map(str::to_owned))
                .collect()
        };
        assert_eq!(bodies(&first).len(), BATCH_ORDERS as usize);
        for body in bodies(&first) {
            assert!(!bodies(&second).contains(&body));
        }
    }
}

//! Each state machine's input (a sample whose expectation names the state
//! machine, see [`crate::expectations`]) through that state machine on moto,
//! its execution's output checked against the sample's expectation.

use super::answers::summarize;
use super::plan::Plan;
use super::stack::Stack;
use crate::events::Sample;
use crate::expectations::{self, Context};
use crate::step_functions::{self, Execution};
use serde_json::{Value, json};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How long an execution may run.
const EXECUTION_TIMEOUT: Duration = Duration::from_secs(300);

/// Every state machine input of the plan, a step each; `stored` items
/// stored so far (what a report covers). A line names the state machines
/// no sample starts.
pub(super) fn run_all(
    stack: &Stack,
    plan: &Plan,
    stored: usize,
    step: &mut usize,
    failures: &mut Vec<String>,
) -> Result<(), String> {
    for (binary, sample) in &plan.executions {
        *step += 1;
        run_one(stack, binary, sample, stored, *step, failures)?;
    }
    let unstarted: Vec<&str> = stack
        .state_machines
        .iter()
        .map(|m| m.logical_id.as_str())
        .filter(|id| {
            !plan
                .executions
                .iter()
                .any(|(_, s)| s.state_machine() == Some(id))
        })
        .collect();
    if !unstarted.is_empty() {
        println!(
            "\nState machines no sample starts (none's expectation names them as its state_machine): {}",
            unstarted.join(", ")
        );
    }
    Ok(())
}

/// One execution of the state machine `sample` names, with the sample as its
/// input (step `step`), from `events/<binary>/`: its status, a line about
/// its output and the trace of its Lambda tasks; checked.
fn run_one(
    stack: &Stack,
    binary: &str,
    sample: &Sample,
    stored: usize,
    step: usize,
    failures: &mut Vec<String>,
) -> Result<(), String> {
    let file = format!("events/{binary}/{}", sample.file_name());
    let name = sample.state_machine().unwrap_or_default();
    println!("\n{step}. State machine {name} (Step Functions on moto), input {file}:");
    let machine = match stack.state_machine(name) {
        Ok(machine) => machine,
        Err(e) => {
            println!("   NOT AS EXPECTED: {e}");
            failures.push(format!("{file}: {e}"));
            return Ok(());
        }
    };
    let client = step_functions::Client::new(&stack.moto.endpoint());
    let (started, since_us) = (Instant::now(), now_us());
    let execution_arn = client.start_execution(&machine.arn, &sample.event, None)?;
    let execution = client.wait(&execution_arn, EXECUTION_TIMEOUT)?;
    let answer = execution_answer(&execution);
    println!(
        "   {} in {:.1} s: {}",
        execution.status,
        started.elapsed().as_secs_f64(),
        summarize(&answer)
    );
    // Lambda tasks send the execution's trace header: one trace for all.
    if let Some(url) = stack.trace_of(|span| span["timestamp"].as_u64() >= Some(since_us)) {
        println!("   the trace of its last Lambda task: {url}");
    }
    let output = stack.all_logs();
    let context = Context {
        stored_orders: stored,
        dead_letter_queue: true,
        output: &output,
    };
    if let Err(e) = expectations::check(&sample.expect, &sample.event, &answer, &context) {
        println!("   NOT AS EXPECTED: {e}");
        failures.push(format!("{name} {file}: {e}"));
    }
    Ok(())
}

/// What the expectation of an execution's input checks: the output of a
/// succeeded execution, else `{"errorType": <its error>, "errorMessage":
/// <its cause>}`, as a function error reads.
fn execution_answer(execution: &Execution) -> Value {
    match &execution.output {
        Some(output) if execution.succeeded() => output.clone(),
        _ => json!({
            "errorType": execution.error.as_deref().unwrap_or(&execution.status),
            "errorMessage": execution.cause.as_deref().unwrap_or("no cause"),
        }),
    }
}

/// Microseconds since the Unix epoch (Zipkin's span timestamps).
fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn execution(status: &str, output: Option<Value>, error: Option<&str>) -> Execution {
        Execution {
            status: status.into(),
            output,
            error: error.map(str::to_owned),
            cause: error.map(|e| format!("{e} happened")),
        }
    }

    #[test]
    fn a_failed_execution_answers_as_a_function_error() {
        let output = json!({"groups": []});
        let succeeded = execution("SUCCEEDED", Some(output.clone()), None);
        assert_eq!(execution_answer(&succeeded), output);
        let failed = execution("FAILED", None, Some("Busy"));
        assert_eq!(
            execution_answer(&failed),
            json!({"errorType": "Busy", "errorMessage": "Busy happened"})
        );
        let aborted = execution("ABORTED", None, None);
        assert_eq!(
            execution_answer(&aborted),
            json!({"errorType": "ABORTED", "errorMessage": "no cause"})
        );
        let expect =
            expectations::parse(std::path::Path::new("x"), r#"{"function_error": "Busy"}"#)
                .expect("an expectation");
        let checked = expectations::check(
            &expect,
            &json!({}),
            &execution_answer(&failed),
            &Context::default(),
        );
        assert_eq!(checked, Ok(()));
    }
}

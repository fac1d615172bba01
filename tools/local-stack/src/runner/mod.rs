//! `cargo xtask run`: the whole application on this machine, without Docker.
//!
//! It knows the functions only through `template.yaml`, their built binaries
//! and their sample events (`events/<function>/`, each with what its answer
//! must hold beside it): delete a function, its events and its resources, or
//! add one, and it runs what is left.
//!
//! First the stack ([`stack`], [`functions`]): DynamoDB Local and ElasticMQ on
//! free loopback ports, with the tables and queues the template declares;
//! each function's `sam build` output under the runtime interface emulator
//! with the memory, timeout and environment the template declares (only the
//! AWS endpoints, and queue URLs, point at the local servers); moto as Step
//! Functions and S3, with the template's buckets and state machines, whose
//! Lambda tasks call the local Lambda Invoke API.
//!
//! Then the demonstration, each sample sent the way it reaches its function
//! ([`plan`]): the SQS batches' bodies through their function's queue and the
//! local event source mapping ([`queues`], what ends stored and dead-lettered
//! checked against the expectations), every other event straight to its
//! function ([`invocations`]), each schedule of the template fired once, and
//! each state machine's input through its state machine ([`executions`]),
//! every answer checked against the expectation beside it. With `--keep`
//! everything stays up ([`keep`]). Everything started is stopped on return,
//! error or Ctrl-C.

mod answers;
mod executions;
mod functions;
mod invocations;
mod keep;
mod plan;
mod queues;
mod stack;

use crate::cgroup::Limits;
use crate::process;
use crate::template::Template;
use stack::Stack;
use std::path::Path;

/// What `cargo xtask run` was asked for.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// Leave everything running (and the queues polled) until Ctrl-C.
    pub keep: bool,
    /// Visibility timeout of every local queue, in seconds: short, so that a
    /// failed message comes back, and reaches the dead-letter queue, within
    /// the demonstration instead of after the template's minutes.
    pub visibility_timeout_s: u32,
    /// Most environments (emulator processes) per function without reserved
    /// concurrency (see [`crate::pool`]).
    pub concurrency: usize,
    /// Whether functions run under Lambda's CPU share and memory limit.
    pub limits: Limits,
}

/// Default [`Options::visibility_timeout_s`]: above a cold debug build's
/// first batch under a small function's CPU share (about 1.3 s here for the
/// shipped SQS-fed function: init and invocation), so that no batch outlives
/// its messages' visibility.
pub const DEFAULT_VISIBILITY_TIMEOUT_S: u32 = 5;

/// What the demonstration saw.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    /// Each SQS event source of the template, in the template's order: what
    /// its function's sample messages became. Empty without one.
    pub queues: Vec<QueueFlow>,
    /// Samples, queues, schedules and executions that did not end as expected.
    pub failures: Vec<String>,
}

/// What the sample messages of one SQS-fed function became.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueueFlow {
    /// The function's binary.
    pub function: String,
    /// The queue's logical id.
    pub queue: String,
    /// Messages sent: the record bodies of the function's SQS batch samples.
    pub messages_sent: usize,
    /// Items stored afterwards: of the ids the samples' expectations say end
    /// stored ([`crate::events::stored_orders_through_queue`]), how many are
    /// the partition key of an item of a table of the template.
    pub items_stored: u64,
    /// Messages the flow added to the queue's redrive dead-letter queue (0
    /// without a redrive policy).
    pub dead_lettered: u64,
}

impl Summary {
    /// Messages sent through every queue.
    pub fn messages_sent(&self) -> usize {
        self.queues.iter().map(|q| q.messages_sent).sum()
    }

    /// Items stored by every queue's function.
    pub fn items_stored(&self) -> u64 {
        self.queues.iter().map(|q| q.items_stored).sum()
    }

    /// Messages dead-lettered from every queue.
    pub fn dead_lettered(&self) -> u64 {
        self.queues.iter().map(|q| q.dead_lettered).sum()
    }
}

/// Run the application from the function binaries in `build_dir`
/// (`<LogicalId>/bootstrap`, the layout of `sam build`), every server's and
/// function's output in `logs`, with the template's parameter defaults.
pub fn run(options: Options, build_dir: &Path, logs: &Path) -> Result<Summary, String> {
    run_with(options, &[], build_dir, logs)
}

/// [`run`] with `parameters` instead of the template's defaults (`sam deploy
/// --parameter-overrides`; e.g. [`crate::managed_instances::LOCAL_PARAMETERS`]
/// puts every function on Lambda Managed Instances), checked as
/// CloudFormation checks them, `Rules` included.
pub fn run_with(
    options: Options,
    parameters: &[(&str, &str)],
    build_dir: &Path,
    logs: &Path,
) -> Result<Summary, String> {
    process::stop_all_on_interrupt()?;
    let root = crate::workspace_root();
    let template = Template::load(&root.join("template.yaml"))?.with_parameters(parameters)?;
    template.check_rules()?;
    if !parameters.is_empty() {
        let given: Vec<String> = parameters.iter().map(|(k, v)| format!("{k}={v}")).collect();
        println!("Parameters: {}", given.join(" "));
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let stack = stack::start(&template, options, build_dir, logs, &runtime)?;
    let plan = plan::Plan::of(&template)?;
    let mut summary = Summary::default();
    let mut step = 0;
    queues::send_all(&stack, &plan, options, &runtime, &mut step, &mut summary)?;
    // What reports over stored items cover: everything the queues stored.
    let stored = usize::try_from(summary.items_stored()).unwrap_or(usize::MAX);
    invocations::invoke_all(&stack, &plan, stored, &mut step, &mut summary.failures)?;
    step += 1;
    invocations::fire_schedules(&stack, &template, &runtime, step, &mut summary.failures)?;
    executions::run_all(&stack, &plan, stored, &mut step, &mut summary.failures)?;
    print_cold_starts(&stack);
    if options.keep {
        keep::keep_running(&stack, &plan, &runtime)?;
    }
    if summary.failures.is_empty() {
        println!("\nAll sample events answered as expected; stopping everything.");
    }
    Ok(summary)
}

/// Each function's cold starts, and where the logs are.
fn print_cold_starts(stack: &Stack) {
    println!("\nCold starts (init duration under the emulator, one per environment):");
    for (name, pool) in &stack.functions {
        let starts: Vec<String> = pool
            .cold_starts()
            .iter()
            .map(|ms| ms.map_or_else(|| "not reported".to_owned(), |ms| format!("{ms:.1} ms")))
            .collect();
        println!("  {name}: {}", starts.join(", "));
    }
    println!("Logs: {}", relative(&stack.logs));
}

/// `path` relative to the workspace's root, where it is inside.
fn relative(path: &Path) -> String {
    let root = crate::workspace_root();
    path.strip_prefix(&root)
        .unwrap_or(path)
        .display()
        .to_string()
}

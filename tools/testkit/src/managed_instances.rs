//! Lambda Managed Instances on the local stack, as `cargo xtask run
//! --managed-instances` runs them: the template with its Managed Instances
//! parameters, a function's settings there, and what an environment's log
//! and processes show of the invocations it served at once.

use local_stack::managed_instances::{LOCAL_PARAMETERS, ManagedInstances};
use local_stack::template::{Function, Template};

/// `template.yaml` with every function on Lambda Managed Instances.
pub fn on_managed_instances() -> Template {
    crate::template()
        .with_parameters(&LOCAL_PARAMETERS)
        .unwrap_or_else(|e| panic!("{e}"))
}

/// The function `name` as `template` declares it, and its Managed Instances
/// settings.
pub fn managed(template: &Template, name: &str) -> (Function, ManagedInstances) {
    let function = template.function(name).unwrap_or_else(|e| panic!("{e}"));
    let managed = template
        .managed_instances(&function)
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|| panic!("{name} runs on demand with {LOCAL_PARAMETERS:?}"));
    (function, managed)
}

/// Its `PerExecutionEnvironmentMaxConcurrency`, as a count.
pub fn most_at_once(managed: ManagedInstances) -> usize {
    usize::try_from(managed.max_concurrency).expect("a small maximum")
}

/// The most invocations in flight at once in an emulator's log: each
/// `START RequestId:` line one more, each `REPORT RequestId:` line one fewer.
pub fn most_in_flight(logs: &str) -> usize {
    let (mut now, mut most) = (0usize, 0usize);
    for line in logs.lines() {
        if line.starts_with("START RequestId:") {
            now += 1;
            most = most.max(now);
        } else if line.starts_with("REPORT RequestId:") {
            now = now.saturating_sub(1);
        }
    }
    most
}

/// The runtime processes (the function's bootstrap) under the emulators `pids`.
pub fn runtimes(pids: &[u32]) -> Vec<u32> {
    pids.iter()
        .flat_map(|pid| local_stack::process::descendants(*pid))
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|cmdline| {
                cmdline.starts_with(local_stack::task_root::FUNCTION_BOOTSTRAP.as_bytes())
            })
        })
        .collect()
}

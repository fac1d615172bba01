//! What the shared crate does at every cold start, under the emulator, on the
//! local stack's test function (built on `shared` as every function is): the
//! init facts logged once, a bad setting ending the cold start with one line,
//! the CPU share of a memory size, and on demand a whole vCPU for init.

use e2e::{json_lines, start_fixture};

#[test]
fn cold_start_is_logged_once_with_the_init_facts() {
    let emulator = start_fixture(256, &[("WORKER_COUNT", "3")]);
    for _ in 0..3 {
        let answer = emulator.invoke("{}").expect("invoke");
        assert_eq!(answer.status, 200);
    }
    let logs = emulator.logs();
    let lines = json_lines(&logs);
    let init: Vec<_> = lines
        .iter()
        .filter(|l| l["message"] == "shared init done")
        .collect();
    assert_eq!(init.len(), 1, "{logs}");
    assert_eq!(init[0]["workers"], 3);
    assert_eq!(init[0]["decided_by"], "WORKER_COUNT");
    let marker: Vec<_> = lines
        .iter()
        .filter(|l| l["message"] == "cold start: first invocation")
        .collect();
    assert_eq!(marker.len(), 1, "{logs}");
    assert_eq!(marker[0]["span"]["cold_start"], true);
    assert!(marker[0]["init_ms"].as_f64().is_some(), "{logs}");
    let first = &marker[0]["span"]["request_id"];
    assert!(
        logs.contains(&format!(
            "START RequestId: {}",
            first.as_str().unwrap_or("?")
        )),
        "{logs}"
    );
    // Every line of the first invocation says cold_start=true, every later one false.
    let in_invocations: Vec<_> = lines
        .iter()
        .filter(|l| l["span"]["request_id"].is_string())
        .collect();
    let requests: std::collections::BTreeSet<_> = in_invocations
        .iter()
        .map(|l| l["span"]["request_id"].to_string())
        .collect();
    assert_eq!(requests.len(), 3, "{logs}");
    for line in in_invocations {
        assert_eq!(
            line["span"]["cold_start"] == true,
            line["span"]["request_id"] == *first,
            "{line}"
        );
    }
}

#[test]
fn a_bad_setting_ends_cold_start_with_one_clear_line() {
    for (setting, value) in [
        ("WORKER_COUNT", "0"),
        ("WORKER_COUNT", "many"),
        ("MEMORY_RETURN", "later"),
        ("AWS_LAMBDA_LOG_LEVEL", "LOUD"),
    ] {
        let emulator = start_fixture(256, &[(setting, value)]);
        let answer = emulator.invoke("{}").expect("invoke");
        let logs = emulator.logs();
        assert!(
            answer.body.contains("Runtime.ExitError") || answer.status >= 500,
            "{setting}={value} must fail the init: {} {}",
            answer.status,
            answer.body
        );
        let expected = format!("cold start failed: invalid {setting}={value:?}: ");
        let matching: Vec<_> = logs.lines().filter(|l| l.starts_with(&expected)).collect();
        assert_eq!(matching.len(), 1, "{setting}={value}:\n{logs}");
        assert!(!logs.contains("panicked"), "{logs}");
    }
}

#[test]
fn functions_detect_the_cpu_share_of_their_memory_size() {
    use local_stack::cgroup;
    if let Err(why) = cgroup::enforced() {
        eprintln!("skipped: limits are not enforced: {why}");
        return;
    }
    // (MemorySize, the share it buys, the workers of its pool). 885 MB is a
    // quota of 50,029 µs per 100,000; 2,048 MB is 1.16 CPUs of time, shown
    // as 2 vCPUs on Lambda, so 2 workers; 3,538 MB needs two cores (this
    // machine's count, so the quota is not capped).
    for (memory_mb, share, workers) in [
        (885, 0.5, 1),
        (1_769, 1.0, 1),
        (2_048, 2_048.0 / 1_769.0, 2),
        (3_538, 2.0, 2),
    ] {
        let init = init_line_at(memory_mb);
        assert_eq!(init["cgroup_quota"], workers, "{memory_mb} MB: {init}");
        assert_eq!(init["workers"], workers, "{memory_mb} MB: {init}");
        let detected = init["cpu_share"].as_f64().expect("cpu_share");
        assert!(
            (detected - share).abs() < 0.001,
            "{memory_mb} MB: {detected} vCPUs"
        );
    }
}

/// On demand, Lambda runs init on at least a whole vCPU and the invocations
/// at the memory's share: the cgroup gives init one vCPU and the share from
/// the runtime's first `/next` on, and the function still sizes itself by
/// the memory's share. Provisioned concurrency initialises at the share.
#[test]
fn on_demand_init_runs_on_a_whole_vcpu_and_invocations_at_the_share() {
    use local_stack::cgroup;
    if let Err(why) = cgroup::enforced() {
        eprintln!("skipped: limits are not enforced: {why}");
        return;
    }
    let memory_mb = 256;
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let share = cgroup::cpu_quota(u64::from(memory_mb), cores);
    assert!(share.quota_us < cgroup::PERIOD_US, "{share:?}");
    let (emulator, init) = init_line_with(memory_mb, &[]);
    assert_eq!(emulator.cpu_quota_us(), Some(share.quota_us), "after init");
    assert_eq!(init["cgroup_quota"], 1, "init's quota: {init}");
    let detected = init["cpu_share"].as_f64().expect("cpu_share");
    let memory_share = f64::from(memory_mb) / shared::vcpus::MB_PER_VCPU as f64;
    assert!((detected - memory_share).abs() < 0.001, "{detected} vCPUs");
    drop(emulator);
    // Before its first invocation, an environment has init's quota.
    let fresh = start_fixture(memory_mb, &[]);
    assert_eq!(fresh.cpu_quota_us(), Some(cgroup::init_quota(share)));
    drop(fresh);
    let provisioned = [(
        local_stack::emulator::INITIALIZATION_TYPE,
        "provisioned-concurrency",
    )];
    let (emulator, _) = init_line_with(memory_mb, &provisioned);
    assert_eq!(emulator.cpu_quota_us(), Some(share.quota_us), "provisioned");
}

/// The `shared init done` line of the test function started under the
/// emulator at `memory_mb` (its memory-size variable, cgroup quota and limit
/// follow from it).
fn init_line_at(memory_mb: u32) -> serde_json::Value {
    init_line_with(memory_mb, &[]).1
}

/// [`init_line_at`] with `extra_env`, and the environment, still running.
fn init_line_with(
    memory_mb: u32,
    env: &[(&str, &str)],
) -> (local_stack::emulator::Emulator, serde_json::Value) {
    let emulator = start_fixture(memory_mb, env);
    emulator.invoke("{}").expect("invoke");
    let logs = emulator.logs();
    let line = json_lines(&logs)
        .into_iter()
        .find(|l| l["message"] == "shared init done")
        .unwrap_or_else(|| panic!("no init line:\n{logs}"));
    (emulator, line)
}

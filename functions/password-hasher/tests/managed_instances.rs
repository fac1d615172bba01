//! The password hasher on Lambda Managed Instances on the local stack, as
//! `cargo xtask run --managed-instances` runs it: with the template's Managed
//! Instances parameters one execution environment (one emulator, one runtime
//! process, one cold start) serves up to `PerExecutionEnvironmentMaxConcurrency`
//! invocations at once. Invocations past the maximum wait for a free slot, the
//! vCPUs it detects follow its memory per vCPU, not the 1,769 MB rule of
//! on-demand Lambda, and requests interleaved at TRACE level leave no password
//! in the log.

use local_stack::cgroup;
use local_stack::managed_instances::ManagedInstances;
use local_stack::pool::{Options, Pool};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::time::Instant;
use testkit::managed_instances::{
    managed, most_at_once, most_in_flight, on_managed_instances, runtimes,
};
use testkit::{json_lines, managed_pool, send_at_once};

/// The function most tests run: it needs no AWS service.
const HASHER: &str = "password-hasher";
/// bcrypt's cost in the requests: each invocation takes long enough (hundreds
/// of milliseconds, four at once) for the others to arrive while it runs, and
/// for a worker of the runtime that is slow to poll `/next` again (its cgroup
/// throttled by the hashing) to be back before the others end. At cost 8
/// (tens of milliseconds alone) one worker came back 250 ms late beside
/// another test binary, and only 3 of 4 were ever in flight at once.
const COST: u32 = 10;

fn hash_event(n: usize) -> String {
    json!({
        "operation": "hash",
        "cost": COST,
        "passwords": [format!("password {n}"), format!("another {n}")],
    })
    .to_string()
}

/// `n` hash requests sent to `pool` at once, each answered with its two
/// hashes; the answers.
fn invoke_at_once(pool: &Pool, n: usize) -> Vec<Value> {
    send_at_once(
        pool,
        (0..n)
            .map(|n| (hash_event(n), Options::default()))
            .collect(),
    )
    .into_iter()
    .inspect(|body| {
        assert_eq!(body["hashes"].as_array().map(Vec::len), Some(2), "{body}");
    })
    .collect()
}

#[test]
fn one_environment_serves_its_maximum_at_once_and_the_rest_wait() {
    let template = on_managed_instances();
    let (function, managed) = managed(&template, HASHER);
    let most = most_at_once(managed);
    assert!(most >= 2, "{HASHER}: {managed}: nothing to serve at once");
    let pool = managed_pool(&template, HASHER, &[], None);
    // Two more than the maximum, all at once: the two wait for a slot.
    let sent = most + 2;
    let began = Instant::now();
    let answers = invoke_at_once(&pool, sent);
    eprintln!(
        "{sent} invocations of {HASHER} ({managed}, {} MB) answered in {:.2} s",
        function.memory_mb,
        began.elapsed().as_secs_f64()
    );
    // Every invocation's own line, which may land just after its answer.
    let logs = pool.logs_when(|logs| logs.matches("\"batch done\"").count() >= sent);

    // One environment: one emulator, one runtime process.
    assert_eq!(pool.started(), 1, "environments started");
    let emulators = pool.pids();
    assert_eq!(emulators.len(), 1, "{emulators:?}");
    let runtimes = runtimes(&emulators);
    assert_eq!(runtimes.len(), 1, "runtime processes: {runtimes:?}");

    // It served the maximum at once, never more.
    assert_eq!(
        most_in_flight(&logs),
        most,
        "invocations in flight:\n{logs}"
    );

    // One cold start, for one invocation; every invocation in the log.
    let lines = json_lines(&logs);
    let markers = lines
        .iter()
        .filter(|l| l["message"] == "cold start: first invocation")
        .count();
    assert_eq!(markers, 1, "{logs}");
    let requests = |cold: Option<bool>| -> BTreeSet<String> {
        lines
            .iter()
            .filter(|l| cold.is_none_or(|cold| l["span"]["cold_start"] == cold))
            .filter_map(|l| l["span"]["request_id"].as_str().map(str::to_owned))
            .collect()
    };
    assert_eq!(requests(Some(true)).len(), 1, "{logs}");
    assert_eq!(requests(None).len(), sent, "{logs}");
    let cold_starts = pool.cold_starts();
    assert!(
        matches!(cold_starts.as_slice(), [Some(ms)] if *ms > 0.0),
        "{cold_starts:?}"
    );

    // Its vCPUs: the memory over the memory per vCPU.
    for answer in &answers {
        assert_vcpus(&answer["detected_vcpus"], function.memory_mb, managed);
    }
}

#[test]
fn its_vcpus_follow_the_memory_per_vcpu_not_the_1769_mb_rule() {
    // 2,048 MB, Managed Instances' smallest size: one vCPU at 2 GiB per vCPU,
    // 1.16 by the on-demand rule. Told apart on any machine.
    let template = on_managed_instances();
    let (_, managed) = managed(&template, HASHER);
    let memory_mb = 1024 * managed.memory_gib_per_vcpu;
    let pool = managed_pool(&template, HASHER, &[], Some(memory_mb));
    let answer = &invoke_at_once(&pool, 1)[0];
    let vcpus = &answer["detected_vcpus"];
    assert_vcpus(vcpus, memory_mb, managed);
    if cgroup::enforced().is_ok() {
        let on_demand = f64::from(memory_mb) / shared::vcpus::MB_PER_VCPU as f64;
        assert_eq!(vcpus["share"].as_f64(), Some(1.0), "{vcpus}");
        assert!(on_demand > 1.1, "the 1,769 MB rule gives {on_demand}");
        assert_eq!(vcpus["workers"], 1, "{vcpus}");
    }
}

/// `vcpus` (a function's `detected_vcpus`) are those of an environment of
/// `memory_mb` on `managed`: the cgroup's quota is the memory over the
/// memory per vCPU (at most this machine's cores), and the memory size
/// decided nothing. Skipped, with one line, where limits are not enforced.
fn assert_vcpus(vcpus: &Value, memory_mb: u32, managed: ManagedInstances) {
    if let Err(why) = cgroup::enforced() {
        eprintln!("vCPU check skipped: limits are not enforced: {why}");
        return;
    }
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let quota = cgroup::function_quota(memory_mb, Some(managed), cores);
    let share = quota.quota_us as f64 / cgroup::PERIOD_US as f64;
    let detected = vcpus["share"].as_f64().unwrap_or(f64::NAN);
    assert!(
        (detected - share).abs() < 0.001,
        "{memory_mb} MB at {} GiB per vCPU: {share} vCPUs expected: {vcpus}",
        managed.memory_gib_per_vcpu
    );
    let whole = quota.quota_us.div_ceil(cgroup::PERIOD_US);
    assert_eq!(vcpus["cgroup_quota"], whole, "{vcpus}");
    assert_eq!(vcpus["workers"], whole.min(cores as u64), "{vcpus}");
    assert_eq!(vcpus["lambda_share"], Value::Null, "{vcpus}");
}

/// Passwords of requests in flight together, at TRACE level: no log line of
/// the one process serving them (its spans interleaved) holds any of them.
#[test]
fn interleaved_requests_leave_no_password_in_the_log() {
    let template = on_managed_instances();
    let (_, managed) = managed(&template, HASHER);
    let most = most_at_once(managed);
    let env = [("AWS_LAMBDA_LOG_LEVEL", "TRACE")];
    let pool = managed_pool(&template, HASHER, &env, None);
    invoke_at_once(&pool, most * 2);
    let logs = pool.logs();
    assert!(most_in_flight(&logs) >= 2, "nothing interleaved:\n{logs}");
    assert!(
        logs.contains("\"level\":\"TRACE\"") || logs.contains("TRACE"),
        "not at TRACE"
    );
    for n in 0..most * 2 {
        for secret in [format!("password {n}"), format!("another {n}")] {
            assert!(!logs.contains(&secret), "{secret:?} is in the log");
        }
    }
}

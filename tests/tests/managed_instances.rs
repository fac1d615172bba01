//! Lambda Managed Instances on the local stack, as `cargo xtask run
//! --managed-instances` runs them: with the template's Managed Instances
//! parameters one execution environment (one emulator, one runtime process,
//! one cold start) serves up to `PerExecutionEnvironmentMaxConcurrency`
//! invocations at once, invocations past them wait for a free slot, and the
//! vCPUs the function detects follow its memory per vCPU, not the 1,769 MB
//! rule of on-demand Lambda.

use e2e::{json_lines, managed_pool, template};
use local_stack::cgroup;
use local_stack::managed_instances::{LOCAL_PARAMETERS, ManagedInstances};
use local_stack::pool::Pool;
use local_stack::template::{Function, Template};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::time::Instant;

/// The function the tests run: it needs no AWS service.
const HASHER: &str = "password-hasher";
/// bcrypt's cost in the requests: each invocation takes long enough (tens of
/// milliseconds) for the others to arrive while it runs.
const COST: u32 = 8;

/// `template.yaml` with every function on Lambda Managed Instances.
fn on_managed_instances() -> Template {
    template()
        .with_parameters(&LOCAL_PARAMETERS)
        .unwrap_or_else(|e| panic!("{e}"))
}

/// The hasher as `template` declares it, and its Managed Instances settings.
fn hasher(template: &Template) -> (Function, ManagedInstances) {
    let function = template.function(HASHER).unwrap_or_else(|e| panic!("{e}"));
    let managed = template
        .managed_instances(&function)
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|| panic!("{HASHER} runs on demand with {LOCAL_PARAMETERS:?}"));
    (function, managed)
}

fn hash_event(n: usize) -> String {
    json!({
        "operation": "hash",
        "cost": COST,
        "passwords": [format!("password {n}"), format!("another {n}")],
    })
    .to_string()
}

/// `n` hash requests sent to `pool` at once (released together by a
/// barrier), each answered with its two hashes; the answers.
fn invoke_at_once(pool: &Pool, n: usize) -> Vec<Value> {
    let start = std::sync::Barrier::new(n);
    std::thread::scope(|s| {
        let calls: Vec<_> = (0..n)
            .map(|i| {
                let start = &start;
                s.spawn(move || {
                    start.wait();
                    pool.invoke(hash_event(i))
                })
            })
            .collect();
        calls
            .into_iter()
            .map(|call| {
                let answer = call
                    .join()
                    .expect("thread")
                    .unwrap_or_else(|e| panic!("{e}\n{}", pool.logs()));
                assert_eq!(answer.status, 200, "{}", answer.body);
                let body = answer.json().expect("JSON");
                assert_eq!(body["hashes"].as_array().map(Vec::len), Some(2), "{body}");
                body
            })
            .collect()
    })
}

/// The most invocations in flight at once in an emulator's log: each
/// `START RequestId:` line one more, each `REPORT RequestId:` line one fewer.
fn most_in_flight(logs: &str) -> usize {
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

/// The runtime processes (`/var/task/bootstrap`) under the emulators `pids`.
fn runtimes(pids: &[u32]) -> Vec<u32> {
    pids.iter()
        .flat_map(|pid| local_stack::process::descendants(*pid))
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|cmdline| cmdline.starts_with(b"/var/task/bootstrap"))
        })
        .collect()
}

#[test]
fn one_environment_serves_its_maximum_at_once_and_the_rest_wait() {
    let template = on_managed_instances();
    let (function, managed) = hasher(&template);
    let most = usize::try_from(managed.max_concurrency).expect("a small maximum");
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
    let logs = pool.logs();

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
    let (_, managed) = hasher(&template);
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

/// Valid orders sent, and how many of them are sent a second time.
const ORDERS: u64 = 240;
const SENT_TWICE: u64 = 60;

/// The order path on one Managed Instances environment: ElasticMQ, the local
/// event source mapping with as many pollers as the environment takes
/// invocations at once (16 here, `OrderMaxConcurrency` allowing), DynamoDB
/// Local. Batches of 10 arrive together, and a quarter of the orders come
/// twice, so duplicates meet in batches in flight at the same time: every
/// order ends stored exactly once, nothing is dead-lettered or delivered
/// again, and one runtime process served it all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_batches_in_one_environment_store_every_order_once() {
    let template = on_managed_instances()
        .with_parameters(&[("OrderMaxConcurrency", "16")])
        .unwrap_or_else(|e| panic!("{e}"));
    let source = e2e::order_source(&template);
    // A visibility timeout no batch reaches on a loaded machine: 16 batches
    // share one vCPU here (the template's is 180 s).
    let (dynamodb, queues) = e2e::servers(&template, None, 60).await;
    let (orders, dead_letters, _) = queues.with_dead_letters(&source);
    let mut bodies: Vec<String> = (0..ORDERS).map(testkit::orders::body).collect();
    bodies.extend((0..SENT_TWICE).map(|n| testkit::orders::body(n * 4)));
    // Each duplicate far from its twin: they land in different batches.
    let mixed: Vec<String> = (0..bodies.len())
        .map(|i| bodies[i * 7 % bodies.len()].clone())
        .collect();
    queues.send_all(orders, &mixed).await;

    let env = e2e::servers_env(&dynamodb, &queues);
    let pool = managed_pool(&template, "order-processor", &env, None);
    let pollers = local_stack::event_source::pollers(&source, pool.capacity());
    assert!(pollers >= 8, "{pollers} pollers");
    let invoke = |event: &str| pool.invoke(event);
    let deadline = Instant::now() + std::time::Duration::from_secs(300);
    let totals = tokio::task::block_in_place(|| {
        local_stack::event_source::drain_concurrently(
            &queues.server.endpoint(),
            orders,
            &source,
            pollers,
            deadline,
            &invoke,
        )
    })
    .unwrap_or_else(|e| panic!("{e}\n{}", pool.logs()));
    eprintln!("{pollers} pollers, one environment: {totals:?}");

    e2e::assert_reconciled(
        &dynamodb.server.client(),
        &queues,
        orders,
        dead_letters,
        0..ORDERS,
        &[],
    )
    .await;
    assert_eq!(totals.deleted, bodies.len());
    assert_eq!(totals.returned, 0, "nothing delivered again");
    assert_eq!(totals.whole_batch_failures, 0);
    let logs = pool.logs();
    assert!(
        most_in_flight(&logs) >= 8,
        "at most {} batches in flight at once",
        most_in_flight(&logs)
    );
    assert_eq!(runtimes(&pool.pids()).len(), 1, "one runtime process");
}

/// Passwords of requests in flight together, at TRACE level: no log line of
/// the one process serving them (its spans interleaved) holds any of them.
#[test]
fn interleaved_requests_leave_no_password_in_the_log() {
    let template = on_managed_instances();
    let (_, managed) = hasher(&template);
    let most = usize::try_from(managed.max_concurrency).expect("a small maximum");
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

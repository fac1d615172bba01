//! Lambda Managed Instances on the local stack, as `cargo xtask run
//! --managed-instances` runs them: with the template's Managed Instances
//! parameters one execution environment (one emulator, one runtime process,
//! one cold start) serves up to `PerExecutionEnvironmentMaxConcurrency`
//! invocations at once.
//!
//! - the password hasher: invocations past the maximum wait for a free slot
//!   (`one_environment_serves_its_maximum_at_once_and_the_rest_wait`), the
//!   vCPUs it detects follow its memory per vCPU, not the 1,769 MB rule of
//!   on-demand Lambda (`its_vcpus_follow_the_memory_per_vcpu_not_the_1769_mb_rule`),
//!   and requests interleaved at TRACE level leave no password in the log
//!   (`interleaved_requests_leave_no_password_in_the_log`);
//! - the order processor, 16 batches at once with duplicates among them:
//!   every order stored once (`concurrent_batches_in_one_environment_store_every_order_once`),
//!   also while a loopback proxy answers DynamoDB with bursts of throttling
//!   errors (`throttling_bursts_under_concurrent_batches_store_every_order_once`);
//! - the Arrow worker, rounds of more aggregations over 15,000 orders at once
//!   than it serves: each answered correctly or refused `Busy` by its row
//!   budget, none out of memory, the environment's peak below its limit
//!   (`concurrent_large_aggregations_stay_within_the_environments_memory`,
//!   skipped where limits are not enforced).

use e2e::throttling_proxy::{BURST_EVERY, BURST_LENGTH, ThrottlingProxy};
use e2e::{assert_pool_within_memory_limit, json_lines, managed_pool, send_at_once, template};
use local_stack::cgroup;
use local_stack::emulator::OUT_OF_MEMORY;
use local_stack::event_source::Totals;
use local_stack::managed_instances::{LOCAL_PARAMETERS, ManagedInstances};
use local_stack::pool::{Options, Pool};
use local_stack::template::{Function, Template};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::time::Instant;

/// The function most tests run: it needs no AWS service.
const HASHER: &str = "password-hasher";
/// bcrypt's cost in the requests: each invocation takes long enough (hundreds
/// of milliseconds, four at once) for the others to arrive while it runs, and
/// for a worker of the runtime that is slow to poll `/next` again (its cgroup
/// throttled by the hashing) to be back before the others end. At cost 8
/// (tens of milliseconds alone) one worker came back 250 ms late beside
/// another test binary, and only 3 of 4 were ever in flight at once.
const COST: u32 = 10;

/// `template.yaml` with every function on Lambda Managed Instances.
fn on_managed_instances() -> Template {
    template()
        .with_parameters(&LOCAL_PARAMETERS)
        .unwrap_or_else(|e| panic!("{e}"))
}

/// The function `name` as `template` declares it, and its Managed Instances
/// settings.
fn managed(template: &Template, name: &str) -> (Function, ManagedInstances) {
    let function = template.function(name).unwrap_or_else(|e| panic!("{e}"));
    let managed = template
        .managed_instances(&function)
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|| panic!("{name} runs on demand with {LOCAL_PARAMETERS:?}"));
    (function, managed)
}

/// Its `PerExecutionEnvironmentMaxConcurrency`, as a count.
fn most_at_once(managed: ManagedInstances) -> usize {
    usize::try_from(managed.max_concurrency).expect("a small maximum")
}

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

/// The runtime processes (the function's bootstrap) under the emulators `pids`.
fn runtimes(pids: &[u32]) -> Vec<u32> {
    pids.iter()
        .flat_map(|pid| local_stack::process::descendants(*pid))
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|cmdline| {
                cmdline.starts_with(local_stack::task_root::FUNCTION_BOOTSTRAP.as_bytes())
            })
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

/// Valid orders sent, and how many of them are sent a second time.
const ORDERS: u64 = 240;
const SENT_TWICE: u64 = 60;
/// `OrderMaxConcurrency` here: the mapping's pollers, as many as the order
/// processor's environment serves at once (its
/// `PerExecutionEnvironmentMaxConcurrency`).
const ORDER_POLLERS: &str = "16";

/// The order path on one Managed Instances environment: ElasticMQ, the local
/// event source mapping with as many pollers as the environment takes
/// invocations at once (16 here, `OrderMaxConcurrency` allowing), DynamoDB
/// Local. Batches of 10 arrive together, and a quarter of the orders come
/// twice, so duplicates meet in batches in flight at the same time: every
/// order ends stored exactly once, nothing is dead-lettered or delivered
/// again, and one runtime process served it all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_batches_in_one_environment_store_every_order_once() {
    let template = with_order_pollers();
    let source = e2e::order_source(&template);
    let (dynamodb, queues) = e2e::servers(&template, None, VISIBILITY_S).await;
    let (orders, dead_letters, _) = queues.with_dead_letters(&source);
    let bodies = orders_twice_in_flight(&[]);
    queues.send_all(orders, &bodies).await;

    let env = e2e::servers_env(&dynamodb, &queues);
    let (totals, pool) = drain_in_one_environment(&template, &queues, &env);
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
    assert_served_at_once_by_one_process(&pool);
}

/// The same orders, with invalid bodies among them, while a proxy answers
/// DynamoDB `PutItem`s with throttling errors in bursts ([`BURST_LENGTH`] of
/// every [`BURST_EVERY`] requests), each order at most one attempt fewer than
/// the handler makes per delivery.
/// The 16 batches in flight share the environment's write budget and retry
/// in it: every order stored exactly once, exactly the invalid bodies
/// dead-lettered, nothing delivered again, the throttles answered, and
/// still 8 batches or more in flight at once in one runtime process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn throttling_bursts_under_concurrent_batches_store_every_order_once() {
    let template = with_order_pollers();
    let source = e2e::order_source(&template);
    let (dynamodb, queues) = e2e::servers(&template, None, VISIBILITY_S).await;
    let attempts = order_processor::retry::Backoff::default().max_attempts as usize;
    let per_order = attempts - 1;
    let proxy = ThrottlingProxy::start(dynamodb.server.port(), per_order);
    let (orders, dead_letters, _) = queues.with_dead_letters(&source);
    let invalid = e2e::invalid_bodies(1);
    let bodies = orders_twice_in_flight(&invalid);
    queues.send_all(orders, &bodies).await;

    let mut env = proxy.env();
    env.extend(queues.env());
    let (totals, pool) = drain_in_one_environment(&template, &queues, &env);
    let stats = proxy.stats();
    eprintln!(
        "throttling bursts ({BURST_LENGTH} of every {BURST_EVERY} requests, at most \
         {per_order} per order): {} ProvisionedThroughputExceededException, {} \
         ThrottlingException, {} requests forwarded",
        stats.provisioned(),
        stats.throttling(),
        stats.forwarded()
    );
    e2e::assert_reconciled(
        &dynamodb.server.client(),
        &queues,
        orders,
        dead_letters,
        0..ORDERS,
        &invalid,
    )
    .await;
    assert!(stats.throttled() > 0, "no request was throttled");
    assert_eq!(totals.deleted, bodies.len());
    assert_eq!(
        totals.returned, 0,
        "every throttle retried within its delivery"
    );
    assert_eq!(totals.whole_batch_failures, 0);
    assert_served_at_once_by_one_process(&pool);
}

/// The local visibility timeout: one no batch reaches on a loaded machine
/// (16 batches share one vCPU here; the template's is 180 s).
const VISIBILITY_S: u32 = 60;

/// [`on_managed_instances`] with [`ORDER_POLLERS`] as `OrderMaxConcurrency`.
fn with_order_pollers() -> Template {
    on_managed_instances()
        .with_parameters(&[("OrderMaxConcurrency", ORDER_POLLERS)])
        .unwrap_or_else(|e| panic!("{e}"))
}

/// [`ORDERS`] sample orders, the first [`SENT_TWICE`] multiples of 4 a second
/// time and `invalid` among them, in a fixed shuffle that puts each
/// duplicate far from its twin: they land in different batches.
fn orders_twice_in_flight(invalid: &[String]) -> Vec<String> {
    let bodies: Vec<String> = (0..ORDERS)
        .chain((0..SENT_TWICE).map(|n| n * 4))
        .map(order_processor_testkit::orders::body)
        .collect();
    let all = bodies.len() + invalid.len();
    e2e::mixed(bodies, invalid, all)
}

/// Drain the order queue of `template` (its queues in `queues`) through one
/// Managed Instances environment of the order processor, with `env` on top
/// of the template's, by as many pollers as it takes invocations at once (at
/// least 8): what the mapping counted, and the environment.
fn drain_in_one_environment(
    template: &Template,
    queues: &e2e::LocalQueues,
    env: &[(&str, &str)],
) -> (Totals, Pool) {
    let source = e2e::order_source(template);
    let (orders, _, _) = queues.with_dead_letters(&source);
    let pool = managed_pool(template, "order-processor", env, None);
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
    (totals, pool)
}

/// `pool` served 8 batches or more at once, all in one runtime process.
fn assert_served_at_once_by_one_process(pool: &Pool) {
    let most = most_in_flight(&pool.logs());
    assert!(most >= 8, "at most {most} batches in flight at once");
    assert_eq!(runtimes(&pool.pids()).len(), 1, "one runtime process");
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

/// The Arrow worker, and the orders it aggregates in DynamoDB Local, their
/// customers each a group of every answer. Fewer orders than `memory_limit`'s
/// 40,000: each aggregation scans them all, and DynamoDB Local's scans set
/// this test's time.
const ARROW: &str = "arrow-worker";
const ARROW_ORDERS: u64 = 15_000;
const ARROW_CUSTOMERS: u64 = 5_000;
/// Rounds of more aggregations at once than the environment serves.
const ROUNDS: usize = 2;

/// The Arrow worker on one Managed Instances environment (the template's
/// memory size and concurrency), [`ARROW_ORDERS`] orders in DynamoDB Local:
/// rounds of two more aggregations by customer at once than the environment
/// serves, each over every order. Each answer is the one a request alone
/// gets, or `Busy` (the environment's row budget, `MAX_ROWS`, refuses what
/// it cannot hold instead of allocating it); at least one is answered; no
/// invocation ends out of memory, the environment is never replaced, and its
/// cgroup's peak stays below its memory limit. Skipped where limits are not
/// enforced.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_large_aggregations_stay_within_the_environments_memory() {
    if !e2e::limits_enforced() {
        return;
    }
    let began = Instant::now();
    let template = on_managed_instances();
    let (function, managed) = managed(&template, ARROW);
    let dynamodb = e2e::LocalDynamoDb::start().await;
    e2e::write_orders(&dynamodb, ARROW_ORDERS, ARROW_CUSTOMERS).await;
    let pool = managed_pool(&template, ARROW, &dynamodb.env(), None);
    let alone = aggregated_alone(&pool);
    let at_once = most_at_once(managed) + 2;
    let answers: Vec<Value> = (0..ROUNDS)
        .flat_map(|_| send_at_once(&pool, vec![(aggregation(), Options::default()); at_once]))
        .collect();
    let busy = busy_or_equal(&answers, &alone);
    eprintln!(
        "{ROUNDS} rounds of {at_once} aggregations of {ARROW_ORDERS} orders at once on \
         {ARROW} ({managed}, {} MB): {} answered, {busy} Busy; {:.1} s in all",
        function.memory_mb,
        answers.len() - busy,
        began.elapsed().as_secs_f64()
    );
    assert!(busy < answers.len(), "every request was refused Busy");
    let logs = pool.logs();
    assert!(!logs.contains(OUT_OF_MEMORY), "out of memory:\n{logs}");
    assert_eq!(pool.started(), 1, "one environment, never replaced");
    assert_pool_within_memory_limit(&pool, &format!("{ARROW} on Managed Instances"));
}

/// One aggregation by customer over every order, every group in the answer.
fn aggregation() -> String {
    json!({
        "operation": "aggregate",
        "query": { "group_by": "customer", "limit": arrow_worker::query::MAX_LIMIT },
    })
    .to_string()
}

/// The answer of [`aggregation`] alone in `pool`, checked against the orders
/// written, without how its invocation went (`run`).
fn aggregated_alone(pool: &Pool) -> Value {
    let answer = send_at_once(pool, vec![(aggregation(), Options::default())]).remove(0);
    let groups = answer["groups"].as_array().map(Vec::len);
    assert!(
        answer["rows"]["scanned"] == ARROW_ORDERS
            && groups == Some(ARROW_CUSTOMERS as usize)
            && answer["groups_total"] == ARROW_CUSTOMERS,
        "not an aggregate of {ARROW_ORDERS} orders by {ARROW_CUSTOMERS} customers: {}",
        summary(&answer)
    );
    without_run(answer)
}

/// How many of `answers` are `Busy`; each of the others must be `alone`.
fn busy_or_equal(answers: &[Value], alone: &Value) -> usize {
    let busy = answers.iter().filter(|a| a["errorType"] == "Busy").count();
    for answer in answers.iter().filter(|a| a["errorType"] != "Busy") {
        assert!(
            without_run(answer.clone()) == *alone,
            "neither the answer alone nor Busy: {}",
            summary(answer)
        );
    }
    busy
}

/// `answer` without `run` (timings and pages: one invocation's own).
fn without_run(mut answer: Value) -> Value {
    if let Some(fields) = answer.as_object_mut() {
        fields.remove("run");
    }
    answer
}

/// An answer in a line: its error, or its counts.
fn summary(answer: &Value) -> String {
    match answer.get("errorType") {
        Some(kind) => format!("{kind}: {}", answer["errorMessage"]),
        None => format!(
            "rows {}, {} groups of {}",
            answer["rows"],
            answer["groups"].as_array().map_or(0, Vec::len),
            answer["groups_total"]
        ),
    }
}

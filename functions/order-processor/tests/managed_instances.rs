//! The order processor on Lambda Managed Instances on the local stack, as
//! `cargo xtask run --managed-instances` runs it: 16 batches at once in one
//! environment with duplicates among them, every order stored once, also
//! while a loopback proxy answers DynamoDB with bursts of throttling errors.

mod support;

use local_stack::event_source::Totals;
use local_stack::pool::Pool;
use local_stack::template::Template;
use std::time::Instant;
use support::managed_pool;
use support::throttling_proxy::{BURST_EVERY, BURST_LENGTH, ThrottlingProxy};
use testkit::managed_instances::{most_in_flight, on_managed_instances, runtimes};

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
    let source = support::order_source(&template);
    let (dynamodb, queues) = support::servers(&template, None, VISIBILITY_S).await;
    let (orders, dead_letters, _) = queues.with_dead_letters(&source);
    let bodies = orders_twice_in_flight(&[]);
    queues.send_all(orders, &bodies).await;

    let env = support::servers_env(&dynamodb, &queues);
    let (totals, pool) = drain_in_one_environment(&template, &queues, &env);
    support::assert_reconciled(
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
    let source = support::order_source(&template);
    let (dynamodb, queues) = support::servers(&template, None, VISIBILITY_S).await;
    let attempts = order_processor::retry::Backoff::default().max_attempts as usize;
    let per_order = attempts - 1;
    let proxy = ThrottlingProxy::start(dynamodb.server.port(), per_order);
    let (orders, dead_letters, _) = queues.with_dead_letters(&source);
    let invalid = support::invalid_bodies(1);
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
    support::assert_reconciled(
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
    support::mixed(bodies, invalid, all)
}

/// Drain the order queue of `template` (its queues in `queues`) through one
/// Managed Instances environment of the order processor, with `env` on top
/// of the template's, by as many pollers as it takes invocations at once (at
/// least 8): what the mapping counted, and the environment.
fn drain_in_one_environment(
    template: &Template,
    queues: &support::LocalQueues,
    env: &[(&str, &str)],
) -> (Totals, Pool) {
    let source = support::order_source(template);
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

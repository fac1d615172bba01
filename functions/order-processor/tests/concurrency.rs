//! Several SQS pollers feed the order processor side by side on the local
//! stack, as Lambda's event source mapping scales its pollers: one execution
//! environment per invocation in flight, every order stored once.

mod support;

use local_stack::event_source::drain_concurrently;
use local_stack::pool::{Overflow, Size};
use std::time::{Duration, Instant};
use support::{assert_reconciled, order_source, servers, servers_env, template};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_pollers_feed_the_order_processor_side_by_side() {
    const ORDERS: u64 = 120;
    let template = template();
    let source = order_source(&template);
    let (dynamodb, queues) = servers(&template, None, 30).await;
    let (orders, dead_letters, _) = queues.with_dead_letters(&source);
    let bodies: Vec<String> = (0..ORDERS)
        .map(order_processor_testkit::orders::body)
        .collect();
    queues.send_all(orders, &bodies).await;
    let pool = support::pool(
        &template,
        "order-processor",
        &servers_env(&dynamodb, &queues),
        Size {
            environments: 3,
            overflow: Overflow::Wait,
        },
    );
    let endpoint = queues.server.endpoint();
    let totals = tokio::task::block_in_place(|| {
        drain_concurrently(
            &endpoint,
            orders,
            &source,
            3,
            Instant::now() + Duration::from_secs(300),
            &|event| pool.invoke(event),
        )
    })
    .unwrap_or_else(|e| panic!("{e}\n{}", pool.logs()));
    eprintln!(
        "3 pollers: {totals:?}; {} environments started",
        pool.started()
    );
    assert_reconciled(
        &dynamodb.server.client(),
        &queues,
        orders,
        dead_letters,
        0..ORDERS,
        &[],
    )
    .await;
    assert_eq!(totals.deleted, bodies.len());
    assert_eq!(totals.whole_batch_failures, 0);
    // The pollers' batches were in flight together: more than one environment.
    assert!(pool.started() >= 2, "{} environment(s)", pool.started());
}

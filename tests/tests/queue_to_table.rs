//! The whole order path with real pieces: messages in ElasticMQ, the local
//! event source mapping, the order-processor binary under the runtime
//! interface emulator, DynamoDB Local. Every queue, table, batch size and
//! redrive policy comes from `template.yaml`.

use e2e::{assert_reconciled, invalid_bodies, order_source, servers, start, template};
use local_stack::event_source::EventSource;
use std::time::{Duration, Instant};

const VALID: u64 = 450;
const DUPLICATES: u64 = 20;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_hundred_orders_end_with_the_valid_ones_stored_and_the_invalid_dead_lettered() {
    let source = order_source(&template());
    let (dynamodb, queues) = servers(None, 2).await;
    let (orders, dead_letters, receives) = queues.with_dead_letters(&source);

    let invalid = invalid_bodies(5);
    let mut bodies: Vec<String> = (0..VALID).map(testkit::orders::body).collect();
    bodies.extend((0..DUPLICATES).map(|n| testkit::orders::body(n * 7)));
    bodies.extend(invalid.iter().cloned());
    assert_eq!(bodies.len(), 500);
    // A fixed shuffle (7 is coprime to 500) so that batches mix valid,
    // duplicate and invalid orders.
    let mixed: Vec<String> = (0..bodies.len())
        .map(|i| bodies[i * 7 % bodies.len()].clone())
        .collect();
    queues.send_all(orders, &mixed).await;

    let emulator = start("order-processor", &dynamodb.env());
    let mapping = EventSource::new(&queues.client, orders, &source);
    let totals = mapping
        .drain(Instant::now() + Duration::from_secs(300), &|event| {
            emulator.invoke(event)
        })
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", emulator.logs()));
    eprintln!("local event source mapping: {totals:?}");

    // Exactly the valid orders, each once, with the content that was sent;
    // exactly the invalid messages in the dead-letter queue, each once.
    assert_reconciled(
        &dynamodb.server.client(),
        &queues,
        orders,
        dead_letters,
        0..VALID,
        &invalid,
    )
    .await;
    // Every valid or duplicate message was deleted after its first delivery;
    // each invalid one was delivered maxReceiveCount times, never deleted.
    let receives = receives as u64;
    assert_eq!(totals.deleted as u64, VALID + DUPLICATES);
    assert_eq!(totals.returned as u64, invalid.len() as u64 * receives);
    assert_eq!(totals.whole_batch_failures, 0);
    assert!(
        totals.invocations as u64 >= (VALID + DUPLICATES) / u64::from(source.batch_size),
        "{totals:?}"
    );
}

//! The whole order path with real pieces: messages in ElasticMQ, the local
//! event source mapping, the order-processor binary under the runtime
//! interface emulator, DynamoDB Local. Every queue, table, batch size and
//! redrive policy comes from `template.yaml`.

use e2e::{LocalDynamoDb, LocalQueues, expected_hashes, invalid_bodies, start, stored_hashes};
use local_stack::elasticmq::{depth, send, take_all};
use local_stack::event_source::EventSource;
use local_stack::template::Template;
use std::time::{Duration, Instant};

const VALID: u64 = 450;
const DUPLICATES: u64 = 20;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_hundred_orders_end_with_the_valid_ones_stored_and_the_invalid_dead_lettered() {
    let template =
        Template::load(&e2e::workspace_root().join("template.yaml")).expect("template.yaml");
    let source = template
        .sqs_sources()
        .expect("SQS events")
        .into_iter()
        .find(|s| s.function == "order-processor")
        .expect("the order processor has an SQS event");
    let dynamodb = LocalDynamoDb::start().await;
    let queues = LocalQueues::start(2).await;
    let orders = queues.queue(&source.queue);
    let redrive = orders.spec.redrive.clone().expect("a redrive policy");
    let dead_letters = queues.queue(&redrive.dead_letter_queue);

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
    send(&queues.client, orders, &mixed, "orders")
        .await
        .expect("send");

    let emulator = start("order-processor", &dynamodb.env());
    let mapping = EventSource::new(&queues.client, orders, &source);
    let totals = mapping
        .drain(Instant::now() + Duration::from_secs(300), &|event| {
            emulator.invoke(event)
        })
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", emulator.logs()));
    eprintln!("local event source mapping: {totals:?}");

    // Exactly the valid orders, each once, with the content that was sent.
    let stored = stored_hashes(&dynamodb.server.client(), "OrdersTable").await;
    assert_eq!(stored, expected_hashes(0..VALID));
    // Exactly the invalid messages in the dead-letter queue, each once.
    let mut dead = take_all(&queues.client, &dead_letters.url)
        .await
        .expect("dead letters");
    let mut expected_dead = invalid.clone();
    dead.sort();
    expected_dead.sort();
    assert!(
        dead == expected_dead,
        "dead-letter queue: {} messages",
        dead.len()
    );
    assert_eq!(depth(&queues.client, &orders.url).await.expect("depth"), 0);
    // Every valid or duplicate message was deleted after its first delivery;
    // each invalid one was delivered maxReceiveCount times, never deleted.
    let receives = u64::from(redrive.max_receive_count);
    assert_eq!(totals.deleted as u64, VALID + DUPLICATES);
    assert_eq!(totals.returned as u64, invalid.len() as u64 * receives);
    assert_eq!(totals.whole_batch_failures, 0);
    assert!(
        totals.invocations as u64 >= (VALID + DUPLICATES) / u64::from(source.batch_size),
        "{totals:?}"
    );
}

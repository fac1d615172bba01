//! The whole order path with real pieces: messages in ElasticMQ, the local
//! event source mapping, the order-processor binary under the runtime
//! interface emulator, DynamoDB Local. Every queue, table, batch size and
//! redrive policy comes from `template.yaml`, on a standard queue and, with
//! the `OrdersQueueFifo` parameter, on a FIFO queue.

mod support;

use local_stack::elasticmq::{LocalQueue, send, take_all};
use local_stack::event_source::EventSource;
use order_processor::dead_letter::attr;
use std::time::{Duration, Instant};
use support::{
    LocalQueues, assert_reconciled, expected_hashes, invalid_bodies, json_lines, order_source,
    servers, servers_env, start, start_from, stored_hashes, template,
};

const VALID: u64 = 450;
const DUPLICATES: u64 = 20;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_hundred_orders_end_with_the_valid_ones_stored_and_the_invalid_dead_lettered() {
    let template = template();
    let source = order_source(&template);
    let (dynamodb, queues) = servers(&template, None, 2).await;
    let (orders, dead_letters, _) = queues.with_dead_letters(&source);

    let invalid = invalid_bodies(5);
    let mut bodies: Vec<String> = (0..VALID)
        .map(order_processor_testkit::orders::body)
        .collect();
    bodies.extend((0..DUPLICATES).map(|n| order_processor_testkit::orders::body(n * 7)));
    bodies.extend(invalid.iter().cloned());
    assert_eq!(bodies.len(), 500);
    // A fixed shuffle (7 is coprime to 500) so that batches mix valid,
    // duplicate and invalid orders.
    let mixed: Vec<String> = (0..bodies.len())
        .map(|i| bodies[i * 7 % bodies.len()].clone())
        .collect();
    queues.send_all(orders, &mixed).await;

    let emulator = start("order-processor", &servers_env(&dynamodb, &queues));
    let mapping = EventSource::new(&queues.client, orders, &source);
    let totals = mapping
        .drain(Instant::now() + Duration::from_secs(300), &|event| {
            emulator.invoke(event)
        })
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", emulator.logs()));
    eprintln!("local event source mapping: {totals:?}");

    // Exactly the valid orders, each once, with the content that was sent;
    // exactly the invalid messages in the dead-letter queue, each once, with
    // its reason.
    assert_reconciled(
        &dynamodb.server.client(),
        &queues,
        orders,
        dead_letters,
        0..VALID,
        &invalid,
    )
    .await;
    // Every message was deleted after its first delivery: the invalid ones
    // were moved to the dead-letter queue by the function, not by
    // maxReceiveCount deliveries.
    assert_eq!(totals.deleted, bodies.len());
    assert_eq!(totals.delivered, bodies.len());
    assert_eq!(totals.returned, 0);
    assert_eq!(totals.whole_batch_failures, 0);
    assert!(
        totals.invocations as u64 >= (VALID + DUPLICATES) / u64::from(source.batch_size),
        "{totals:?}"
    );
}

/// On a FIFO queue, group A is [valid, poison, valid, valid] and group B,
/// interleaved, is all valid. The poison message goes alone to the
/// dead-letter queue, with its reason and its group; every valid order is
/// stored, each group's in the order sent, and nothing is delivered twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fifo_poison_message_goes_alone_to_the_dead_letter_queue_and_its_group_keeps_order() {
    let template = template()
        .with_parameters(&[("OrdersQueueFifo", "true")])
        .expect("FIFO parameters");
    template.check_rules().expect("the template's rules hold");
    let source = order_source(&template);
    let (dynamodb, queues) = servers(&template, None, 2).await;
    let (orders, dead_letters, _) = queues.with_dead_letters(&source);
    assert!(orders.spec.fifo && dead_letters.spec.fifo);

    let poison = poison();
    let valid = |n: u64| order_processor_testkit::orders::body(n);
    let sent = [
        ("A", valid(1)),
        ("B", valid(11)),
        ("A", poison.clone()),
        ("B", valid(12)),
        ("A", valid(3)),
        ("B", valid(13)),
        ("A", valid(4)),
        ("B", valid(14)),
    ];
    for (group, body) in &sent {
        send(&queues.client, orders, std::slice::from_ref(body), group)
            .await
            .expect("send");
    }

    let mut env = servers_env(&dynamodb, &queues);
    // The "order stored" lines, in processing order.
    env.push(("AWS_LAMBDA_LOG_LEVEL", "DEBUG"));
    let emulator = start_from(&template, "order-processor", &env);
    let totals = EventSource::new(&queues.client, orders, &source)
        .drain(Instant::now() + Duration::from_secs(120), &|event| {
            emulator.invoke(event)
        })
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", emulator.logs()));
    eprintln!("local event source mapping (FIFO): {totals:?}");

    // Each message delivered once, none returned.
    assert_eq!(totals.delivered, sent.len(), "{totals:?}");
    assert_eq!(totals.deleted, sent.len(), "{totals:?}");
    assert_eq!(totals.whole_batch_failures, 0, "{totals:?}");

    assert_only_the_poison_is_dead_lettered(&queues, dead_letters, &poison).await;

    let stored = stored_hashes(&dynamodb.server.client(), "OrdersTable").await;
    let mut expected = expected_hashes(1..2);
    for n in [3, 4, 11, 12, 13, 14] {
        expected.extend(expected_hashes(n..n + 1));
    }
    assert_eq!(stored, expected);

    // Each group's orders were stored in the order they were sent.
    assert_each_group_stored_in_order(&emulator.logs());
}

/// A sample order whose total does not match its items: valid JSON, invalid order.
fn poison() -> String {
    let mut order: serde_json::Value =
        serde_json::from_str(&order_processor_testkit::orders::body(2)).expect("sample");
    order["total_cents"] = 1.into();
    order.to_string()
}

/// The dead-letter queue holds `poison` alone (taken out), with its failure's
/// class and reason, its source message id and its group (A).
async fn assert_only_the_poison_is_dead_lettered(
    queues: &LocalQueues,
    dead_letters: &LocalQueue,
    poison: &str,
) {
    let letters = take_all(&queues.client, &dead_letters.url)
        .await
        .expect("dead letters");
    let [letter] = letters.as_slice() else {
        panic!("only the poison message is dead-lettered: {letters:?}");
    };
    assert_eq!(letter.body(), Some(poison));
    let attribute = |name: &str| {
        letter
            .message_attributes()
            .and_then(|a| a.get(name))
            .and_then(|v| v.string_value())
            .unwrap_or_default()
            .to_owned()
    };
    assert_eq!(attribute(attr::FAILURE_CLASS), "schema");
    assert!(
        attribute(attr::FAILURE_REASON)
            .starts_with("not a valid order: total_cents is not the sum of the items"),
        "{}",
        attribute(attr::FAILURE_REASON)
    );
    assert!(!attribute(attr::SOURCE_MESSAGE_ID).is_empty());
    let group = letter
        .attributes()
        .and_then(|a| a.get(&aws_sdk_sqs::types::MessageSystemAttributeName::MessageGroupId));
    assert_eq!(group.map(String::as_str), Some("A"));
}

/// In `logs` ("order stored" lines, in processing order), each group's orders
/// in the order they were sent.
fn assert_each_group_stored_in_order(logs: &str) {
    let stored_in_order: Vec<String> = json_lines(logs)
        .iter()
        .filter(|l| l["message"] == "order stored")
        .filter_map(|l| l["order_id"].as_str().map(str::to_owned))
        .collect();
    let id = |n: u64| order_processor_testkit::orders::order(n).order_id;
    for group in [[1, 3, 4].as_slice(), &[11, 12, 13, 14]] {
        let ids: Vec<String> = group.iter().map(|n| id(*n)).collect();
        let seen: Vec<&String> = stored_in_order.iter().filter(|o| ids.contains(o)).collect();
        assert_eq!(seen, ids.iter().collect::<Vec<_>>(), "{logs}");
    }
}

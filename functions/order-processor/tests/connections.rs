//! The order processor opens its DynamoDB connections during init, and its
//! batches write on them.

mod support;

use support::{LocalDynamoDb, json_lines, start};

/// The order processor opens its DynamoDB connections during init, one per
/// write it makes at once and a spare (`shared::connections::SPARE`), and its
/// batches write on them: no handshake is left for a request (DynamoDB behind
/// the TLS front counts them). The first batch is waiting when init ends, as
/// at a cold start on Lambda, and the next ones follow at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_order_processor_opens_its_connections_during_init() {
    const WRITES: u64 = 4;
    const BATCHES: u64 = 3;
    let dynamodb = LocalDynamoDb::start().await;
    let mut env = dynamodb.env();
    let writes = WRITES.to_string();
    env.push(("WRITE_CONCURRENCY", &writes));
    let emulator = start("order-processor", &env);
    // Batches of new orders, each written four at a time.
    for batch in 0..BATCHES {
        let records = support::sample_records(batch * 2 * WRITES..(batch + 1) * 2 * WRITES);
        let event = serde_json::json!({ "Records": records }).to_string();
        let answer = emulator.invoke(&event).expect("invoke");
        let body = answer.json().expect("JSON");
        assert_eq!(body["batchItemFailures"], serde_json::json!([]), "{body}");
    }
    let opened = usize::try_from(WRITES).expect("a few writes") + shared::connections::SPARE;
    assert_eq!(
        dynamodb.tls_handshakes(),
        opened,
        "init's connections and none in the batches: {}",
        emulator.logs()
    );
    let logs = json_lines(&emulator.logs());
    let line = logs
        .iter()
        .find(|l| l["message"] == "DynamoDB connections opened")
        .unwrap_or_else(|| panic!("no connections line:\n{}", emulator.logs()));
    assert_eq!(line["answered"], opened, "{line}");
}

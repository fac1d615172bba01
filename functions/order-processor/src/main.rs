//! Order processor: SQS batches of orders in, partial batch failures out.

use order_processor::{
    config::Config, dynamodb::DynamoStore, handler::Handler, retry::Backoff, sqs::SqsDeadLetters,
};

// This binary's allocator: `Mimalloc`, `Jemalloc`, `Snmalloc` or `System`
// (with the same feature of `shared` in Cargo.toml; `System` needs none).
shared::global_allocator!(Mimalloc);

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    let (init, config) = shared::start_or_exit(Config::from_env);
    // One client per service per cold start. Who retries DynamoDB and SQS:
    // the order processor itself, not the SDK. Its retries (`retry.rs`:
    // exponential backoff with full jitter, each attempt cut off) stop at each
    // invocation's deadline, so a record still not stored (or dead-lettered)
    // is reported failed in time for SQS to deliver it again; the SDK's own
    // retries know no deadline and would multiply the attempts, so they are
    // off; the SDK's timeouts are the attempt's cut-off. The connections a batch writes on (`WRITE_CONCURRENCY` at once, at
    // most 64) and a spare are opened now, during init, by as many reads of a
    // key no order has (`DynamoStore::answers`: data plane, never `DescribeTable`);
    // dead letters are rare: SQS's is not.
    let sdk = shared::aws::config_loader(&Backoff::default().sdk_settings())
        .load()
        .await;
    let store = DynamoStore::new(aws_sdk_dynamodb::Client::new(&sdk), &config.table_name);
    if shared::aws::opens_connections(&init, &sdk) {
        shared::connections::open("DynamoDB", config.write_concurrency, || store.answers()).await;
    }
    let dead_letters = SqsDeadLetters::new(
        aws_sdk_sqs::Client::new(&sdk),
        &config.dead_letter_queue_url,
    );
    // One handler per environment, shared by every invocation in flight
    // (several at once on Lambda Managed Instances): `shared::share`.
    let handler = Handler::new(store, dead_letters, &config);
    shared::run(
        &init,
        shared::share(handler, |h, event| async move { h.handle(event).await }),
    )
    .await
}

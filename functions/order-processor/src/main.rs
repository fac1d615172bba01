//! Order processor: SQS batches of orders in, partial batch failures out.

use aws_sdk_dynamodb::config::retry::RetryConfig;
use lambda_runtime::{Error, service_fn};
use order_processor::{config::Config, dynamodb::DynamoStore, handler::Handler};
use shared::config::ProcessEnv;

#[tokio::main]
async fn main() -> Result<(), Error> {
    let init = shared::init_or_exit();
    let config = shared::or_exit(Config::from_env(&ProcessEnv));
    // One client per cold start. The handler retries with its own backoff,
    // bounded by each invocation's deadline, so the SDK's retries are off.
    let sdk = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .retry_config(RetryConfig::disabled())
        .load()
        .await;
    let store = DynamoStore::new(aws_sdk_dynamodb::Client::new(&sdk), &config.table_name);
    let handler = Handler::new(store, &config);
    shared::run(&init, service_fn(|event| handler.handle(event))).await
}

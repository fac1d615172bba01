//! Arrow worker: wiring only. Cold start validates every setting, starts the
//! arena pre-warm in the background, then runs the pipeline once on a few
//! synthetic orders and builds the SDK client while the pre-warm runs.

use arrow_worker::config::Config;
use arrow_worker::dynamodb::DynamoStore;
use arrow_worker::handler::Handler;
use lambda_runtime::{Error, service_fn};

#[tokio::main]
async fn main() -> Result<(), Error> {
    let (init, config) = shared::start_or_exit(Config::from_env);
    let prewarm = (config.arena_bytes > 0)
        .then(|| shared::arena::start(config.arena_bytes, init.policy))
        .and_then(|started| {
            started
                .inspect_err(|e| tracing::warn!(error = %e, "arena pre-warm not started"))
                .ok()
        });
    // Page in the pipeline's code while the arena thread faults in memory.
    if let Err(e) = arrow_worker::warm_up::run() {
        tracing::warn!(error = %e, "pipeline warm-up failed");
    }
    // DynamoDB calls are retried by the AWS SDK alone, with the defaults of
    // `load_from_env` (standard mode: 3 attempts, exponential backoff with
    // jitter, `AWS_MAX_ATTEMPTS` / `AWS_RETRY_MODE` override). The worker does
    // not retry: an error left after them fails the invocation with
    // `DynamoDBError`, which the fan-out's state machine retries per segment.
    let aws = aws_config::load_from_env().await;
    let store = DynamoStore::new(
        aws_sdk_dynamodb::Client::new(&aws),
        &config.table_name,
        &config.reports_table,
    );
    let handler = Handler::new(store, config, init.vcpus.workers, prewarm);
    let handler = &handler;
    shared::run(&init, service_fn(move |event| handler.handle(event))).await
}

//! Arrow worker: wiring only. Cold start starts the arena pre-warm in the
//! background, then runs the pipeline once on a few generated orders and
//! builds the SDK client while it runs.

use arrow_worker::config::Config;
use arrow_worker::dynamodb::DynamoStore;
use arrow_worker::handler::Worker;
use lambda_runtime::{Error, service_fn};
use shared::config::ProcessEnv;

#[tokio::main]
async fn main() -> Result<(), Error> {
    let init = shared::init_or_exit();
    let config = shared::or_exit(Config::from_env(&ProcessEnv));
    let prewarm = (config.arena_bytes > 0)
        .then(|| shared::arena::start(config.arena_bytes, init.policy))
        .and_then(|started| {
            started
                .inspect_err(|e| tracing::warn!(error = %e, "arena pre-warm not started"))
                .ok()
        });
    // Page in the pipeline's code while the arena thread faults in memory.
    if let Err(e) = arrow_worker::aggregate::warm_up() {
        tracing::warn!(error = %e, "pipeline warm-up failed");
    }
    let aws = aws_config::load_from_env().await;
    let store = DynamoStore::new(
        aws_sdk_dynamodb::Client::new(&aws),
        &config.table_name,
        &config.reports_table,
    );
    let worker = Worker::new(store, config, init.vcpus.workers, prewarm);
    let worker = &worker;
    shared::run(&init, service_fn(move |event| worker.handle(event))).await
}

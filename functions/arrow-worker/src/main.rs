//! Arrow worker: wiring only. Cold start validates every setting, pre-faults
//! the arena as `PREWARM` says (by default only when Lambda initialises ahead
//! of traffic), runs the pipeline once on a few synthetic orders and builds
//! the SDK clients.

// Proving the handler's future `Send` (each invocation may run on another
// thread, see `shared::run`) walks the SDK clients' deep future types.
#![recursion_limit = "256"]

use arrow_worker::aws::AwsStore;
use arrow_worker::config::{Config, Prewarm};
use arrow_worker::dynamodb::DynamoTables;
use arrow_worker::handler::Handler;
use arrow_worker::s3::S3Objects;
use lambda_runtime::Error;
use shared::aws::ClientSettings;
use std::time::Duration;

// This binary's allocator: `Mimalloc`, `Jemalloc`, `Snmalloc` or `System`
// (with the same feature of `shared` in Cargo.toml; `System` needs none).
shared::global_allocator!(Mimalloc);

/// The SDK clients' retries and timeouts. A call is a page of a scan or
/// query (up to 1 MB), a partial's upload or download, a report item, a
/// `StartExecution`: a second to first byte is slow, 10 s is stuck; three
/// attempts fit well within the 120 s timeout.
const SDK: ClientSettings = ClientSettings {
    max_attempts: 3,
    initial_backoff: Duration::from_millis(100),
    max_backoff: Duration::from_secs(5),
    connect_timeout: Duration::from_millis(3_100),
    read_timeout: Duration::from_secs(10),
    attempt_timeout: Duration::from_secs(30),
    operation_timeout: Duration::from_secs(60),
};

#[tokio::main]
async fn main() -> Result<(), Error> {
    let (init, config) = shared::start_or_exit(Config::from_env);
    let (bytes, policy) = (config.arena_bytes, init.policy);
    let prewarm = match config.prewarm {
        _ if bytes == 0 => None,
        Prewarm::Off => None,
        Prewarm::AtInit => Some(shared::arena::prefault_now(bytes, policy)),
        Prewarm::Background => Some(shared::arena::start(bytes, policy)),
    }
    .and_then(|started| {
        started
            .inspect_err(|e| tracing::warn!(error = %e, "arena pre-warm not started"))
            .ok()
    });
    // Page in the pipeline's code while the arena thread faults in memory.
    if let Err(e) = arrow_worker::warm_up::run() {
        tracing::warn!(error = %e, "pipeline warm-up failed");
    }
    // DynamoDB, S3 and Step Functions calls are retried by the AWS SDK alone
    // (standard mode: exponential backoff with jitter), with every setting
    // pinned in `SDK`. The worker does not retry: an error left after them
    // fails the invocation with `DynamoDBError`, which the fan-out's state
    // machine retries per segment.
    let aws = shared::aws::config_loader(&SDK).load().await;
    let tables = DynamoTables::new(
        aws_sdk_dynamodb::Client::new(&aws),
        &config.table_name,
        &config.reports_table,
    );
    let objects = config.analytics_bucket.as_ref().map(|bucket| {
        let s3 = aws_sdk_s3::config::Builder::from(&aws)
            .force_path_style(config.s3_path_style)
            .build();
        S3Objects::new(aws_sdk_s3::Client::from_conf(s3), bucket)
    });
    let fan_outs = config
        .report_state_machine
        .as_ref()
        .map(|arn| arrow_worker::step_functions::FanOuts::new(aws_sdk_sfn::Client::new(&aws), arn));
    let store = AwsStore::new(tables, objects, fan_outs);
    // The connections one request reads on at once: a scan per worker, or
    // the daily report's shards.
    if shared::aws::opens_connections(&init, &aws) {
        let readers = init.vcpus.workers.max(shared::orders::DAY_SHARDS as usize);
        store.open_connections(readers).await;
    }
    // One handler per environment, shared by every invocation in flight
    // (several at once on Lambda Managed Instances): `shared::share`.
    let handler = Handler::new(store, config, init.vcpus.workers, prewarm);
    shared::run(
        &init,
        shared::share(handler, |h, event| async move { h.handle(event).await }),
    )
    .await
}

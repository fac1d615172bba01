//! The order processor with a leak, for the memory-limit test: the real
//! handler, wired as the order processor's own `main.rs` wires it, but each
//! invocation first allocates, touches and keeps `LEAK_MIB` MiB (0 to 1,024;
//! default 0), so that the process grows by that much per batch until it
//! passes its memory size and is killed at the start of an invocation, before
//! the handler has stored anything of that batch.

use lambda_runtime::service_fn;
use order_processor::{
    config::Config, dynamodb::DynamoStore, handler::Handler, retry::Backoff, sqs::SqsDeadLetters,
};
use shared::config::number_or;
use std::sync::{Arc, Mutex};

/// The setting: MiB kept per invocation.
const LEAK_MIB: &str = "LEAK_MIB";

// As the order processor.
shared::global_allocator!(Mimalloc);

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    let (init, (config, leak_mib)) = shared::start_or_exit(|env| {
        Ok::<_, shared::config::ConfigError>((
            Config::from_env(env)?,
            number_or(env, LEAK_MIB, 0, 0..=1_024)?,
        ))
    });
    let leak_bytes = usize::try_from(leak_mib << 20)?;
    // As the order processor: its own retries, none in the SDK.
    let sdk = shared::aws::config_loader(&Backoff::default().sdk_settings())
        .load()
        .await;
    let store = DynamoStore::new(aws_sdk_dynamodb::Client::new(&sdk), &config.table_name);
    let dead_letters = SqsDeadLetters::new(
        aws_sdk_sqs::Client::new(&sdk),
        &config.dead_letter_queue_url,
    );
    let handler = Arc::new(Handler::new(store, dead_letters, &config));
    let kept: Arc<Mutex<Vec<Vec<u8>>>> = Arc::default();
    shared::run(
        &init,
        service_fn(move |event| {
            // Written, not only reserved: untouched pages would not count.
            let block = vec![1_u8; leak_bytes];
            kept.lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .push(block);
            let handler = Arc::clone(&handler);
            async move { handler.handle(event).await }
        }),
    )
    .await
}

//! Performance-lab probe: a hello-world Lambda function (the runtime, tokio
//! and the allocator, nothing else), answering each event with itself. Its
//! init under the emulator is the floor each function's init is read
//! against.

use lambda_runtime::{Error, LambdaEvent, service_fn};
use serde_json::Value;

lab_probes::declare_allocator!();

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda_runtime::run(service_fn(|event: LambdaEvent<Value>| async {
        Ok::<Value, Error>(event.payload)
    }))
    .await
}

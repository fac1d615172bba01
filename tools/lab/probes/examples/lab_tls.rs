//! Performance-lab probe: the cold cost of the AWS SDK's HTTPS client for one
//! crypto provider, as a Lambda function. Each invocation builds the SDK's
//! configuration and a DynamoDB client with the functions' HTTPS client
//! (`shared::aws`) on rustls with `LAB_TLS_PROVIDER` (`ring`, what the
//! functions ship, or `aws-lc`, the SDK's default), then
//! calls `DescribeTable` on `TABLE_NAME` twice: the first call opens the
//! connection (TCP, the TLS handshake checked against the roots of
//! `SSL_CERT_FILE`), the second reuses it. It answers the three times in ms,
//! and the CPU time of the first call (under a CPU share its wall time also
//! depends on where the call falls in the quota's period).
//! Only the first invocation of an environment is cold (each library keeps
//! its random generator and tables for the process).

use aws_smithy_http_client::tls::rustls_provider::CryptoMode;
use lambda_runtime::{Error, LambdaEvent, service_fn};
use serde_json::{Value, json};
use std::time::Instant;

lab_probes::declare_allocator!();

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda_runtime::run(service_fn(|_: LambdaEvent<Value>| measure())).await
}

async fn measure() -> Result<Value, Error> {
    let mode = match std::env::var("LAB_TLS_PROVIDER").as_deref() {
        Ok("ring") => CryptoMode::Ring,
        Ok("aws-lc") => CryptoMode::AwsLc,
        other => return Err(format!("LAB_TLS_PROVIDER: ring or aws-lc, not {other:?}").into()),
    };
    let table = std::env::var("TABLE_NAME").map_err(|e| format!("TABLE_NAME: {e}"))?;
    let started = Instant::now();
    let sdk = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .http_client(shared::aws::https_client_on(mode))
        .load()
        .await;
    let client = aws_sdk_dynamodb::Client::new(&sdk);
    let client_ms = ms(started);
    let mut calls_ms = Vec::new();
    let cpu_before = shared::memory::cpu_time();
    let mut first_call_cpu_ms = 0.0;
    for _ in 0..2 {
        let started = Instant::now();
        client.describe_table().table_name(&table).send().await?;
        calls_ms.push(ms(started));
        if calls_ms.len() == 1 {
            first_call_cpu_ms = ms_of(shared::memory::cpu_time() - cpu_before);
        }
    }
    Ok(json!({
        "client_ms": client_ms,
        "first_call_ms": calls_ms[0],
        "first_call_cpu_ms": first_call_cpu_ms,
        "second_call_ms": calls_ms[1],
    }))
}

fn ms(since: Instant) -> f64 {
    ms_of(since.elapsed())
}

fn ms_of(duration: std::time::Duration) -> f64 {
    duration.as_secs_f64() * 1e3
}

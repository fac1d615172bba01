//! DynamoDB connections opened during init, so the first batch does not pay
//! TLS handshakes (on Lambda a 256 MB function has about 15% of a vCPU, and a
//! handshake with certificate checks is tens of milliseconds of it). As many
//! as a batch writes at once (`WRITE_CONCURRENCY`): that many `DescribeTable`
//! calls at the same time, each on a connection of its own that the SDK's
//! pool then keeps. Best effort and bounded: a failure or a slow answer never
//! fails the cold start, and nothing is tried without a region.

use aws_sdk_dynamodb::Client;
use futures::future::join_all;
use std::time::{Duration, Instant};

/// The longest init waits for the connections: far above what healthy
/// handshakes take, well below a short function timeout (locally the
/// emulator counts init against it; a DynamoDB that accepts and never
/// answers must not use it all: e2e `fault_injection`).
pub const WITHIN: Duration = Duration::from_secs(1);

/// What opening the connections did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Opened {
    /// Calls answered (an error answer from DynamoDB still opened its connection).
    pub answered: usize,
    /// Calls that did not reach DynamoDB, or not within [`WITHIN`].
    pub failed: usize,
    /// How long it took.
    pub took: Duration,
}

/// Open `count` connections to DynamoDB through `client`, asking about `table`.
pub async fn open(client: &Client, table: &str, count: usize) -> Opened {
    let started = Instant::now();
    if client.config().region().is_none() {
        return Opened {
            answered: 0,
            failed: 0,
            took: started.elapsed(),
        };
    }
    let calls = (0..count).map(|_| client.describe_table().table_name(table).send());
    let results = tokio::time::timeout(WITHIN, join_all(calls)).await;
    let answered = results.as_ref().map_or(0, |results| {
        results
            .iter()
            .filter(|r| match r {
                Ok(_) => true,
                // DynamoDB answered (e.g. access denied): the connection is open.
                Err(e) => e.raw_response().is_some(),
            })
            .count()
    });
    let opened = Opened {
        answered,
        failed: count - answered,
        took: started.elapsed(),
    };
    tracing::info!(
        answered = opened.answered,
        failed = opened.failed,
        took_ms = opened.took.as_secs_f64() * 1e3,
        "DynamoDB connections opened"
    );
    opened
}

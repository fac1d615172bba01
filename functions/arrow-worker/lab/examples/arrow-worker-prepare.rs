//! Lab probe: writes the orders the Arrow worker's lab requests read, into
//! the table its settings name (`TABLE_NAME`, at `AWS_ENDPOINT_URL_DYNAMODB`),
//! in the schema the order processor stores (`shared::orders::attr`, items
//! included, so pages hold what they hold on AWS).
//!
//! `arrow-worker-prepare FROM TO [DAY_START_S]` (run by `cargo xtask lab`
//! before a request whose plan asks for it): orders FROM..TO, order `n` of
//! customer `n / 5`, 1 to 4 items; created a minute apart from 2026-11-01
//! over 30 days, or, with DAY_START_S (seconds since the epoch, a UTC
//! midnight), all on that day spread over its seconds. Prints how many it
//! wrote.

use arrow_worker_lab::orders::{self, ORDERS_PER_CUSTOMER};
use aws_sdk_dynamodb::Client;

#[tokio::main]
async fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = || "usage: arrow-worker-prepare FROM TO [DAY_START_S]".to_owned();
    let number = |s: &String| s.parse::<u64>().map_err(|_| usage());
    let (from, to, day) = match args.as_slice() {
        [from, to] => (number(from)?, number(to)?, None),
        [from, to, day] => (
            number(from)?,
            number(to)?,
            Some(i64::try_from(number(day)?).map_err(|_| usage())?),
        ),
        _ => return Err(usage()),
    };
    let table = std::env::var("TABLE_NAME").map_err(|e| format!("TABLE_NAME: {e}"))?;
    let sdk = aws_config::defaults(shared::aws::behavior_version())
        .load()
        .await;
    orders::write(&Client::new(&sdk), &table, (from, to), day).await?;
    println!(
        "{}",
        serde_json::json!({ "written": to.saturating_sub(from), "customers": to.div_ceil(ORDERS_PER_CUSTOMER) })
    );
    Ok(())
}

//! Lab probe: the Arrow worker's real handler serving many requests at once
//! in one process, as one Lambda Managed Instances environment does
//! (`lab_probes::concurrency` drives it and says the arguments). Each
//! request is the sample aggregation by customer over `ROWS` generated
//! orders (20,000 unless set), pages answered after `STORE_MS`; a request
//! its row budget refuses (`Busy`) is counted.

use arrow_worker::config::Config;
use arrow_worker::handler::Handler;
use arrow_worker_testkit::orders::{self, MemoryStore};
use lab_probes::concurrency::{self, Work, diagnostic, invocation, store_time, text};
use serde_json::Value;
use shared::config::number_or;

lab_probes::declare_allocator!();

/// One request, for the report.
const REQUEST: &str = "the sample aggregation by customer";

/// The sample event the requests are.
const EVENT: &str = include_str!("../../../../events/arrow-worker/report-by-customer.json");
/// Orders per page of the generated table (DynamoDB's pages are up to 1 MB:
/// about this many of these orders).
const PAGE: usize = 1_000;

struct Arrow(Handler<MemoryStore>, Value);

impl Work for Arrow {
    async fn serve(&self, _: u64) -> Result<bool, String> {
        match self.0.handle(invocation(self.1.clone())).await {
            Ok(_) => Ok(true),
            Err(refused) if refused.error_type == "Busy" => Ok(false),
            Err(failed) => Err(diagnostic(failed)),
        }
    }
}

#[tokio::main]
async fn main() -> Result<(), String> {
    concurrency::probe(REQUEST, |env| {
        let (init, config) = shared::start(env, Config::from_env).map_err(text)?;
        let default = if concurrency::full_scale(env) {
            20_000
        } else {
            2_000
        };
        let rows = number_or(env, "ROWS", default, 1..=10_000_000).map_err(text)?;
        let rows = usize::try_from(rows).map_err(text)?;
        let items = orders::items(rows, (rows as u64 / 8).max(1), 7);
        let store = MemoryStore::new(items, PAGE).with_page_latency(store_time(env)?);
        let handler = Handler::new(store, config, init.vcpus.workers, None);
        Ok((
            Arrow(handler, serde_json::from_str(EVENT).map_err(text)?),
            init.vcpus.share,
        ))
    })
    .await
}

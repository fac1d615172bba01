//! Lab probe: the order processor's real handler serving many batches at
//! once in one process, as one Lambda Managed Instances environment does
//! (`lab_probes::concurrency` drives it and says the arguments). Each request
//! is a batch of 10 new orders; the in-memory store answers after
//! `STORE_MS`, as DynamoDB would; dead letters stay in memory.

use lab_probes::concurrency::{self, Work, store_time, text};
use order_processor::config::Config;
use order_processor::handler::Handler;
use order_processor_testkit::dead_letters::MemoryDeadLetters;
use order_processor_testkit::orders as sample;
use order_processor_testkit::store::MemoryOrders;
use shared::invocation::Deadline;
use std::time::Instant;

lab_probes::declare_allocator!();

/// One request, for the report.
const REQUEST: &str = "an SQS batch of 10 new orders";

/// The handler, and the requests that fill its cache.
struct Orders(Handler<MemoryOrders, MemoryDeadLetters>, usize);

impl Work for Orders {
    fn warm_up(&self) -> usize {
        self.1
    }

    async fn serve(&self, n: u64) -> Result<bool, String> {
        let records = sample::records(n * 10..n * 10 + 10, sample::body);
        let deadline = Deadline::at(Instant::now() + concurrency::DEADLINE);
        let report = self.0.process(&records, deadline).await.map_err(text)?;
        match report.failed().next() {
            None => Ok(true),
            Some((id, why)) => Err(format!("record {id} failed: {why:?}")),
        }
    }
}

#[tokio::main]
async fn main() -> Result<(), String> {
    concurrency::probe(REQUEST, |env| {
        let (init, config) = shared::start(env, Config::from_env).map_err(text)?;
        let store = MemoryOrders::accept_all().delay(store_time(env)?);
        let handler = Handler::new(store, MemoryDeadLetters::new(), &config);
        // Ten orders a request.
        let fill = config.cache_capacity.get() / 10;
        Ok((Orders(handler, fill), init.vcpus.share))
    })
    .await
}

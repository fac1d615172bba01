//! Records per second through validation + cache + a no-op store, on one core
//! (a current-thread runtime), in batches of 10.
//!
//! `cargo bench -p order-processor --bench throughput`
//!
//! Three passes over the same orders, measured in one run: first delivery
//! (every order validated, hashed and "written"), redelivery to the same
//! container (cache hits: no write), and invalid bodies (rejected early).

use aws_lambda_events::sqs::SqsMessage;
use order_processor::config::Config;
use order_processor::handler::Handler;
use order_processor::order::ValidOrder;
use order_processor::store::{OrderStore, PutOutcome, StoreError};
use std::time::{Duration, Instant};

const ORDERS: u64 = 200_000;

struct NoopStore;

impl OrderStore for NoopStore {
    async fn put_order(&self, _order: &ValidOrder) -> Result<PutOutcome, StoreError> {
        Ok(PutOutcome::Written)
    }
}

fn records(body: impl Fn(u64) -> String) -> Vec<SqsMessage> {
    order_processor::sample::records(0..ORDERS, body)
}

async fn pass(handler: &Handler<NoopStore>, records: &[SqsMessage]) -> (f64, usize) {
    let start = Instant::now();
    let mut failed = 0;
    for batch in records.chunks(10) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        let report = handler.process(batch, deadline).await.expect("report");
        failed += report.failed().count();
    }
    (records.len() as f64 / start.elapsed().as_secs_f64(), failed)
}

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime");
    let config = Config::from_env(&[("TABLE_NAME", "orders"), ("CACHE_CAPACITY", "100000")])
        .expect("config");
    let valid = records(order_processor::sample::body);
    let invalid = records(|n| {
        order_processor::sample::body(n).replace("\"total_cents\":", "\"total_cents\":1")
    });
    runtime.block_on(async {
        let handler = Handler::new(NoopStore, &config);
        let (first, failed_first) = pass(&handler, &valid[..100_000]).await;
        let (cached, _) = pass(&handler, &valid[..100_000]).await;
        let (rejected, failed_invalid) = pass(&handler, &invalid).await;
        assert_eq!(failed_first, 0);
        assert_eq!(failed_invalid, ORDERS as usize);
        println!(
            "order-processor throughput, one core, batches of 10 ({} allocator)",
            shared::allocator::NAME
        );
        println!(
            "  first delivery (validate + hash + cache + no-op write): {first:>10.0} records/s"
        );
        println!(
            "  redelivery (validate + hash + cache hit):               {cached:>10.0} records/s"
        );
        println!(
            "  invalid total (validate, reject):                       {rejected:>10.0} records/s"
        );
    });
}

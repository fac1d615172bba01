//! Memory soak: the real handler, with the real allocator and the template's
//! memory-return policy, processes 200,000 distinct orders in batches of 10
//! through a store that keeps nothing. After warm-up (the LRU cache full), RSS
//! must stay within `GROWTH_BOUND` of its warm value.
//!
//! The bound, 4 MiB, is what a leak of even 20 bytes per order would exceed
//! (180,000 orders after warm-up); the cache itself is bounded at about 2 MiB
//! (10,000 entries) and full before the measurement starts.

use aws_lambda_events::sqs::SqsMessage;
use order_processor::config::Config;
use order_processor::handler::Handler;
use order_processor_testkit::dead_letters::{self, MemoryDeadLetters};
use order_processor_testkit::store::MemoryOrders;
use shared::allocator::{self, Policy};
use shared::invocation::Deadline;
use std::time::{Duration, Instant};

// The allocator the order processor's `main.rs` declares.
shared::global_allocator!(Mimalloc);

const ORDERS: u64 = 200_000;
const WARM_UP: u64 = 20_000;
const GROWTH_BOUND: u64 = 4 << 20;

fn batch(first: u64) -> Vec<SqsMessage> {
    order_processor_testkit::orders::records(
        first..first + 10,
        order_processor_testkit::orders::body,
    )
}

#[tokio::test]
async fn rss_stays_flat_over_200k_orders() {
    allocator::apply(Policy::Prompt).expect("policy");
    let config = Config::from_env(&[
        ("TABLE_NAME", "orders"),
        ("DEAD_LETTER_QUEUE_URL", dead_letters::QUEUE_URL),
    ])
    .expect("config");
    let handler = Handler::new(
        MemoryOrders::accept_all(),
        MemoryDeadLetters::new(),
        &config,
    );
    let mut warm_rss = 0;
    let mut peak_after_warm_up = 0;
    let mut first = 0;
    while first < ORDERS {
        let records = batch(first);
        let report = handler
            .process(
                &records,
                Deadline::at(Instant::now() + Duration::from_secs(10)),
            )
            .await
            .expect("report");
        assert!(report.response().batch_item_failures.is_empty());
        first += 10;
        if first == WARM_UP {
            assert_eq!(
                handler.cache_len(),
                10_000,
                "the cache is full after warm-up"
            );
            warm_rss = shared::memory::snapshot().rss_bytes;
        } else if first > WARM_UP && first % 1_000 == 0 {
            peak_after_warm_up = peak_after_warm_up.max(shared::memory::snapshot().rss_bytes);
        }
    }
    assert_eq!(
        handler.cache_len(),
        10_000,
        "the cache never grows past its capacity"
    );
    let growth = peak_after_warm_up.saturating_sub(warm_rss);
    eprintln!(
        "{}: RSS after warm-up {:.1} MiB, highest later {:.1} MiB, growth {:.2} MiB (bound {:.0} MiB)",
        allocator::name(),
        shared::memory::mib(warm_rss),
        shared::memory::mib(peak_after_warm_up),
        growth as f64 / (1 << 20) as f64,
        shared::memory::mib(GROWTH_BOUND)
    );
    assert!(
        growth <= GROWTH_BOUND,
        "RSS grew by {growth} bytes after warm-up"
    );
}

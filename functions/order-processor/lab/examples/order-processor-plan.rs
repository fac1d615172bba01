//! Lab probe: what the lab's generic sections send the order processor
//! (`lab_probes::plan` says the contract): SQS batches of new orders, every
//! record a real write, each request's order ids its own.

use lab_probes::plan::{self, CONNECTIONS, FirstInvocation, Plan, Request};
use order_processor_lab::batch;
use shared::orders::MAX_ITEMS;

/// Orders per batch of the typical and large requests (SQS's default batch size).
const BATCH: u64 = 10;

fn main() -> Result<(), String> {
    let (_, count) = plan::args()?;
    // Request `r`'s invocation `i` sends orders from (r * count + i) * BATCH.
    let request = |r: u64, size: &str, description: String, orders: u64, items: usize| Request {
        size: size.to_owned(),
        description,
        steady: None,
        prepare: None,
        events: (0..count)
            .map(|i| batch((r * count + i) * BATCH, orders, items))
            .collect(),
    };
    let typical = "an SQS batch of 10 new orders";
    let mut power = request(
        3,
        "typical",
        format!("{typical}, written to DynamoDB Local"),
        BATCH,
        1,
    );
    power.steady = Some(5);
    plan::print(&Plan {
        first_invocation: FirstInvocation {
            measures: vec![CONNECTIONS.to_owned()],
            requests: vec![
                request(0, "small", "an SQS batch of 1 new order".into(), 1, 1),
                request(1, "typical", typical.into(), BATCH, 1),
                request(
                    2,
                    "large",
                    format!("an SQS batch of 10 new orders of {MAX_ITEMS} items each"),
                    BATCH,
                    MAX_ITEMS,
                ),
            ],
        },
        power,
    })
}

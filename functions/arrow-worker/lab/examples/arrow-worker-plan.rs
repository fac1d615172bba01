//! Lab probe: what the lab's generic sections send the Arrow worker
//! (`lab_probes::plan` says the contract): a day's report, the sample
//! aggregation and every customer, over orders `arrow-worker-prepare` writes
//! first.

use arrow_worker_lab::orders::{ORDERS_PER_CUSTOMER, day_of};
use lab_probes::plan::{self, CONNECTIONS, FirstInvocation, PREWARM, Plan, Request};
use serde_json::{Value, json};

/// The sample aggregation.
const BY_CUSTOMER: &str = include_str!("../../../../events/arrow-worker/report-by-customer.json");
/// Orders in the table of the power tuning.
const POWER_ORDERS: u64 = 3_000;

fn main() -> Result<(), String> {
    let (full, _) = plan::args()?;
    // Orders for the small and typical requests, then for the large one.
    let (typical, large) = if full { (3_000, 12_000) } else { (300, 1_500) };
    let by_customer: Value = serde_json::from_str(BY_CUSTOMER).map_err(|e| e.to_string())?;
    let request =
        |size: &str, description: String, prepare: Option<(u64, u64)>, event: Value| Request {
            size: size.to_owned(),
            description,
            steady: None,
            prepare: prepare.map(|(from, to)| vec![from.to_string(), to.to_string()]),
            events: vec![event],
        };
    // The last day of the typical table: its fewest orders.
    let day = day_of(typical - 1);
    let mut power = request(
        "typical",
        format!(
            "`events/arrow-worker/report-by-customer.json` over a table of {POWER_ORDERS} orders in DynamoDB Local"
        ),
        Some((0, POWER_ORDERS)),
        by_customer.clone(),
    );
    power.steady = Some(5);
    plan::print(&Plan {
        first_invocation: FirstInvocation {
            measures: vec![CONNECTIONS.to_owned(), PREWARM.to_owned()],
            requests: vec![
                request(
                    "small",
                    format!("the daily report of {day} (the last day of {typical} orders)"),
                    Some((0, typical)),
                    json!({ "operation": "daily_report", "day": day }),
                ),
                request(
                    "typical",
                    format!("`events/arrow-worker/report-by-customer.json` over {typical} orders"),
                    None,
                    by_customer,
                ),
                request(
                    "large",
                    format!(
                        "every customer over {large} orders ({} customers)",
                        large / ORDERS_PER_CUSTOMER
                    ),
                    Some((typical, large)),
                    json!({ "operation": "aggregate", "query": { "group_by": "customer", "limit": 20_000 } }),
                ),
            ],
        },
        power,
    })
}

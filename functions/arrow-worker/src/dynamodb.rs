//! The orders and reports tables on DynamoDB: `Scan` pages of one segment,
//! `Query` pages of one day shard of the day index (only the attributes the
//! analytics read, either way), and `PutItem` of report items.

use crate::columns::{Item, PROJECTION};
use crate::store::{Page, Source, StoreError};
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::AttributeValue;
use shared::ErrorChain;
use shared::orders::{DAY_INDEX, attr};
use std::collections::HashMap;

/// Attribute names of a report item.
pub mod report_attr {
    /// The key: `daily/2026-11-21`.
    pub const REPORT_ID: &str = "report_id";
    /// The answer, as JSON.
    pub const BODY: &str = "body";
}

/// The orders table and the reports table.
#[derive(Debug, Clone)]
pub struct DynamoTables {
    client: Client,
    orders: String,
    reports: String,
}

/// Placeholder names for the projection (some names, `items`, are reserved
/// words), and the projection expression over the placeholders.
fn projection() -> (HashMap<String, String>, String) {
    let names: HashMap<String, String> = PROJECTION
        .iter()
        .enumerate()
        .map(|(i, name)| (format!("#a{i}"), (*name).to_owned()))
        .collect();
    let expression = (0..PROJECTION.len())
        .map(|i| format!("#a{i}"))
        .collect::<Vec<_>>()
        .join(", ");
    (names, expression)
}

impl DynamoTables {
    /// Read `orders`, write `reports`, through `client` (built once, at cold start).
    pub fn new(client: Client, orders: impl Into<String>, reports: impl Into<String>) -> Self {
        Self {
            client,
            orders: orders.into(),
            reports: reports.into(),
        }
    }

    /// Ask DynamoDB about the orders table: opens a connection during init
    /// (`shared::connections`). `true` if DynamoDB answered, even with an error.
    pub async fn answers(&self) -> bool {
        let answer = self
            .client
            .describe_table()
            .table_name(&self.orders)
            .send()
            .await;
        answer.map_or_else(|e| e.raw_response().is_some(), |_| true)
    }

    /// One page of `source`, starting after `start`.
    pub async fn read_page(
        &self,
        source: &Source,
        start: Option<Item>,
    ) -> Result<Page, StoreError> {
        let (mut names, expression) = projection();
        let (items, next) = match source {
            Source::Segment {
                segment,
                total_segments,
            } => {
                let mut request = self
                    .client
                    .scan()
                    .table_name(&self.orders)
                    .set_exclusive_start_key(start)
                    .projection_expression(expression)
                    .set_expression_attribute_names(Some(names));
                if *total_segments > 1 {
                    let to_i32 = |v: u32| i32::try_from(v).unwrap_or(i32::MAX);
                    request = request
                        .segment(to_i32(*segment))
                        .total_segments(to_i32(*total_segments));
                }
                let output = request.send().await.map_err(|e| {
                    StoreError(format!("Scan of {}: {}", self.orders, ErrorChain(&e)))
                })?;
                (output.items, output.last_evaluated_key)
            }
            Source::DayShard(key) => {
                names.insert("#day".to_owned(), attr::DAY_SHARD.to_owned());
                let request = self
                    .client
                    .query()
                    .table_name(&self.orders)
                    .index_name(DAY_INDEX)
                    .key_condition_expression("#day = :day")
                    .expression_attribute_values(":day", AttributeValue::S(key.clone()))
                    .set_exclusive_start_key(start)
                    .projection_expression(expression)
                    .set_expression_attribute_names(Some(names));
                let output = request.send().await.map_err(|e| {
                    StoreError(format!(
                        "Query of {}/{DAY_INDEX}: {}",
                        self.orders,
                        ErrorChain(&e)
                    ))
                })?;
                (output.items, output.last_evaluated_key)
            }
        };
        Ok(Page {
            next: next.filter(|k| !k.is_empty()),
            items: items.unwrap_or_default(),
        })
    }

    /// Store `body` (JSON) as the report `id`, replacing an older one.
    pub async fn save_report(&self, id: &str, body: String) -> Result<(), StoreError> {
        self.client
            .put_item()
            .table_name(&self.reports)
            .item(report_attr::REPORT_ID, AttributeValue::S(id.to_owned()))
            .item(report_attr::BODY, AttributeValue::S(body))
            .send()
            .await
            .map_err(|e| {
                StoreError(format!("PutItem into {}: {}", self.reports, ErrorChain(&e)))
            })?;
        Ok(())
    }
}

//! The orders and reports tables on DynamoDB: `Scan` pages of one segment,
//! `Query` pages of one day shard of the day index (only the attributes the
//! analytics read, either way), and `PutItem` of report items.

use crate::columns::{Item, PROJECTION};
use crate::store::{Page, Report, Saved, Source, StoreError};
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::operation::put_item::PutItemError;
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
    /// The time the report stands for (RFC 3339).
    pub const AS_OF: &str = "as_of";
    /// The same time in milliseconds since the Unix epoch, compared by the
    /// conditional write.
    pub const AS_OF_MS: &str = "as_of_ms";
    /// Whether no later scheduled run computes this day again.
    pub const FINAL: &str = "final";
}

/// A day-index key no order has (a shard key is `YYYY-MM-DD#n`).
const NO_SHARD: &str = "connection-check";

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

    /// Ask the day index for a shard no order has (data plane, reads
    /// nothing, the permission the daily report needs anyway): opens a
    /// connection during init (`shared::connections`). Not `DescribeTable`:
    /// DynamoDB throttles control-plane calls account-wide, and a scale-out
    /// of many environments would send one per connection. `true` if
    /// DynamoDB answered, even with an error.
    pub async fn answers(&self) -> bool {
        let answer = self
            .client
            .query()
            .table_name(&self.orders)
            .index_name(DAY_INDEX)
            .key_condition_expression("#day = :day")
            .expression_attribute_names("#day", attr::DAY_SHARD)
            .expression_attribute_values(":day", AttributeValue::S(NO_SHARD.to_owned()))
            .limit(1)
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
            Source::DayShard {
                key,
                from_ms,
                to_ms,
            } => {
                names.insert("#day".to_owned(), attr::DAY_SHARD.to_owned());
                names.insert("#at".to_owned(), attr::CREATED_AT_MS.to_owned());
                // BETWEEN is inclusive: the last millisecond before `to_ms`.
                let last = to_ms.saturating_sub(1);
                let number = |n: i64| AttributeValue::N(n.to_string());
                let request = self
                    .client
                    .query()
                    .table_name(&self.orders)
                    .index_name(DAY_INDEX)
                    .key_condition_expression("#day = :day AND #at BETWEEN :from AND :last")
                    .expression_attribute_values(":day", AttributeValue::S(key.clone()))
                    .expression_attribute_values(":from", number(*from_ms))
                    .expression_attribute_values(":last", number(last))
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

    /// Store `report`, unless the item of its id stands for a later time or
    /// is final and `report` is not ([`Report::may_replace`], as a
    /// condition of the write). An item written before `as_of_ms` existed is
    /// replaced.
    pub async fn save_report(&self, report: &Report) -> Result<Saved, StoreError> {
        let text = |v: &str| AttributeValue::S(v.to_owned());
        let number = |n: i64| AttributeValue::N(n.to_string());
        let condition = if report.is_final {
            "attribute_not_exists(#id) OR attribute_not_exists(#ms) OR #ms <= :ms"
        } else {
            "attribute_not_exists(#id) OR attribute_not_exists(#ms) OR (#ms <= :ms AND #final = :no)"
        };
        let mut request = self
            .client
            .put_item()
            .table_name(&self.reports)
            .item(report_attr::REPORT_ID, text(&report.id))
            .item(report_attr::BODY, text(&report.body))
            .item(report_attr::AS_OF, text(&report.as_of))
            .item(report_attr::AS_OF_MS, number(report.as_of_ms))
            .item(report_attr::FINAL, AttributeValue::Bool(report.is_final))
            .condition_expression(condition)
            .expression_attribute_names("#id", report_attr::REPORT_ID)
            .expression_attribute_names("#ms", report_attr::AS_OF_MS)
            .expression_attribute_values(":ms", number(report.as_of_ms));
        if !report.is_final {
            request = request
                .expression_attribute_names("#final", report_attr::FINAL)
                .expression_attribute_values(":no", AttributeValue::Bool(false));
        }
        match request.send().await {
            Ok(_) => Ok(Saved::Written),
            Err(e)
                if e.as_service_error()
                    .is_some_and(PutItemError::is_conditional_check_failed_exception) =>
            {
                Ok(Saved::Kept)
            }
            Err(e) => Err(StoreError(format!(
                "PutItem into {}: {}",
                self.reports,
                ErrorChain(&e)
            ))),
        }
    }
}

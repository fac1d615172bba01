//! The DynamoDB implementation of [`Store`]: `Scan` pages of one segment (only
//! the attributes the analytics read) and `PutItem` of report items.

use crate::columns::{Item, PROJECTION};
use crate::store::{Page, Store, StoreError};
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::AttributeValue;
use shared::ErrorChain;

/// Attribute names of a report item.
pub mod report_attr {
    /// The key: `daily/2026-11-21`.
    pub const REPORT_ID: &str = "report_id";
    /// The answer, as JSON.
    pub const BODY: &str = "body";
}

/// The orders table and the reports table.
#[derive(Debug, Clone)]
pub struct DynamoStore {
    client: Client,
    orders: String,
    reports: String,
}

impl DynamoStore {
    /// Read `orders`, write `reports`, through `client` (built once, at cold start).
    pub fn new(client: Client, orders: impl Into<String>, reports: impl Into<String>) -> Self {
        Self {
            client,
            orders: orders.into(),
            reports: reports.into(),
        }
    }
}

impl Store for DynamoStore {
    async fn scan_page(
        &self,
        segment: u32,
        total_segments: u32,
        start: Option<Item>,
    ) -> Result<Page, StoreError> {
        let mut request = self
            .client
            .scan()
            .table_name(&self.orders)
            .set_exclusive_start_key(start);
        if total_segments > 1 {
            let to_i32 = |v: u32| i32::try_from(v).unwrap_or(i32::MAX);
            request = request
                .segment(to_i32(segment))
                .total_segments(to_i32(total_segments));
        }
        // Attribute names through placeholders: some (`items`) are reserved words.
        let mut placeholders = Vec::with_capacity(PROJECTION.len());
        for (i, name) in PROJECTION.iter().enumerate() {
            let placeholder = format!("#a{i}");
            request = request.expression_attribute_names(&placeholder, *name);
            placeholders.push(placeholder);
        }
        let output = request
            .projection_expression(placeholders.join(", "))
            .send()
            .await
            .map_err(|e| StoreError(format!("Scan of {}: {}", self.orders, ErrorChain(&e))))?;
        Ok(Page {
            next: output
                .last_evaluated_key()
                .filter(|k| !k.is_empty())
                .cloned(),
            items: output.items.unwrap_or_default(),
        })
    }

    async fn save_report(&self, id: &str, body: String) -> Result<(), StoreError> {
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

//! The DynamoDB implementation of [`OrderStore`]: one conditional `PutItem` per
//! order, and nothing else.
//!
//! The condition `attribute_not_exists(order_id)` makes the write idempotent
//! across containers: a second delivery of the same order writes nothing, and
//! a different order under an existing id is never overwritten. When the
//! condition fails, DynamoDB returns the stored item
//! (`ReturnValuesOnConditionCheckFailure=ALL_OLD`) in the same response, so
//! telling "same order again" from "conflicting order" costs no second request.

use crate::order::ValidOrder;
use crate::store::{OrderStore, PutOutcome, StoreError};
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValuesOnConditionCheckFailure};
use shared::ErrorChain;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

/// Attribute names of an order item (the Arrow worker reads the same names).
pub use shared::orders::attr;

/// Orders in one DynamoDB table.
#[derive(Debug)]
pub struct DynamoStore {
    client: Client,
    table: String,
    requests: AtomicU64,
}

impl DynamoStore {
    /// A store writing to `table` through `client` (built once, at cold start).
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        Self {
            client,
            table: table.into(),
            requests: AtomicU64::new(0),
        }
    }

    /// Requests sent to DynamoDB so far (every attempt counts).
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }
}

/// The DynamoDB item for an order.
pub fn item(order: &ValidOrder) -> HashMap<String, AttributeValue> {
    let o = &order.order;
    let n = |v: u64| AttributeValue::N(v.to_string());
    let s = |v: &str| AttributeValue::S(v.to_owned());
    let items = o
        .items
        .iter()
        .map(|i| {
            AttributeValue::M(HashMap::from([
                (attr::SKU.to_owned(), s(&i.sku)),
                (attr::QUANTITY.to_owned(), n(u64::from(i.quantity))),
                (attr::UNIT_PRICE_CENTS.to_owned(), n(i.unit_price_cents)),
            ]))
        })
        .collect();
    HashMap::from([
        (attr::ORDER_ID.to_owned(), s(&o.order_id)),
        (attr::CUSTOMER_ID.to_owned(), s(&o.customer_id)),
        (attr::ITEMS.to_owned(), AttributeValue::L(items)),
        (attr::TOTAL_CENTS.to_owned(), n(o.total_cents)),
        (attr::TOTAL_QUANTITY.to_owned(), n(order.total_quantity)),
        (attr::CURRENCY.to_owned(), s(&o.currency)),
        (attr::CREATED_AT.to_owned(), s(&o.created_at)),
        (
            attr::CREATED_AT_MS.to_owned(),
            AttributeValue::N(order.created_at_ms.to_string()),
        ),
        (attr::CONTENT_HASH.to_owned(), s(&order.hash_hex())),
    ])
}

impl OrderStore for DynamoStore {
    async fn put_order(&self, order: &ValidOrder) -> Result<PutOutcome, StoreError> {
        self.requests.fetch_add(1, Ordering::Relaxed);
        let result = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item(order)))
            .condition_expression("attribute_not_exists(#id)")
            .expression_attribute_names("#id", attr::ORDER_ID)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        match result {
            Ok(_) => Ok(PutOutcome::Written),
            Err(err) => classify(err, order),
        }
    }
}

/// Turn a failed `PutItem` into an outcome or a (retryable or not) error.
fn classify(
    err: SdkError<PutItemError, aws_sdk_dynamodb::config::http::HttpResponse>,
    order: &ValidOrder,
) -> Result<PutOutcome, StoreError> {
    let service = match err {
        SdkError::ServiceError(service) => service.into_err(),
        // Timeouts, refused connections, garbled responses: the request may
        // not have arrived; the conditional write makes retrying it safe.
        SdkError::TimeoutError(_) | SdkError::DispatchFailure(_) | SdkError::ResponseError(_) => {
            return Err(StoreError::transient(format!(
                "DynamoDB unreachable: {}",
                ErrorChain(&err)
            )));
        }
        other => {
            return Err(StoreError::permanent(format!(
                "request not built: {}",
                ErrorChain(&other)
            )));
        }
    };
    match &service {
        PutItemError::ConditionalCheckFailedException(e) => {
            let stored_hash = e
                .item()
                .and_then(|item| item.get(attr::CONTENT_HASH))
                .and_then(|v| v.as_s().ok());
            Ok(match stored_hash {
                Some(hash) if *hash == order.hash_hex() => PutOutcome::AlreadyStored,
                _ => PutOutcome::Conflict,
            })
        }
        PutItemError::ProvisionedThroughputExceededException(_)
        | PutItemError::RequestLimitExceeded(_)
        | PutItemError::ThrottlingException(_)
        | PutItemError::InternalServerError(_) => Err(StoreError::transient(describe(&service))),
        _ => {
            let retryable = service
                .code()
                .is_some_and(|c| c.contains("Throttl") || c.contains("Unavailable"));
            Err(StoreError {
                retryable,
                message: describe(&service),
            })
        }
    }
}

fn describe(e: &PutItemError) -> String {
    format!(
        "{}: {}",
        e.code().unwrap_or("DynamoDB error"),
        e.message().unwrap_or("no message")
    )
}

//! The DynamoDB implementation of [`OrderStore`]: one conditional `PutItem` per
//! order, and nothing else.
//!
//! The condition `attribute_not_exists(order_id)` makes the write idempotent
//! across containers: a second delivery of the same order writes nothing, and
//! a different order under an existing id is never overwritten. When the
//! condition fails, DynamoDB returns the stored item
//! (`ReturnValuesOnConditionCheckFailure=ALL_OLD`) in the same response, so
//! telling "same order again" from "conflicting order" costs no second request.
//! The stored item's `hash_version` says which canonical form its
//! `content_hash` was computed from (see `order::content_hash`); an item of a
//! version this code does not know is a conflict, never overwritten.
//!
//! A write whose attempt was cut off (`retry.rs`) may have been applied
//! anyway: the retry then finds the item with the same hash, "already stored".

use crate::order::ValidOrder;
use crate::order::content_hash::HASH_VERSION;
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
    let mut item = HashMap::from([
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
        (attr::HASH_VERSION.to_owned(), n(u64::from(HASH_VERSION))),
    ]);
    // Validated times are within `time`'s range, so the day always exists.
    if let Some(key) = shared::orders::day_shard(&o.order_id, order.created_at_ms) {
        item.insert(attr::DAY_SHARD.to_owned(), AttributeValue::S(key));
    }
    item
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
        PutItemError::ConditionalCheckFailedException(e) => Ok(match e.item() {
            Some(item) if is_stored_as(item, order) => PutOutcome::AlreadyStored,
            _ => PutOutcome::Conflict,
        }),
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

/// Whether the stored `item` is `order`: same content hash, in the item's
/// `hash_version` (absent: 0, the first release's).
fn is_stored_as(item: &HashMap<String, AttributeValue>, order: &ValidOrder) -> bool {
    let Some(hash) = item.get(attr::CONTENT_HASH).and_then(|v| v.as_s().ok()) else {
        return false;
    };
    let version = match item.get(attr::HASH_VERSION) {
        None => Some(0),
        Some(v) => v.as_n().ok().and_then(|n| n.parse::<u32>().ok()),
    };
    version.is_some_and(|version| order.is_stored_as(hash, version))
}

fn describe(e: &PutItemError) -> String {
    format!(
        "{}: {}",
        e.code().unwrap_or("DynamoDB error"),
        e.message().unwrap_or("no message")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::order::{content_hash, parse};

    fn sample() -> ValidOrder {
        parse(r#"{"order_id":"o-1","customer_id":"c-1","items":[{"sku":"A","quantity":2,"unit_price_cents":250}],"total_cents":500,"currency":"EUR","created_at":"2026-11-20T09:15:00+00:00"}"#)
            .expect("valid")
    }

    #[test]
    fn the_item_carries_the_hash_and_its_version() {
        let order = sample();
        let item = item(&order);
        assert_eq!(
            item.get(attr::CONTENT_HASH),
            Some(&AttributeValue::S(order.hash_hex()))
        );
        assert_eq!(
            item.get(attr::HASH_VERSION),
            Some(&AttributeValue::N(HASH_VERSION.to_string()))
        );
        assert!(is_stored_as(&item, &order));
    }

    #[test]
    fn the_item_is_indexed_under_its_utc_day() {
        let order = sample();
        let key = item(&order)
            .get(attr::DAY_SHARD)
            .and_then(|v| v.as_s().ok())
            .cloned()
            .unwrap_or_default();
        let day = shared::orders::day_of(order.created_at_ms).unwrap_or_default();
        assert!(key.starts_with(&format!("{day}#")), "{key} for {day}");
    }

    #[test]
    fn a_stored_item_is_compared_in_its_own_version() {
        let order = sample();
        let v0 = content_hash::hash(&order.order, order.created_at_ms, 0).expect("version 0");
        // Written by the first release: no hash_version, the version 0 hash.
        let mut first_release = item(&order);
        first_release.remove(attr::HASH_VERSION);
        first_release.insert(
            attr::CONTENT_HASH.into(),
            AttributeValue::S(hex::encode(v0)),
        );
        assert!(is_stored_as(&first_release, &order));
        // Another order under the same id, in either version: a conflict.
        let mut other = order.clone();
        other.order.customer_id = "c-2".into();
        let other = crate::order::validate(other.order).expect("valid");
        assert!(!is_stored_as(&first_release, &other));
        assert!(!is_stored_as(&item(&order), &other));
        // A version this release does not know, or no hash: never "the same".
        let mut newer = item(&order);
        newer.insert(
            attr::HASH_VERSION.into(),
            AttributeValue::N((HASH_VERSION + 1).to_string()),
        );
        assert!(!is_stored_as(&newer, &order));
        let mut garbled = item(&order);
        garbled.insert(attr::HASH_VERSION.into(), AttributeValue::S("1".into()));
        assert!(!is_stored_as(&garbled, &order));
        let mut no_hash = item(&order);
        no_hash.remove(attr::CONTENT_HASH);
        assert!(!is_stored_as(&no_hash, &order));
    }
}

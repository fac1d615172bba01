//! The DynamoDB implementation of [`OrderStore`]: one conditional `PutItem` per
//! order, and nothing else (but the `GetItem` that opens connections at init,
//! [`DynamoStore::answers`]).
//!
//! The condition `attribute_not_exists(order_id)` makes the write idempotent
//! across containers: a second delivery of the same order writes nothing, and
//! a different order under an existing id is never overwritten. When the
//! condition fails, DynamoDB returns the stored item
//! (`ReturnValuesOnConditionCheckFailure=ALL_OLD`) in the same response, so
//! telling "same order again" from "conflicting order" costs no second request.
//! The stored item's `hash_version` says which canonical form its
//! `content_hash` was computed from (see `order::content_hash`). An item of a
//! version newer than this code knows was stored by a newer release (this one
//! runs after a rollback): it cannot say "same order" or "conflict", so it
//! answers [`PutOutcome::NewerVersion`] and leaves the record to that release.
//! Either way the item is never overwritten.
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

/// The `order_id` that [`DynamoStore::answers`] reads. No order has it, so
/// reading it reads nothing: `#` is not among the characters an order's id
/// may hold (`A-Z a-z 0-9 - _ . :`, checked by `order::validate`).
/// template.yaml's `OrderProcessorRole` allows `GetItem` of this key alone:
/// change both together (a denied read still opens the connection).
pub const CONNECTION_CHECK_ID: &str = "#connection-check";

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

    /// Order writes sent to DynamoDB so far (every attempt counts; not the
    /// connection checks of [`answers`](Self::answers)).
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    /// Read [`CONNECTION_CHECK_ID`], its key alone: opens a connection during
    /// init (`shared::connections`). A data-plane read that can change
    /// nothing. Not `DescribeTable`: DynamoDB throttles its control plane
    /// account-wide (2,500 requests a second), and `main.rs` makes one call
    /// per connection, `WRITE_CONCURRENCY` of them (at most 64, `config.rs`)
    /// per cold start, so a scale-out of many environments would be
    /// throttled. Every environment reads the same key: DynamoDB throttles
    /// reads apart from writes, so at worst these reads are throttled (an
    /// answer all the same), never the orders' writes. `true` if DynamoDB
    /// answered, even with an error.
    pub async fn answers(&self) -> bool {
        let answer = self
            .client
            .get_item()
            .table_name(&self.table)
            .key(
                attr::ORDER_ID,
                AttributeValue::S(CONNECTION_CHECK_ID.to_owned()),
            )
            .projection_expression("#id")
            .expression_attribute_names("#id", attr::ORDER_ID)
            .send()
            .await;
        answer.map_or_else(|e| e.raw_response().is_some(), |_| true)
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
        PutItemError::ConditionalCheckFailedException(e) => Ok(found(e.item(), order)),
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

/// What the write found stored under `order`'s id (`item`, returned with the
/// failed condition). The same order: same content hash, in the item's
/// `hash_version` (absent: 0, the first release's). A version newer than this
/// code knows: [`PutOutcome::NewerVersion`], whatever else the item holds
/// (that release may store it differently). Anything else, a garbled version
/// or no hash included, is a conflict.
fn found(item: Option<&HashMap<String, AttributeValue>>, order: &ValidOrder) -> PutOutcome {
    let Some(item) = item else {
        return PutOutcome::Conflict;
    };
    let version = match item.get(attr::HASH_VERSION) {
        None => Some(0),
        Some(v) => v.as_n().ok().and_then(|n| n.parse::<u64>().ok()),
    };
    let hash = item.get(attr::CONTENT_HASH).and_then(|v| v.as_s().ok());
    match (version, hash) {
        (Some(version), _) if version > u64::from(HASH_VERSION) => {
            PutOutcome::NewerVersion(version)
        }
        (Some(version), Some(hash))
            if u32::try_from(version).is_ok_and(|v| order.is_stored_as(hash, v)) =>
        {
            PutOutcome::AlreadyStored
        }
        _ => PutOutcome::Conflict,
    }
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
        assert_eq!(found(Some(&item), &order), PutOutcome::AlreadyStored);
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
        assert_eq!(
            found(Some(&item(&order)), &order),
            PutOutcome::AlreadyStored
        );
        // Written by the first release: no hash_version, the version 0 hash.
        let mut first_release = item(&order);
        first_release.remove(attr::HASH_VERSION);
        first_release.insert(
            attr::CONTENT_HASH.into(),
            AttributeValue::S(hex::encode(v0)),
        );
        assert_eq!(
            found(Some(&first_release), &order),
            PutOutcome::AlreadyStored
        );
        // Another order under the same id, in either version: a conflict.
        let other = other_customer(&order);
        assert_eq!(found(Some(&first_release), &other), PutOutcome::Conflict);
        assert_eq!(found(Some(&item(&order)), &other), PutOutcome::Conflict);
        // A garbled version, no hash, no item: never "the same".
        let mut garbled = item(&order);
        garbled.insert(attr::HASH_VERSION.into(), AttributeValue::S("1".into()));
        assert_eq!(found(Some(&garbled), &order), PutOutcome::Conflict);
        garbled.insert(attr::HASH_VERSION.into(), AttributeValue::N("-1".into()));
        assert_eq!(found(Some(&garbled), &order), PutOutcome::Conflict);
        let mut no_hash = item(&order);
        no_hash.remove(attr::CONTENT_HASH);
        assert_eq!(found(Some(&no_hash), &order), PutOutcome::Conflict);
        assert_eq!(found(None, &order), PutOutcome::Conflict);
    }

    #[test]
    fn an_item_of_a_newer_version_is_left_to_its_release() {
        let order = sample();
        let newer = u64::from(HASH_VERSION) + 1;
        for stored in [&order, &other_customer(&order)] {
            let mut item = item(stored);
            item.insert(
                attr::HASH_VERSION.into(),
                AttributeValue::N(newer.to_string()),
            );
            assert_eq!(found(Some(&item), &order), PutOutcome::NewerVersion(newer));
            // That release may store its hash differently, or not at all.
            item.remove(attr::CONTENT_HASH);
            assert_eq!(found(Some(&item), &order), PutOutcome::NewerVersion(newer));
        }
        let mut far = item(&order);
        far.insert(
            attr::HASH_VERSION.into(),
            AttributeValue::N(u64::MAX.to_string()),
        );
        assert_eq!(
            found(Some(&far), &order),
            PutOutcome::NewerVersion(u64::MAX)
        );
    }

    fn other_customer(order: &ValidOrder) -> ValidOrder {
        let mut other = order.order.clone();
        other.customer_id = "c-2".into();
        crate::order::validate(other).expect("valid")
    }

    #[test]
    fn the_connection_check_key_is_never_an_order_id() {
        let body = format!(
            r#"{{"order_id":"{CONNECTION_CHECK_ID}","customer_id":"c-1","items":[{{"sku":"A","quantity":1,"unit_price_cents":1}}],"total_cents":1,"currency":"EUR","created_at":"2026-11-20T09:15:00Z"}}"#
        );
        let invalid = parse(&body).expect_err("not an order id");
        assert_eq!(invalid.class(), "schema");
        assert!(invalid.to_string().contains("order_id"), "{invalid}");
    }
}

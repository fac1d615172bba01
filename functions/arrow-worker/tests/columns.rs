//! DynamoDB items to Arrow: well-formed items become rows keyed by the
//! grouping, malformed ones are classified and counted, a page is one batch.

use arrow_worker::columns::{Flaw, day_of, read, schema, to_batch};
use arrow_worker::query::GroupBy;
use arrow_worker_testkit::orders::order_item;
use aws_sdk_dynamodb::types::AttributeValue;
use shared::orders::attr;
use std::collections::HashMap;

#[test]
fn well_formed_items_become_rows_keyed_by_the_grouping() {
    let item = order_item("cust-1", "EUR", 1_763_629_200_000, 3999, 2);
    assert_eq!(read(&item, GroupBy::Customer).unwrap().key, "cust-1");
    assert_eq!(read(&item, GroupBy::Currency).unwrap().key, "EUR");
    assert_eq!(read(&item, GroupBy::Day).unwrap().key, "2025-11-20");
    assert_eq!(day_of(-1).as_deref(), Some("1969-12-31"));
}

#[test]
fn malformed_items_are_classified() {
    let good = order_item("c", "EUR", 0, 1, 1);
    let with = |name: &str, value: Option<AttributeValue>| {
        let mut item = good.clone();
        match value {
            Some(v) => item.insert(name.into(), v),
            None => item.remove(name),
        };
        item
    };
    let n = |s: &str| Some(AttributeValue::N(s.into()));
    let cases = [
        (with(attr::TOTAL_CENTS, None), Flaw::Missing),
        (with(attr::CUSTOMER_ID, None), Flaw::Missing),
        (
            with(attr::TOTAL_CENTS, Some(AttributeValue::S("12".into()))),
            Flaw::WrongType,
        ),
        (with(attr::TOTAL_CENTS, n("1.5")), Flaw::WrongType),
        (with(attr::TOTAL_CENTS, n("-1")), Flaw::OutOfRange),
        (
            with(attr::TOTAL_CENTS, n("1000000000001")),
            Flaw::OutOfRange,
        ),
        (with(attr::TOTAL_QUANTITY, n("0")), Flaw::OutOfRange),
        (
            with(attr::CREATED_AT_MS, n("99999999999999999999999")),
            Flaw::OutOfRange,
        ),
        (with(attr::CREATED_AT_MS, n("1e3")), Flaw::WrongType),
        (
            with(attr::CUSTOMER_ID, Some(AttributeValue::Bool(true))),
            Flaw::WrongType,
        ),
        (
            with(attr::CUSTOMER_ID, Some(AttributeValue::S(String::new()))),
            Flaw::OutOfRange,
        ),
    ];
    for (item, flaw) in cases {
        assert_eq!(read(&item, GroupBy::Customer), Err(flaw), "{item:?}");
    }
    let bad_currency = with(attr::CURRENCY, Some(AttributeValue::S("eur".into())));
    assert_eq!(
        read(&bad_currency, GroupBy::Currency),
        Err(Flaw::OutOfRange)
    );
    // A day far outside what time can represent.
    let far = with(attr::CREATED_AT_MS, n(&i64::MAX.to_string()));
    assert_eq!(read(&far, GroupBy::Day), Err(Flaw::OutOfRange));
}

#[test]
fn a_page_becomes_a_batch_and_a_count_of_skips() {
    let mut items = vec![
        order_item("a", "EUR", 0, 5, 1),
        order_item("b", "USD", 1, 7, 2),
    ];
    items.push(HashMap::new());
    let (batch, skipped) = to_batch(&items, GroupBy::Customer);
    assert_eq!(batch.num_rows(), 2);
    assert_eq!(batch.schema(), schema());
    assert_eq!(skipped.missing_field, 1);
    assert_eq!(to_batch(&[], GroupBy::Day).0.num_rows(), 0);
}

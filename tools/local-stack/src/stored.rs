//! Where the items a queue's function stored are looked for, knowing nothing
//! of what it stores: the expectations name the ids that must end stored
//! ([`crate::events::stored_orders_through_queue`]); an id is stored when it
//! is the partition key of an item of any table of the template. Every
//! table, because nothing says which one a function writes to (its
//! environment may name several, or none); the partition key, because an id
//! that ends stored is what the item is found by.

use crate::elasticmq::error_text;
use crate::template::Template;
use aws_sdk_dynamodb::types::AttributeValue;
use serde_norway::Value;
use std::collections::{BTreeMap, BTreeSet};

/// A table of the template (its logical id, its name locally) and the
/// attribute of its partition key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Table {
    pub name: String,
    pub partition_key: String,
}

/// Every `AWS::DynamoDB::Table` of the template with the `HASH` attribute of
/// its `KeySchema`.
pub(crate) fn tables(template: &Template) -> Result<Vec<Table>, String> {
    template
        .resources("AWS::DynamoDB::Table")
        .into_iter()
        .map(|(name, resource)| {
            let schema = resource
                .get("Properties")
                .and_then(|p| p.get("KeySchema"))
                .and_then(Value::as_sequence)
                .ok_or_else(|| format!("table {name}: no KeySchema"))?;
            let partition_key = schema
                .iter()
                .find(|key| key.get("KeyType").and_then(Value::as_str) == Some("HASH"))
                .and_then(|key| key.get("AttributeName").and_then(Value::as_str))
                .ok_or_else(|| format!("table {name}: no HASH key in its KeySchema"))?
                .to_owned();
            Ok(Table {
                name,
                partition_key,
            })
        })
        .collect()
}

/// Of `ids`, those found as the partition key of an item of one of
/// `tables`, by table (only the tables holding some).
pub(crate) async fn find(
    client: &aws_sdk_dynamodb::Client,
    tables: &[Table],
    ids: &BTreeSet<String>,
) -> Result<BTreeMap<String, BTreeSet<String>>, String> {
    let mut found = BTreeMap::new();
    for table in tables {
        let keys = partition_keys(client, table).await?;
        let held = held(keys, ids);
        if !held.is_empty() {
            found.insert(table.name.clone(), held);
        }
    }
    Ok(found)
}

/// Every partition key value of `table`'s items (a number's digits too).
pub(crate) async fn partition_keys(
    client: &aws_sdk_dynamodb::Client,
    table: &Table,
) -> Result<Vec<String>, String> {
    let mut pages = client
        .scan()
        .table_name(&table.name)
        .consistent_read(true)
        .projection_expression("#key")
        .expression_attribute_names("#key", &table.partition_key)
        .into_paginator()
        .items()
        .send();
    let mut keys = Vec::new();
    while let Some(item) = pages.next().await {
        let item = item.map_err(|e| format!("scan {}: {}", table.name, error_text(&e)))?;
        if let Some(AttributeValue::S(key) | AttributeValue::N(key)) =
            item.get(&table.partition_key)
        {
            keys.push(key.clone());
        }
    }
    Ok(keys)
}

/// The `keys` that are among `ids`.
fn held(keys: Vec<String>, ids: &BTreeSet<String>) -> BTreeSet<String> {
    keys.into_iter().filter(|key| ids.contains(key)).collect()
}

/// The ids of `found`, whichever table holds them.
pub(crate) fn all(found: &BTreeMap<String, BTreeSet<String>>) -> BTreeSet<String> {
    found.values().flatten().cloned().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_table_is_found_by_its_partition_key() {
        let template = Template::parse(
            r"
Resources:
  Items:
    Type: AWS::DynamoDB::Table
    Properties:
      KeySchema:
        - { AttributeName: day, KeyType: RANGE }
        - { AttributeName: id, KeyType: HASH }
  Queue: { Type: AWS::SQS::Queue }
  Other:
    Type: AWS::DynamoDB::Table
    Properties:
      KeySchema: [{ AttributeName: other_id, KeyType: HASH }]
",
        )
        .expect("template");
        let table = |name: &str, key: &str| Table {
            name: name.into(),
            partition_key: key.into(),
        };
        assert_eq!(
            tables(&template),
            Ok(vec![table("Items", "id"), table("Other", "other_id")])
        );
        let broken = Template::parse(
            "Resources:\n  T: { Type: AWS::DynamoDB::Table, Properties: { KeySchema: [] } }\n",
        )
        .expect("template");
        assert_eq!(
            tables(&broken),
            Err("table T: no HASH key in its KeySchema".into())
        );
        let none = Template::parse("Resources: {}\n").expect("template");
        assert_eq!(tables(&none), Ok(vec![]));
    }

    #[test]
    fn only_the_expected_ids_count_each_once() {
        let ids: BTreeSet<String> = ["a", "b", "c"].map(String::from).into();
        let keys = ["b", "x", "a", "b"].map(String::from).to_vec();
        assert_eq!(held(keys, &ids), ["a", "b"].map(String::from).into());
        let found = BTreeMap::from([
            ("T1".to_owned(), BTreeSet::from(["a".to_owned()])),
            (
                "T2".to_owned(),
                BTreeSet::from(["a".to_owned(), "c".to_owned()]),
            ),
        ]);
        assert_eq!(all(&found), ["a", "c"].map(String::from).into());
    }
}

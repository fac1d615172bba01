//! DynamoDB items to Arrow: one [`RecordBatch`] per scan page, with only the
//! columns the analytics read. Malformed items are counted, never fatal. Every
//! row carries its currency, whatever the grouping: money is summed per
//! currency, so an order without a valid currency is skipped.

use crate::answer::Skipped;
use crate::query::GroupBy;
use arrow_array::builder::{Int64Builder, StringBuilder, UInt64Builder};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use aws_sdk_dynamodb::types::AttributeValue;
use shared::orders::{MAX_AMOUNT_CENTS, MAX_ID_LEN, MAX_TOTAL_QUANTITY, attr};
use std::collections::HashMap;
use std::sync::{Arc, LazyLock};

/// A DynamoDB item as the SDK returns it.
pub type Item = HashMap<String, AttributeValue>;

/// Column positions in every batch.
pub const KEY: usize = 0;
/// `currency`.
pub const CURRENCY: usize = 1;
/// Creation time, milliseconds since the epoch.
pub const CREATED_AT_MS: usize = 2;
/// `total_cents`.
pub const TOTAL_CENTS: usize = 3;
/// `total_quantity`.
pub const QUANTITY: usize = 4;

/// The attributes a scan needs to read (its projection).
pub const PROJECTION: [&str; 5] = [
    attr::CUSTOMER_ID,
    attr::CURRENCY,
    attr::CREATED_AT_MS,
    attr::TOTAL_CENTS,
    attr::TOTAL_QUANTITY,
];

/// The schema of every batch: the group key, the currency, then the values.
pub fn schema() -> SchemaRef {
    static SCHEMA: LazyLock<SchemaRef> = LazyLock::new(|| {
        Arc::new(Schema::new(vec![
            Field::new("key", DataType::Utf8, false),
            Field::new(attr::CURRENCY, DataType::Utf8, false),
            Field::new(attr::CREATED_AT_MS, DataType::Int64, false),
            Field::new(attr::TOTAL_CENTS, DataType::UInt64, false),
            Field::new(attr::TOTAL_QUANTITY, DataType::UInt64, false),
        ]))
    });
    SCHEMA.clone()
}

/// Why an item was skipped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flaw {
    /// An attribute is absent.
    Missing,
    /// An attribute has the wrong type or does not parse.
    WrongType,
    /// A value is outside the order schema's limits.
    OutOfRange,
}

impl Skipped {
    fn count(&mut self, flaw: Flaw) {
        match flaw {
            Flaw::Missing => self.missing_field += 1,
            Flaw::WrongType => self.wrong_type += 1,
            Flaw::OutOfRange => self.out_of_range += 1,
        }
    }
}

/// One well-formed order's analytics columns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    /// The group key.
    pub key: String,
    /// The currency of `total_cents`.
    pub currency: String,
    /// Creation time, ms since the epoch.
    pub created_at_ms: i64,
    /// Order total.
    pub total_cents: u64,
    /// Units ordered.
    pub quantity: u64,
}

fn get<'a>(item: &'a Item, name: &str) -> Result<&'a AttributeValue, Flaw> {
    item.get(name).ok_or(Flaw::Missing)
}

fn string<'a>(item: &'a Item, name: &str) -> Result<&'a str, Flaw> {
    get(item, name)?
        .as_s()
        .map(String::as_str)
        .map_err(|_| Flaw::WrongType)
}

/// A number attribute within `range`.
fn number(item: &Item, name: &str, range: std::ops::RangeInclusive<i128>) -> Result<i128, Flaw> {
    let text = get(item, name)?.as_n().map_err(|_| Flaw::WrongType)?;
    let value: i128 = text.parse().map_err(|_| Flaw::WrongType)?;
    if range.contains(&value) {
        Ok(value)
    } else {
        Err(Flaw::OutOfRange)
    }
}

pub use shared::orders::day_of;

/// Whether `code` has the form of an ISO 4217 currency code: three letters A-Z.
pub fn is_currency_code(code: &str) -> bool {
    code.len() == 3 && code.bytes().all(|b| b.is_ascii_uppercase())
}

/// Read one item, or say what is wrong with it.
pub fn read(item: &Item, group_by: GroupBy) -> Result<Row, Flaw> {
    let created_at_ms = number(item, attr::CREATED_AT_MS, i64::MIN.into()..=i64::MAX.into())?;
    let created_at_ms = i64::try_from(created_at_ms).map_err(|_| Flaw::OutOfRange)?;
    let as_u64 = |v: i128| u64::try_from(v).map_err(|_| Flaw::OutOfRange);
    let total_cents = as_u64(number(
        item,
        attr::TOTAL_CENTS,
        0..=MAX_AMOUNT_CENTS.into(),
    )?)?;
    let quantity = as_u64(number(
        item,
        attr::TOTAL_QUANTITY,
        1..=MAX_TOTAL_QUANTITY.into(),
    )?)?;
    let currency = string(item, attr::CURRENCY)?;
    if !is_currency_code(currency) {
        return Err(Flaw::OutOfRange);
    }
    let key = match group_by {
        GroupBy::Customer => {
            let id = string(item, attr::CUSTOMER_ID)?;
            if id.is_empty() || id.len() > MAX_ID_LEN {
                return Err(Flaw::OutOfRange);
            }
            id.to_owned()
        }
        GroupBy::Currency => currency.to_owned(),
        GroupBy::Day => day_of(created_at_ms).ok_or(Flaw::OutOfRange)?,
    };
    Ok(Row {
        key,
        currency: currency.to_owned(),
        created_at_ms,
        total_cents,
        quantity,
    })
}

/// The rows of one page as a batch, and the items skipped.
pub fn to_batch(items: &[Item], group_by: GroupBy) -> (RecordBatch, Skipped) {
    let mut skipped = Skipped::default();
    let mut key = StringBuilder::with_capacity(items.len(), items.len() * 16);
    let mut currency = StringBuilder::with_capacity(items.len(), items.len() * 3);
    let mut created = Int64Builder::with_capacity(items.len());
    let mut total = UInt64Builder::with_capacity(items.len());
    let mut quantity = UInt64Builder::with_capacity(items.len());
    for item in items {
        match read(item, group_by) {
            Ok(row) => {
                key.append_value(&row.key);
                currency.append_value(&row.currency);
                created.append_value(row.created_at_ms);
                total.append_value(row.total_cents);
                quantity.append_value(row.quantity);
            }
            Err(flaw) => skipped.count(flaw),
        }
    }
    let columns: Vec<ArrayRef> = vec![
        Arc::new(key.finish()),
        Arc::new(currency.finish()),
        Arc::new(created.finish()),
        Arc::new(total.finish()),
        Arc::new(quantity.finish()),
    ];
    // The columns match the schema by construction (same types, same length,
    // no nulls), so this cannot fail; an empty batch is the safe answer if it did.
    let batch = RecordBatch::try_new(schema(), columns)
        .unwrap_or_else(|_| RecordBatch::new_empty(schema()));
    (batch, skipped)
}

//! The order schema, in one place, and its validation.
//!
//! ```json
//! {"order_id": "ord-0001", "customer_id": "cust-042",
//!  "items": [{"sku": "BOOK-RUST-2E", "quantity": 1, "unit_price_cents": 3999}],
//!  "total_cents": 3999, "currency": "EUR", "created_at": "2026-11-20T09:15:00Z"}
//! ```
//!
//! Unknown fields are rejected: a typo (`"totl_cents"`) must not pass as an order.
//! What makes two orders the same is in [`content_hash`].

pub mod content_hash;

use serde::{Deserialize, Serialize};
use std::fmt;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// Largest message body accepted, in bytes (SQS allows more; orders are small).
pub const MAX_BODY_BYTES: usize = 64 * 1024;
/// Limits shared with the Arrow worker, which reads the stored orders back.
pub use shared::orders::{MAX_AMOUNT_CENTS, MAX_ID_LEN, MAX_ITEMS, MAX_QUANTITY};

/// One order, exactly as a message body carries it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Order {
    /// Unique per order; the DynamoDB key.
    pub order_id: String,
    /// Who ordered.
    pub customer_id: String,
    /// What was ordered (1 to [`MAX_ITEMS`]).
    pub items: Vec<Item>,
    /// Sum of `quantity * unit_price_cents` over the items.
    pub total_cents: u64,
    /// ISO 4217 code, upper case (`EUR`).
    pub currency: String,
    /// RFC 3339 timestamp (`2026-11-20T09:15:00Z`).
    pub created_at: String,
}

/// One line of an order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Item {
    /// Stock-keeping unit.
    pub sku: String,
    /// Units, 1 to [`MAX_QUANTITY`].
    pub quantity: u32,
    /// Price of one unit in cents, at most [`MAX_AMOUNT_CENTS`].
    pub unit_price_cents: u64,
}

/// An order that passed validation, with what storage needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidOrder {
    /// The order.
    pub order: Order,
    /// `created_at` as milliseconds since the Unix epoch (UTC).
    pub created_at_ms: i64,
    /// Total units over all items.
    pub total_quantity: u64,
    /// SHA-256 of the order's canonical form, version
    /// [`HASH_VERSION`](content_hash::HASH_VERSION): same order, same hash.
    pub content_hash: [u8; 32],
}

impl ValidOrder {
    /// The content hash in hex, as stored.
    pub fn hash_hex(&self) -> String {
        hex::encode(self.content_hash)
    }

    /// Whether a stored item with content hash `stored_hex`, computed in
    /// `version`, is this order. `false` for a version this code does not
    /// know (a newer release stored it): not provably the same order, so
    /// never acknowledged as stored (`dynamodb.rs` tells such an item apart
    /// first, and leaves its record to that release).
    pub fn is_stored_as(&self, stored_hex: &str, version: u32) -> bool {
        let hash = if version == content_hash::HASH_VERSION {
            Some(self.content_hash)
        } else {
            content_hash::hash(&self.order, self.created_at_ms, version)
        };
        hash.is_some_and(|hash| hex::encode(hash) == stored_hex)
    }
}

/// Why a body is not a valid order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Invalid {
    /// The body is empty.
    EmptyBody,
    /// The body is larger than [`MAX_BODY_BYTES`].
    TooLarge(usize),
    /// Not JSON at all.
    Json(String),
    /// JSON, but not an order (missing field, wrong type, unknown field) or a
    /// field breaks a rule.
    Schema(String),
}

impl Invalid {
    /// Short class for metrics and logs.
    pub fn class(&self) -> &'static str {
        match self {
            Invalid::EmptyBody => "empty_body",
            Invalid::TooLarge(_) => "too_large",
            Invalid::Json(_) => "invalid_json",
            Invalid::Schema(_) => "schema",
        }
    }
}

impl fmt::Display for Invalid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Invalid::EmptyBody => f.write_str("empty body"),
            Invalid::TooLarge(n) => write!(f, "body of {n} bytes exceeds {MAX_BODY_BYTES}"),
            Invalid::Json(e) => write!(f, "not JSON: {e}"),
            Invalid::Schema(e) => write!(f, "not a valid order: {e}"),
        }
    }
}

fn schema(reason: impl Into<String>) -> Invalid {
    Invalid::Schema(reason.into())
}

/// Parse and validate a message body.
pub fn parse(body: &str) -> Result<ValidOrder, Invalid> {
    if body.trim().is_empty() {
        return Err(Invalid::EmptyBody);
    }
    if body.len() > MAX_BODY_BYTES {
        return Err(Invalid::TooLarge(body.len()));
    }
    // serde would also read an order from an array of its fields in order:
    // only the documented object form is an order.
    if body.trim_start().starts_with('[') {
        return Err(schema("an order is a JSON object, not an array"));
    }
    let mut json = serde_json::Deserializer::from_str(body);
    let order: Order = serde_path_to_error::deserialize(&mut json).map_err(|e| {
        let reason = without_values(e.inner());
        // An unknown field's path ends with its key, which the body chose.
        let known = !reason.starts_with("unknown field");
        let path = field_path(e.path(), known);
        match e.inner().classify() {
            serde_json::error::Category::Data => schema(at(&path, &reason)),
            _ => Invalid::Json(reason),
        }
    })?;
    json.end().map_err(|e| Invalid::Json(without_values(&e)))?;
    validate(order)
}

/// Where in the body (`items[0].quantity`), without its last key unless
/// `last_key` (the schema's).
fn field_path(path: &serde_path_to_error::Path, last_key: bool) -> String {
    use serde_path_to_error::Segment;
    let segments: Vec<&Segment> = path.iter().collect();
    let keep = match segments.last() {
        Some(Segment::Map { .. }) if !last_key => segments.len() - 1,
        _ => segments.len(),
    };
    let mut out = String::new();
    for segment in &segments[..keep] {
        match segment {
            Segment::Seq { index } => out.push_str(&format!("[{index}]")),
            Segment::Map { key } | Segment::Enum { variant: key } => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(key);
            }
            Segment::Unknown => out.push('?'),
        }
    }
    out
}

/// A reason at `path` (empty for the whole body).
fn at(path: &str, reason: &str) -> String {
    if path.is_empty() {
        reason.to_owned()
    } else {
        format!("{path}: {reason}")
    }
}

/// serde's message without the body's values it can quote: what was found
/// (its kind: `string`, `integer`, a key), what was expected, and where; so
/// no part of a message body reaches a log line or a dead letter's reason.
/// `invalid type: string "hunter2", expected u32 at line 1 column 9` becomes
/// `invalid type: string, expected u32 at line 1 column 9`.
fn without_values(e: &serde_json::Error) -> String {
    let message = e.to_string();
    let message = message.split(" at line ").next().unwrap_or(&message);
    let (found, expected) = match message.split_once(", expected ") {
        Some((found, expected)) => (found, Some(expected)),
        None => (message, None),
    };
    // The field names of `missing field` and `duplicate field` are the
    // schema's own; any other quoted word came from the body.
    let schema_names = found.starts_with("missing field") || found.starts_with("duplicate field");
    let found = if schema_names {
        found
    } else {
        found
            .split(['`', '"'])
            .next()
            .unwrap_or_default()
            .trim_end()
    };
    let mut reason = match expected {
        Some(expected) => format!("{found}, expected {expected}"),
        None => found.to_owned(),
    };
    if e.line() > 0 {
        reason.push_str(&format!(" at line {} column {}", e.line(), e.column()));
    }
    reason
}

/// Check every rule of an order and compute what storage needs.
pub fn validate(order: Order) -> Result<ValidOrder, Invalid> {
    check_id("order_id", &order.order_id)?;
    check_id("customer_id", &order.customer_id)?;
    if order.items.is_empty() || order.items.len() > MAX_ITEMS {
        let given = if order.items.is_empty() {
            "none"
        } else {
            "too many"
        };
        return Err(schema(format!(
            "items: {given} given, 1 to {MAX_ITEMS} allowed"
        )));
    }
    let mut sum: u64 = 0;
    let mut total_quantity: u64 = 0;
    for (i, item) in order.items.iter().enumerate() {
        check_id("sku", &item.sku).map_err(|e| match e {
            Invalid::Schema(reason) => schema(format!("items[{i}].{reason}")),
            other => other,
        })?;
        if item.quantity == 0 || item.quantity > MAX_QUANTITY {
            return Err(schema(format!(
                "items[{i}].quantity must be 1 to {MAX_QUANTITY}"
            )));
        }
        if item.unit_price_cents > MAX_AMOUNT_CENTS {
            return Err(schema(format!(
                "items[{i}].unit_price_cents exceeds {MAX_AMOUNT_CENTS}"
            )));
        }
        sum = u64::from(item.quantity)
            .checked_mul(item.unit_price_cents)
            .and_then(|line| sum.checked_add(line))
            .filter(|s| *s <= MAX_AMOUNT_CENTS)
            .ok_or_else(|| {
                schema(format!(
                    "the items add up to more than {MAX_AMOUNT_CENTS} cents"
                ))
            })?;
        total_quantity += u64::from(item.quantity);
    }
    if order.total_cents != sum {
        return Err(schema("total_cents is not the sum of the items"));
    }
    if !ISO_4217.split(' ').any(|code| code == order.currency) {
        return Err(schema("currency is not an ISO 4217 code"));
    }
    let created = OffsetDateTime::parse(&order.created_at, &Rfc3339)
        .map_err(|_| schema("created_at is not an RFC 3339 timestamp"))?;
    // Whole milliseconds, rounded down (also before 1970).
    let created_at_ms = i64::try_from(created.unix_timestamp_nanos().div_euclid(1_000_000))
        .map_err(|_| schema("created_at is out of range"))?;
    Ok(ValidOrder {
        content_hash: content_hash::current(&order, created_at_ms),
        order,
        created_at_ms,
        total_quantity,
    })
}

/// Identifiers: 1 to 64 bytes of ASCII letters, digits, `-`, `_`, `.`, `:`.
fn check_id(field: &str, value: &str) -> Result<(), Invalid> {
    let charset_ok = value
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':'));
    if value.is_empty() || value.len() > MAX_ID_LEN || !charset_ok {
        return Err(schema(format!(
            "{field} must be 1 to {MAX_ID_LEN} characters of A-Z a-z 0-9 - _ . :"
        )));
    }
    Ok(())
}

/// Active ISO 4217 currency codes (precious metals, funds and test codes excluded).
const ISO_4217: &str = "AED AFN ALL AMD AOA ARS AUD AWG AZN BAM BBD BDT BGN BHD BIF BMD BND BOB \
BRL BSD BTN BWP BYN BZD CAD CDF CHF CLP CNY COP CRC CUP CVE CZK DJF DKK DOP DZD EGP ERN ETB EUR \
FJD FKP GBP GEL GHS GIP GMD GNF GTQ GYD HKD HNL HTG HUF IDR ILS INR IQD IRR ISK JMD JOD JPY KES \
KGS KHR KMF KPW KRW KWD KYD KZT LAK LBP LKR LRD LSL LYD MAD MDL MGA MKD MMK MNT MOP MRU MUR MVR \
MWK MXN MYR MZN NAD NGN NIO NOK NPR NZD OMR PAB PEN PGK PHP PKR PLN PYG QAR RON RSD RUB RWF SAR \
SBD SCR SDG SEK SGD SHP SLE SOS SRD SSP STN SVC SYP SZL THB TJS TMT TND TOP TRY TTD TWD TZS UAH \
UGX USD UYU UZS VES VND VUV WST XAF XCD XCG XOF XPF YER ZAR ZMW ZWG";

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn body(order_id: &str) -> String {
        format!(
            r#"{{"order_id":"{order_id}","customer_id":"cust-1","items":[{{"sku":"A-1","quantity":2,"unit_price_cents":250}},{{"sku":"B-2","quantity":1,"unit_price_cents":1000}}],"total_cents":1500,"currency":"EUR","created_at":"2026-11-20T09:15:00Z"}}"#
        )
    }

    fn with(field: &str, value: serde_json::Value) -> String {
        let mut v: serde_json::Value = serde_json::from_str(&body("o-1")).expect("json");
        v[field] = value;
        v.to_string()
    }

    #[test]
    fn a_valid_order_parses_with_its_derived_fields() {
        let valid = parse(&body("o-1")).expect("valid");
        assert_eq!(valid.total_quantity, 3);
        assert_eq!(valid.created_at_ms, 1_795_166_100_000);
        assert_eq!(valid.hash_hex().len(), 64);
    }

    #[test]
    fn the_hash_ignores_formatting_and_sees_content() {
        let a = parse(&body("o-1")).expect("valid");
        let pretty = serde_json::to_string_pretty(&a.order).expect("json");
        assert_eq!(parse(&pretty).expect("valid").content_hash, a.content_hash);
        let other = parse(&with("customer_id", "cust-2".into())).expect("valid");
        assert_ne!(other.content_hash, a.content_hash);
    }

    #[test]
    fn the_hash_does_not_depend_on_how_the_time_or_the_fields_are_written() {
        let a = parse(&body("o-1")).expect("valid");
        for created_at in [
            "2026-11-20T09:15:00+00:00",
            "2026-11-20T09:15:00.000Z",
            "2026-11-20t09:15:00z",
            "2026-11-20T10:15:00+01:00",
            "2026-11-20T09:15:00.0004Z",
        ] {
            let same = parse(&with("created_at", created_at.into())).expect(created_at);
            assert_eq!(same.content_hash, a.content_hash, "{created_at}");
            assert_eq!(same.created_at_ms, a.created_at_ms, "{created_at}");
        }
        let later = parse(&with("created_at", "2026-11-20T09:15:00.001Z".into())).expect("valid");
        assert_ne!(later.content_hash, a.content_hash);
        // The fields in another order, the items' fields too.
        let reordered = r#"{"created_at":"2026-11-20T09:15:00Z","currency":"EUR","total_cents":1500,"items":[{"unit_price_cents":250,"quantity":2,"sku":"A-1"},{"unit_price_cents":1000,"sku":"B-2","quantity":1}],"customer_id":"cust-1","order_id":"o-1"}"#;
        assert_eq!(
            parse(reordered).expect("valid").content_hash,
            a.content_hash
        );
        // The items' order is part of the content.
        let swapped = r#"{"order_id":"o-1","customer_id":"cust-1","items":[{"sku":"B-2","quantity":1,"unit_price_cents":1000},{"sku":"A-1","quantity":2,"unit_price_cents":250}],"total_cents":1500,"currency":"EUR","created_at":"2026-11-20T09:15:00Z"}"#;
        assert_ne!(parse(swapped).expect("valid").content_hash, a.content_hash);
    }

    /// The stored hashes of every order ever written depend on this value: a
    /// change to the canonical form must come with a new `HASH_VERSION`.
    /// (The value was checked outside Rust: SHA-256 of this order's canonical
    /// form, written as `content_hash`'s module doc describes.)
    #[test]
    fn the_hash_of_a_sample_order_is_pinned() {
        let a = parse(&body("o-1")).expect("valid");
        assert_eq!(
            a.hash_hex(),
            "a82f860b6ee7b28db0fb709a027424d8574e5011df7ec4159d5267663f572aac"
        );
    }

    #[test]
    fn each_rule_is_enforced() {
        use serde_json::json;
        let cases = [
            (String::new(), "empty_body"),
            ("   ".into(), "empty_body"),
            ("x".repeat(MAX_BODY_BYTES + 1), "too_large"),
            ("{not json".into(), "invalid_json"),
            ("[1,2]".into(), "schema"),
            (r#"{"order_id":"o"}"#.into(), "schema"),
            (with("order_id", json!("")), "schema"),
            (with("order_id", json!("a".repeat(65))), "schema"),
            (with("order_id", json!("bad id")), "schema"),
            (with("order_id", json!("ünïcode")), "schema"),
            (with("order_id", json!(42)), "schema"),
            (with("customer_id", json!(null)), "schema"),
            (with("items", json!([])), "schema"),
            (with("total_cents", json!(1499)), "schema"),
            (with("total_cents", json!(-1)), "schema"),
            (with("total_cents", json!(1.5)), "schema"),
            (with("total_cents", json!(u64::MAX)), "schema"),
            (with("currency", json!("eur")), "schema"),
            (with("currency", json!("XYZ")), "schema"),
            (with("created_at", json!("yesterday")), "schema"),
            (with("created_at", json!("2026-11-20 09:15:00")), "schema"),
            (with("unknown_field", json!(1)), "schema"),
            (
                with(
                    "items",
                    json!([{"sku": "A", "quantity": 0, "unit_price_cents": 1}]),
                ),
                "schema",
            ),
            (
                with(
                    "items",
                    json!([{"sku": "A", "quantity": 10_001, "unit_price_cents": 1}]),
                ),
                "schema",
            ),
            (
                with(
                    "items",
                    json!([{"sku": "", "quantity": 1, "unit_price_cents": 1}]),
                ),
                "schema",
            ),
            (
                with(
                    "items",
                    json!([{"sku": "A", "quantity": 1, "unit_price_cents": 1, "x": 1}]),
                ),
                "schema",
            ),
            (
                with(
                    "items",
                    json!([{"sku": "A", "quantity": 10_000, "unit_price_cents": MAX_AMOUNT_CENTS}]),
                ),
                "schema",
            ),
        ];
        for (body, class) in cases {
            let err = parse(&body).expect_err(&body.chars().take(80).collect::<String>());
            assert_eq!(err.class(), class, "{body:.80}: {err}");
        }
        let too_many: Vec<_> = (0..=MAX_ITEMS)
            .map(|_| json!({"sku": "A", "quantity": 1, "unit_price_cents": 1}))
            .collect();
        assert_eq!(
            parse(&with("items", json!(too_many))).map_err(|e| e.class()),
            Err("schema")
        );
    }

    #[test]
    fn limits_are_inclusive() {
        use serde_json::json;
        let mut v: serde_json::Value = serde_json::from_str(&body("o-1")).expect("json");
        v["order_id"] = json!("a".repeat(MAX_ID_LEN));
        v["items"] = json!([{"sku": "A", "quantity": 1, "unit_price_cents": MAX_AMOUNT_CENTS}]);
        v["total_cents"] = json!(MAX_AMOUNT_CENTS);
        parse(&v.to_string()).expect("the limits themselves are allowed");
    }

    #[test]
    fn errors_never_carry_the_body() {
        let secret = "s3cr3t-value-that-must-not-leak";
        let body = with("unknown_field", serde_json::json!(secret));
        let err = parse(&body).expect_err("unknown field");
        assert!(!err.to_string().contains(secret), "{err}");
    }
}

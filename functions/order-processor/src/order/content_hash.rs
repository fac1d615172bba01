//! The content hash of an order: what tells "the same order again" from "a
//! different order under the same `order_id`".
//!
//! The hash is SHA-256 over a canonical form written by hand, so that nothing
//! but the order's content changes it: not the order of the fields in the
//! message or in the `Order` struct, not a new optional field, not how the
//! timestamp is written (`Z` or `+00:00`, an offset, trailing zeros).
//! Version [`HASH_VERSION`] is this JSON, on one line, fields in this order:
//!
//! ```text
//! {"v":1,"order_id":"…","customer_id":"…","items":[{"sku":"…","quantity":N,"unit_price_cents":N},…],"total_cents":N,"currency":"…","created_at":"YYYY-MM-DDTHH:MM:SS.fffZ"}
//! ```
//!
//! Items keep the order they were given in (it is part of the content).
//! `created_at` is the instant in UTC at millisecond precision, the precision
//! stored in `created_at_ms` (finer digits are cut, as there). Strings are
//! JSON string literals (`serde_json`'s escaping; validated identifiers need
//! none).
//!
//! The version is stored beside the hash (`hash_version`). A change to the
//! canonical form needs a new version, and [`hash`] must keep computing the
//! versions already stored, so that an order stored before the change still
//! compares equal to its redelivery. Version 0 is what the first release
//! stored, with no `hash_version`: SHA-256 of `serde_json::to_vec(&Order)`
//! (the struct's field order, `created_at` as sent). The unit test
//! `the_hash_of_a_sample_order_is_pinned` fails if version 1 changes.
//!
//! An item of a version greater than [`HASH_VERSION`] was stored by a newer
//! release, before a rollback to this one: [`hash`] cannot compute it, so
//! this release cannot compare. Its record is reported failed, not
//! dead-lettered: SQS delivers it again, for the newer release to decide.

use super::Order;
use sha2::{Digest, Sha256};
use std::fmt::Write as _;

/// The version of the canonical form new items are stored with.
pub const HASH_VERSION: u32 = 1;

/// The content hash of `order` (whose `created_at` is `created_at_ms`) in
/// [`HASH_VERSION`].
pub fn current(order: &Order, created_at_ms: i64) -> [u8; 32] {
    Sha256::digest(canonical(order, created_at_ms)).into()
}

/// The content hash of `order` in `version`, or `None` for a version this
/// code does not know.
pub fn hash(order: &Order, created_at_ms: i64, version: u32) -> Option<[u8; 32]> {
    match version {
        0 => serde_json::to_vec(order)
            .ok()
            .map(|json| Sha256::digest(json).into()),
        HASH_VERSION => Some(current(order, created_at_ms)),
        _ => None,
    }
}

/// The canonical form of version 1 (see the module doc).
pub fn canonical(order: &Order, created_at_ms: i64) -> String {
    let mut out = String::with_capacity(160 + 64 * order.items.len());
    let _ = write!(
        out,
        r#"{{"v":1,"order_id":{},"customer_id":{},"items":["#,
        string(&order.order_id),
        string(&order.customer_id)
    );
    for (i, item) in order.items.iter().enumerate() {
        let _ = write!(
            out,
            r#"{}{{"sku":{},"quantity":{},"unit_price_cents":{}}}"#,
            if i == 0 { "" } else { "," },
            string(&item.sku),
            item.quantity,
            item.unit_price_cents
        );
    }
    let _ = write!(
        out,
        r#"],"total_cents":{},"currency":{},"created_at":"{}"}}"#,
        order.total_cents,
        string(&order.currency),
        utc_millis(created_at_ms)
    );
    out
}

/// A JSON string literal.
fn string(value: &str) -> String {
    serde_json::Value::from(value).to_string()
}

/// `YYYY-MM-DDTHH:MM:SS.fffZ` for milliseconds since the Unix epoch. Years
/// outside 0000 to 9999 cannot come from an RFC 3339 timestamp; they are
/// written with their sign, still one form per instant.
fn utc_millis(ms: i64) -> String {
    let seconds = ms.div_euclid(1_000);
    let millis = ms.rem_euclid(1_000);
    match time::OffsetDateTime::from_unix_timestamp(seconds) {
        Ok(t) => format!(
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{millis:03}Z",
            t.year(),
            u8::from(t.month()),
            t.day(),
            t.hour(),
            t.minute(),
            t.second()
        ),
        Err(_) => format!("{ms}ms"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::order::Item;

    fn sample() -> Order {
        Order {
            order_id: "ord-0001".into(),
            customer_id: "cust-042".into(),
            items: vec![
                Item {
                    sku: "BOOK-RUST-2E".into(),
                    quantity: 1,
                    unit_price_cents: 3999,
                },
                Item {
                    sku: "MUG-FERRIS".into(),
                    quantity: 2,
                    unit_price_cents: 1250,
                },
            ],
            total_cents: 6499,
            currency: "EUR".into(),
            created_at: "2026-11-20T09:15:00Z".into(),
        }
    }

    #[test]
    fn the_canonical_form_is_fixed() {
        assert_eq!(
            canonical(&sample(), 1_795_166_100_000),
            r#"{"v":1,"order_id":"ord-0001","customer_id":"cust-042","items":[{"sku":"BOOK-RUST-2E","quantity":1,"unit_price_cents":3999},{"sku":"MUG-FERRIS","quantity":2,"unit_price_cents":1250}],"total_cents":6499,"currency":"EUR","created_at":"2026-11-20T09:15:00.000Z"}"#
        );
    }

    #[test]
    fn times_are_utc_milliseconds_also_before_1970() {
        assert_eq!(utc_millis(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(utc_millis(-1), "1969-12-31T23:59:59.999Z");
        assert_eq!(utc_millis(1_795_166_100_123), "2026-11-20T09:15:00.123Z");
    }

    #[test]
    fn every_stored_version_is_computed_and_others_are_not() {
        let order = sample();
        // Version 0: what the first release stored for this order.
        let v0 = hash(&order, 0, 0).expect("version 0");
        assert_eq!(
            v0,
            <[u8; 32]>::from(Sha256::digest(serde_json::to_vec(&order).expect("json")))
        );
        assert_ne!(hash(&order, 1_795_166_100_000, 1), Some(v0));
        assert_eq!(hash(&order, 0, HASH_VERSION + 1), None);
    }
}

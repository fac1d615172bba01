//! The fuzz target of the SQS order body, defined once for both fuzzing
//! engines: the proptest harness of the test suite and the coverage-guided
//! `fuzz/` crate beside it. Not part of the function's behaviour.
//!
//! [`check`] takes raw bytes, because an SQS body reaches the function inside
//! a JSON event: bytes that are not UTF-8 cannot become a `&str` at all, so the
//! runtime's event decoding must refuse the whole event (the batch is delivered
//! again; no record is lost). UTF-8 bodies go through [`order::parse`] and
//! through the real [`Handler`] with an accepting store, which must agree.
//!
//! A violated property comes back as `Err(what)`; a panic of the code under
//! test is left to propagate, so the engine sees it.

use crate::dead_letters::{self, MemoryDeadLetters};
use crate::store::MemoryOrders;
use aws_lambda_events::sqs::{SqsEvent, SqsMessage};
use order_processor::config::Config;
use order_processor::error::RecordFailure;
use order_processor::handler::{Handler, Outcome};
use order_processor::order::{self, Invalid, MAX_BODY_BYTES, ValidOrder};
use serde_json::Value;
use shared::invocation::Deadline;
use shared::orders::{MAX_AMOUNT_CENTS, MAX_ID_LEN, MAX_ITEMS, MAX_TOTAL_QUANTITY};
use std::time::{Duration, Instant};

/// Names and values that steer a generator towards the schema.
pub const VOCABULARY: &[&str] = &[
    "order_id",
    "customer_id",
    "items",
    "sku",
    "quantity",
    "unit_price_cents",
    "total_cents",
    "currency",
    "created_at",
    "EUR",
    "2026-11-20T09:15:00Z",
    "2026-11-21T17:42:10+01:00",
    "9999-12-31T23:59:59.999999999-23:59",
    "1000000000000",
    "10000",
];

/// The largest body the parser reads; longer ones must be refused by length.
pub const SIZE_LIMIT: usize = MAX_BODY_BYTES;

/// The message bodies inside a sample SQS event (`Records[].body`).
pub fn seeds(event: &Value) -> Vec<Vec<u8>> {
    event["Records"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|record| record["body"].as_str())
        .map(|body| body.as_bytes().to_vec())
        .collect()
}

/// Check one body given as bytes.
pub fn check(data: &[u8]) -> Result<(), String> {
    let decoded = serde_json::from_slice::<SqsEvent>(&event_with_body(data));
    let Ok(body) = std::str::from_utf8(data) else {
        // Not UTF-8: the runtime cannot decode the event; it must say so.
        return match decoded {
            Ok(_) => Err("an event with a body that is not UTF-8 was decoded".into()),
            Err(e) if e.to_string().is_empty() => Err("event refused without a message".into()),
            Err(_) => Ok(()),
        };
    };
    let record = match decoded {
        Ok(mut event) if event.records.len() == 1 => event.records.remove(0),
        Ok(_) => return Err("the event has not exactly one record".into()),
        Err(e) => return Err(format!("a UTF-8 body made the event undecodable: {e}")),
    };
    if record.body.as_deref() != Some(body) {
        return Err("the body changed on its way through the event".into());
    }
    let parsed = order::parse(body);
    match &parsed {
        Ok(valid) => accepted(body, valid)?,
        Err(invalid) => refused(body, invalid)?,
    }
    agrees_with_handler(record, &parsed)
}

/// A bounded body that was accepted: every limit holds and it re-validates.
fn accepted(body: &str, valid: &ValidOrder) -> Result<(), String> {
    let order = &valid.order;
    let ids = [&order.order_id, &order.customer_id]
        .into_iter()
        .chain(order.items.iter().map(|item| &item.sku));
    let limits_hold = body.len() <= MAX_BODY_BYTES
        && ids
            .into_iter()
            .all(|id| (1..=MAX_ID_LEN).contains(&id.len()))
        && (1..=MAX_ITEMS).contains(&order.items.len())
        && order.total_cents <= MAX_AMOUNT_CENTS
        && (1..=MAX_TOTAL_QUANTITY).contains(&valid.total_quantity);
    if !limits_hold {
        return Err("an accepted order breaks a limit".into());
    }
    if order::validate(order.clone()).as_ref() != Ok(valid) {
        return Err("an accepted order does not re-validate to itself".into());
    }
    let canonical = serde_json::to_string(order).map_err(|e| e.to_string())?;
    match order::parse(&canonical) {
        Ok(again) if again.content_hash == valid.content_hash => Ok(()),
        _ => Err("the canonical form of an accepted order parses differently".into()),
    }
}

/// A refusal: the right class for the length, and a message.
fn refused(body: &str, invalid: &Invalid) -> Result<(), String> {
    let detail = match invalid {
        Invalid::Json(detail) | Invalid::Schema(detail) => detail.clone(),
        Invalid::EmptyBody | Invalid::TooLarge(_) => invalid.to_string(),
    };
    if detail.trim().is_empty() {
        return Err(format!("a {} refusal without a message", invalid.class()));
    }
    let blank = body.trim().is_empty();
    let expected_class = match (blank, body.len() > MAX_BODY_BYTES) {
        (true, _) => Some("empty_body"),
        (false, true) => Some("too_large"),
        (false, false) => None,
    };
    match expected_class {
        Some(class) if invalid.class() != class => Err(format!(
            "a body of {} bytes was refused as {}, not {class}",
            body.len(),
            invalid.class()
        )),
        None if matches!(invalid, Invalid::EmptyBody | Invalid::TooLarge(_)) => Err(format!(
            "a body of {} bytes was refused as {}",
            body.len(),
            invalid.class()
        )),
        _ => Ok(()),
    }
}

/// The handler stores the order exactly when the body is a valid order, and
/// dead-letters the record otherwise (an empty body, which SQS would refuse,
/// is reported failed instead).
fn agrees_with_handler(
    mut record: SqsMessage,
    parsed: &Result<ValidOrder, Invalid>,
) -> Result<(), String> {
    record.message_id = Some("fuzz-1".into());
    let config = Config::from_env(&[
        ("TABLE_NAME", "orders"),
        ("CACHE_CAPACITY", "1"),
        ("DEAD_LETTER_QUEUE_URL", dead_letters::QUEUE_URL),
    ])
    .map_err(|e| e.to_string())?;
    let handler = Handler::new(
        MemoryOrders::accept_all(),
        MemoryDeadLetters::new(),
        &config,
    );
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .map_err(|e| e.to_string())?;
    let report = runtime
        .block_on(async {
            let deadline = Deadline::at(Instant::now() + Duration::from_secs(30));
            handler
                .process(std::slice::from_ref(&record), deadline)
                .await
        })
        .map_err(|e| e.to_string())?;
    let empty = record.body.as_deref().unwrap_or_default().is_empty();
    match (report.outcomes.as_slice(), parsed) {
        ([(_, Outcome::Stored)], Ok(_)) => Ok(()),
        ([(_, Outcome::DeadLettered(RecordFailure::Invalid(seen)))], Err(invalid))
            if seen == invalid && !empty =>
        {
            Ok(())
        }
        ([(_, Outcome::Failed(RecordFailure::Invalid(seen)))], Err(invalid))
            if seen == invalid && empty =>
        {
            Ok(())
        }
        (outcomes, _) => Err(format!(
            "the handler's outcome {outcomes:?} disagrees with parse: {:?}",
            parsed.as_ref().map(|_| "valid").map_err(Invalid::class)
        )),
    }
}

/// An SQS event of one record whose body is `data`, escaped as JSON requires
/// but otherwise byte for byte (bytes that are not UTF-8 stay as they are).
fn event_with_body(data: &[u8]) -> Vec<u8> {
    let mut event = br#"{"Records":[{"messageId":"fuzz-1","body":""#.to_vec();
    for &byte in data {
        match byte {
            b'"' => event.extend_from_slice(b"\\\""),
            b'\\' => event.extend_from_slice(b"\\\\"),
            0..0x20 => event.extend_from_slice(format!("\\u{byte:04x}").as_bytes()),
            _ => event.push(byte),
        }
    }
    event.extend_from_slice(br#""}]}"#);
    event
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sample_bodies_and_refusals_pass_the_checks() {
        for body in [crate::orders::body(7), "{not json".into(), " ".into()] {
            check(body.as_bytes()).expect("checks hold");
        }
        check(b"{\"order_id\": \"\xff\"}").expect("not UTF-8: the event is refused");
    }

    #[test]
    fn a_wrong_class_is_reported() {
        let body = "x".repeat(MAX_BODY_BYTES + 1);
        assert!(refused(&body, &Invalid::Json("x".into())).is_err());
        assert!(refused(&body, &Invalid::TooLarge(body.len())).is_ok());
        assert!(refused("{}", &Invalid::Schema("missing field".into())).is_ok());
        assert!(refused("{}", &Invalid::Schema(String::new())).is_err());
        assert!(refused("{}", &Invalid::EmptyBody).is_err());
    }
}

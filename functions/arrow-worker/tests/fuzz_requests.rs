//! Fuzzing the Arrow worker's request and the DynamoDB items it reads back,
//! the stable engine (proptest, `testkit::fuzz`): the checks are
//! `arrow_worker_testkit::fuzz`, shared with the coverage-guided engine of
//! `fuzz/` (`tools/fuzz/run.sh`).

use arrow_worker_testkit::fuzz::{
    VOCABULARY, check_items, check_request, item_seeds, request_seeds,
};
use serde_json::Value;
use testkit::fuzz::{
    Target, UNLIMITED_EDGE_BYTES, assert_a_lambda_sized_payload_is_refused, fuzz, zeros,
};

#[test]
fn arrow_worker_requests() {
    let events = local_stack::events::json_of("arrow-worker").unwrap_or_else(|e| panic!("{e}"));
    fuzz(&Target {
        name: "arrow request",
        source_file: file!(),
        seeds: request_seeds(&events),
        edges: vec![zeros(UNLIMITED_EDGE_BYTES)],
        size_limit: None,
        vocabulary: VOCABULARY,
        json: true,
        check: check_request,
    });
}

#[test]
fn dynamodb_items_read_back() {
    fuzz(&Target {
        name: "dynamodb items",
        source_file: file!(),
        seeds: item_seeds(),
        edges: vec![vec![0xFF; UNLIMITED_EDGE_BYTES]],
        size_limit: None,
        vocabulary: &[],
        json: false,
        check: check_items,
    });
}

/// The request parser has no size limit of its own: Lambda's is its. A
/// payload of that size with the most JSON values per byte is refused with a
/// message, within the memory bound.
#[test]
fn a_lambda_sized_payload_stays_within_the_memory_bound() {
    assert_a_lambda_sized_payload_is_refused("arrow request", |payload| {
        // The runtime decodes the payload; the parser gets the value.
        let value: Value = serde_json::from_slice(payload).map_err(|e| e.to_string())?;
        arrow_worker::request::parse(value)
            .map(drop)
            .map_err(|e| e.0)
    });
}

//! Fuzzing the hasher's request, direct and through a Function URL, the
//! stable engine (proptest, `testkit::fuzz`): the checks are
//! `password_hasher_testkit::fuzz`, shared with the coverage-guided engine of
//! `fuzz/` (`tools/fuzz/run.sh`).

use password_hasher_testkit::fuzz::{VOCABULARY, check, seeds};
use testkit::fuzz::{
    Target, UNLIMITED_EDGE_BYTES, assert_a_lambda_sized_payload_is_refused, fuzz, zeros,
};

#[test]
fn hasher_requests_direct_and_function_url() {
    let events = local_stack::events::json_of("password-hasher").unwrap_or_else(|e| panic!("{e}"));
    fuzz(&Target {
        name: "hasher request",
        source_file: file!(),
        seeds: seeds(&events),
        edges: vec![zeros(UNLIMITED_EDGE_BYTES)],
        size_limit: None,
        vocabulary: VOCABULARY,
        json: true,
        check,
    });
}

/// The parser has no size limit of its own: Lambda's is its. A payload of
/// that size with the most JSON values per byte is refused with a message,
/// within the memory bound.
#[test]
fn a_lambda_sized_payload_stays_within_the_memory_bound() {
    assert_a_lambda_sized_payload_is_refused("hasher request", |payload| {
        password_hasher::request::parse(payload, &Default::default())
            .map(drop)
            .map_err(|e| e.0)
    });
}

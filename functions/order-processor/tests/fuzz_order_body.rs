//! Fuzzing the SQS order body, the stable engine (proptest, `testkit::fuzz`):
//! the checks are `order_processor_testkit::fuzz`, shared with the
//! coverage-guided engine of `fuzz/` (`tools/fuzz/run.sh`).

use order_processor_testkit::fuzz::{SIZE_LIMIT, VOCABULARY, check, seeds};
use testkit::fuzz::{Target, fuzz, padded, zeros};

#[test]
fn sqs_order_bodies() {
    let events = local_stack::events::json_of("order-processor").unwrap_or_else(|e| panic!("{e}"));
    let seeds: Vec<Vec<u8>> = events.iter().flat_map(seeds).collect();
    let edges = vec![
        padded(&seeds[0], SIZE_LIMIT),
        padded(&seeds[0], SIZE_LIMIT + 1),
        zeros(SIZE_LIMIT),
        zeros(SIZE_LIMIT + 1),
    ];
    fuzz(&Target {
        name: "sqs order body",
        source_file: file!(),
        seeds,
        edges,
        size_limit: Some(SIZE_LIMIT),
        vocabulary: VOCABULARY,
        json: true,
        check,
    });
}

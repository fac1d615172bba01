//! `seed_corpus EVENTS CORPUS DICT`: the seed corpus of each of this
//! function's fuzz targets, derived from its sample events (`EVENTS/*.json`)
//! by the functions the suite's proptest harness uses, and a libFuzzer
//! dictionary per target (`fuzz_harness::seed_corpus`).
#![no_main]

libfuzzer_sys::fuzz_target!(init: fuzz_harness::seed_corpus(|events| {
    use arrow_worker_testkit::fuzz::{VOCABULARY, item_seeds, request_seeds};
    vec![
        ("arrow_request", request_seeds(events), VOCABULARY),
        ("dynamodb_items", item_seeds(), &[]),
    ]
}), |_data: &[u8]| {});

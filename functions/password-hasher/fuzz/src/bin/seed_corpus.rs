//! `seed_corpus EVENTS CORPUS DICT`: the seed corpus of each of this
//! function's fuzz targets, derived from its sample events (`EVENTS/*.json`)
//! by the functions the suite's proptest harness uses, and a libFuzzer
//! dictionary per target (`fuzz_harness::seed_corpus`).
#![no_main]

libfuzzer_sys::fuzz_target!(init: fuzz_harness::seed_corpus(|events| {
    use password_hasher_testkit::fuzz::{VOCABULARY, seeds};
    vec![("hasher_request", seeds(events), VOCABULARY)]
}), |_data: &[u8]| {});

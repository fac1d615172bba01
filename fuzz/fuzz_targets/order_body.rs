//! Fuzz target: the SQS order body (bytes, as an SQS event would carry them).
#![no_main]

use order_processor::fuzz_checks::check;

libfuzzer_sys::fuzz_target!(|data: &[u8]| parsers_fuzz::bounded(data, check));

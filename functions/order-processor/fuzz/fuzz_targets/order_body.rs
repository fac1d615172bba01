//! Fuzz target: the SQS order body (bytes, as an SQS event would carry them).
#![no_main]

use order_processor_testkit::fuzz::check;

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_harness::bounded(data, check));

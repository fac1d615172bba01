//! Fuzz target: DynamoDB items read back by the Arrow worker (bytes decoded into attribute maps).
#![no_main]

use arrow_worker_testkit::fuzz::check_items as check;

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_harness::bounded(data, check));

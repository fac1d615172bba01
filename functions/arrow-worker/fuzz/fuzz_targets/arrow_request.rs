//! Fuzz target: the Arrow worker's request payload (JSON text).
#![no_main]

use arrow_worker_testkit::fuzz::check_request as check;

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_harness::bounded(data, check));

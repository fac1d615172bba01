//! Fuzz target: the Arrow worker's request payload (JSON text).
#![no_main]

use testkit::fuzz::arrow::check_request as check;

libfuzzer_sys::fuzz_target!(|data: &[u8]| parsers_fuzz::bounded(data, check));

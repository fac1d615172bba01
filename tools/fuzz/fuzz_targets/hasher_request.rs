//! Fuzz target: the password hasher's request body, direct and through a Function URL.
#![no_main]

use testkit::fuzz::hasher::check;

libfuzzer_sys::fuzz_target!(|data: &[u8]| parsers_fuzz::bounded(data, check));

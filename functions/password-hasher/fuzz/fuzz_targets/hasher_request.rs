//! Fuzz target: the password hasher's request body, direct and through a Function URL.
#![no_main]

use password_hasher_testkit::fuzz::check;

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_harness::bounded(data, check));

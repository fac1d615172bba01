//! The password hasher's test helpers, for its tests, the end-to-end suite
//! and the fuzzers: the fuzz target's checks. Only ever a dev-dependency (a
//! tidy test checks); it goes when the function goes.

pub mod fuzz;

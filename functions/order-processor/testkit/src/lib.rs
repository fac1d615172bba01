//! The order processor's test helpers, for its tests, the end-to-end suite,
//! the fuzzers and the lab: sample orders, the in-memory order store and
//! dead-letter queue, and the fuzz target's checks. Only ever a
//! dev-dependency (a tidy test checks); it goes when the function goes.

pub mod dead_letters;
pub mod fuzz;
pub mod orders;
pub mod store;

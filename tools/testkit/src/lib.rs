//! Dev-only helpers for the tests, the fuzzers and the lab (like
//! rust-analyzer's `test-utils`): sample orders, the fuzz targets' checks and
//! the in-memory order store and dead-letter queue.
//! A function may use it only in `[dev-dependencies]` (a tidy test checks).

pub mod arrow;
pub mod dead_letters;
pub mod fuzz;
pub mod orders;
pub mod store;

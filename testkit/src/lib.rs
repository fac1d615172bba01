//! Dev-only helpers for the tests, the fuzzers and the lab (like
//! rust-analyzer's `test-utils`): sample orders and the fuzz targets' checks.
//! A function may use it only in `[dev-dependencies]` (a tidy test checks).

pub mod fuzz;
pub mod orders;

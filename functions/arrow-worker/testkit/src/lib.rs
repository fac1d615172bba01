//! The Arrow worker's test helpers, for its tests, the end-to-end suite, the
//! fuzzers and the lab: order items as the order processor stores them, an
//! in-memory orders table, reports table and bucket, and the fuzz targets'
//! checks. Only ever a dev-dependency (a tidy test checks); it goes when the
//! function goes.

pub mod fuzz;
pub mod orders;

//! The fuzz targets' checks, one module per function: seeds from `events/`,
//! and what must hold for any input. Shared by both fuzzing engines (proptest
//! in the suite, libFuzzer in `tools/fuzz/`).

pub mod arrow;
pub mod hasher;
pub mod orders;

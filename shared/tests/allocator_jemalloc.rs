//! The allocator checks with Jemalloc declared, as a function's `main.rs` does.
#![cfg(feature = "jemalloc")]

shared::global_allocator!(Jemalloc);

mod allocator_checks;

allocator_checks::tests!(Jemalloc);

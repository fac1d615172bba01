//! The allocator checks with Snmalloc declared, as a function's `main.rs` does.
#![cfg(feature = "snmalloc")]

shared::global_allocator!(Snmalloc);

mod allocator_checks;

allocator_checks::tests!(Snmalloc);

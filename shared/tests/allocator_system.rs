//! The allocator checks with System declared, as a function's `main.rs` does (no feature needed).
shared::global_allocator!(System);

mod allocator_checks;

allocator_checks::tests!(System);

//! The allocator selected by cargo feature is the one serving Rust's allocations.
//!
//! Run once per feature (the test command does):
//! `cargo test -p shared --no-default-features --features jemalloc --test allocator_serves`

use shared::allocator::{self, glibc};

const SIZE: usize = 64 << 20;
/// The statistics are process-wide: the test harness's other threads allocate and free
/// while this test runs (a CI run saw `allocated` grow by 18 KiB less than the buffer).
const OTHER_THREADS_SLACK: u64 = 1 << 20;

#[test]
fn selected_allocator_serves_allocations() {
    let glibc_before = glibc::info();
    let before = allocator::stats();
    let buffer = vec![7u8; SIZE];
    let after = allocator::stats();
    let glibc_after = glibc::info();
    std::hint::black_box(&buffer);

    // The selected allocator's own statistics grew by the allocation…
    assert!(
        after.mapped >= before.mapped + SIZE as u64 / 2,
        "{}: mapped {} -> {}",
        allocator::NAME,
        before.mapped,
        after.mapped
    );
    if let (Some(a), Some(b)) = (before.allocated, after.allocated) {
        assert!(
            b + OTHER_THREADS_SLACK >= a + SIZE as u64,
            "{}: allocated {a} -> {b}",
            allocator::NAME
        );
    }
    // …and glibc served it only if glibc is the selected allocator.
    let glibc_grew = glibc_after.in_use + OTHER_THREADS_SLACK >= glibc_before.in_use + SIZE as u64;
    assert_eq!(
        glibc_grew,
        allocator::NAME == "system",
        "{}",
        allocator::NAME
    );

    #[cfg(feature = "mimalloc")]
    assert!(allocator::owns(buffer.as_ptr()));
}

#[test]
fn name_matches_feature() {
    let expected = if cfg!(feature = "mimalloc") {
        "mimalloc"
    } else if cfg!(feature = "jemalloc") {
        "jemalloc"
    } else if cfg!(feature = "snmalloc") {
        "snmalloc"
    } else {
        "system"
    };
    assert_eq!(allocator::NAME, expected);
}

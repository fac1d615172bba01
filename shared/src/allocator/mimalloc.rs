//! mimalloc (v3 by default in the `mimalloc` crate).

use super::{AllocatorStats, Applied, Policy};
use libmimalloc_sys as ffi;

/// Name of the allocator serving this binary.
pub const NAME: &str = "mimalloc";

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

// Option indices of mimalloc's `mi_option_e` that the -sys crate does not name.
const PURGE_DECOMMITS: ffi::mi_option_t = 5;
const PURGE_DELAY: ffi::mi_option_t = 15;

pub(super) fn apply(policy: Policy) -> Result<Applied, String> {
    let (delay, decommit) = match policy {
        // Decommit rather than MADV_FREE so RSS drops at once, not under pressure.
        Policy::Prompt => (0, 1),
        Policy::Keep => (-1, 0),
    };
    // SAFETY: mi_option_set only stores an integer in mimalloc's option table;
    // any value is accepted for these options and it is thread-safe.
    unsafe {
        ffi::mi_option_set(PURGE_DELAY, delay);
        ffi::mi_option_set(PURGE_DECOMMITS, decommit);
    }
    Ok(Applied::Configured(format!(
        "purge_delay={delay} purge_decommits={decommit}"
    )))
}

pub(super) fn stats() -> AllocatorStats {
    let mut commit = 0usize;
    // SAFETY: every out-parameter may be null; the one we pass points to a live usize.
    unsafe {
        ffi::mi_process_info(
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            &mut commit,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        );
    }
    AllocatorStats {
        allocated: None,
        mapped: commit as u64,
    }
}

pub(super) fn release_free_memory() {
    // SAFETY: mi_collect has no preconditions.
    unsafe { ffi::mi_collect(true) }
}

/// Whether `ptr` lies in memory that this allocator manages.
pub fn owns(ptr: *const u8) -> bool {
    // SAFETY: mi_is_in_heap_region only compares the address with mimalloc's
    // region map; it never dereferences `ptr`.
    unsafe { ffi::mi_is_in_heap_region(ptr.cast()) }
}

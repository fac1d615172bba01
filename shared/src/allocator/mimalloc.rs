//! mimalloc (v3 by default in the `mimalloc` crate).

use super::{AllocatorStats, Applied, Policy};
use libmimalloc_sys as ffi;

/// Name of the allocator serving this binary.
pub const NAME: &str = "mimalloc";

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

// Option indices of mimalloc v3's `mi_option_e` that the -sys crate does not name.
const PURGE_DECOMMITS: ffi::mi_option_t = 5;
const PURGE_DELAY: ffi::mi_option_t = 15;
const MINIMAL_PURGE_SIZE_KIB: ffi::mi_option_t = 44;

fn set(option: ffi::mi_option_t, value: std::ffi::c_long) {
    // SAFETY: mi_option_set only stores an integer in mimalloc's option table;
    // any value is accepted for these options and it is thread-safe.
    unsafe { ffi::mi_option_set(option, value) }
}

pub(super) fn apply(policy: Policy) -> Result<Applied, String> {
    match policy {
        Policy::Prompt => {
            // Purge at once, by decommitting (RSS drops now, not under memory
            // pressure as with MADV_FREE), in 64 KiB units (mimalloc picks
            // 2 MiB when transparent huge pages are on, which keeps more).
            // Huge pages themselves can only be turned off before start-up:
            // `MIMALLOC_ALLOW_THP=0` in the environment.
            set(PURGE_DELAY, 0);
            set(PURGE_DECOMMITS, 1);
            set(MINIMAL_PURGE_SIZE_KIB, 64);
            Ok(Applied::Configured(
                "purge_delay=0 purge_decommits=1 minimal_purge_size=64KiB".into(),
            ))
        }
        Policy::Keep => {
            set(PURGE_DELAY, -1);
            set(PURGE_DECOMMITS, 0);
            Ok(Applied::Configured(
                "purge_delay=-1 purge_decommits=0".into(),
            ))
        }
    }
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

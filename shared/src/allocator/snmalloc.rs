//! snmalloc (snmalloc-rs, built with cmake).

use super::{AllocatorStats, Applied, Policy};

/// Name of the allocator serving this binary.
pub const NAME: &str = "snmalloc";

#[global_allocator]
static GLOBAL: snmalloc_rs::SnMalloc = snmalloc_rs::SnMalloc;

pub(super) fn apply(_policy: Policy) -> Result<Applied, String> {
    // snmalloc returns memory on its own schedule and has no runtime knob.
    Ok(Applied::Unsupported)
}

pub(super) fn stats() -> AllocatorStats {
    let s = snmalloc_rs::SnMalloc::memory_stats();
    AllocatorStats {
        allocated: None,
        mapped: s.current_memory_usage as u64,
    }
}

pub(super) fn release_free_memory() {}

//! snmalloc (snmalloc-rs, built with cmake).

use super::{AllocatorStats, Applied, Policy, forward_global_alloc};

forward_global_alloc!(
    /// Snmalloc, for `shared::global_allocator!(Snmalloc)`.
    Snmalloc => snmalloc_rs::SnMalloc,
    super::Controls {
        kind: super::Kind::Snmalloc,
        apply,
        stats,
        release_free_memory,
        start_up: || {},
        keeps_pages_for_reuse: || false,
    }
);

pub(super) fn apply(_policy: Policy) -> Result<Applied, String> {
    // snmalloc returns memory on its own schedule and has no runtime knob.
    Ok(Applied::Unsupported)
}

pub(super) fn stats() -> AllocatorStats {
    let s = snmalloc_rs::SnMalloc::memory_stats();
    AllocatorStats {
        allocated: None,
        mapped: Some(s.current_memory_usage as u64),
    }
}

pub(super) fn release_free_memory() {}

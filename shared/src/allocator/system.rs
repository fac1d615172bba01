//! The system allocator (glibc malloc on Lambda's Amazon Linux).

use super::{AllocatorStats, Applied, Policy, forward_global_alloc, glibc};

forward_global_alloc!(
    /// The system allocator, for `shared::global_allocator!(System)`.
    System => std::alloc::System,
    super::Controls {
        kind: super::Kind::System,
        apply,
        stats,
        release_free_memory,
        start_up: || {},
        keeps_pages_for_reuse: || false,
    }
);

pub(super) fn apply(policy: Policy) -> Result<Applied, String> {
    let (mmap_threshold, trim_threshold) = match policy {
        // Fixing both thresholds stops glibc from raising them dynamically after
        // a large free, which is what keeps RSS high in long-lived processes.
        Policy::Prompt => (128 * 1024, 128 * 1024),
        Policy::Keep => (32 * 1024 * 1024, libc::c_int::MAX),
    };
    glibc::mallopt(libc::M_MMAP_THRESHOLD, mmap_threshold)?;
    glibc::mallopt(libc::M_TRIM_THRESHOLD, trim_threshold)?;
    Ok(Applied::Configured(format!(
        "M_MMAP_THRESHOLD={mmap_threshold} M_TRIM_THRESHOLD={trim_threshold}"
    )))
}

pub(super) fn stats() -> AllocatorStats {
    let info = glibc::info();
    AllocatorStats {
        allocated: Some(info.in_use),
        mapped: Some(info.mapped),
    }
}

pub(super) fn release_free_memory() {
    glibc::trim();
}

//! What every probe shares, the lab's generic ones (`examples/`) and the
//! functions' own (`functions/<name>/lab/`): the allocator a build declares,
//! many invocations at once in one process, a function's plan, a function's
//! own section of the report, and the charts and medians sections draw.

pub mod concurrency;
pub mod plan;
pub mod plot;
pub mod section;
pub mod stats;

/// Declare the allocator this build of the probes was asked for: the calling
/// package's feature `jemalloc`, `snmalloc` or `system`, else mimalloc (the
/// functions' own). One line at the top of every probe.
#[macro_export]
macro_rules! declare_allocator {
    () => {
        #[cfg(feature = "jemalloc")]
        shared::global_allocator!(Jemalloc);
        #[cfg(feature = "snmalloc")]
        shared::global_allocator!(Snmalloc);
        #[cfg(feature = "system")]
        shared::global_allocator!(System);
        #[cfg(not(any(feature = "jemalloc", feature = "snmalloc", feature = "system")))]
        shared::global_allocator!(Mimalloc);
    };
}

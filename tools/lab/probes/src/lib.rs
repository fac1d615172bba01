//! What every probe shares, the lab's generic ones (`examples/`) and the
//! functions' own (`functions/<name>/lab/`): the allocator a build declares,
//! many invocations at once in one process, and a function's plan.

pub mod concurrency;
pub mod plan;

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

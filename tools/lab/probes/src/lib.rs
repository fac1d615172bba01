//! What the lab's probes (`examples/`) and the pre-warm fault test share: the
//! first-invocation trial of the Arrow worker, the bcrypt yardstick, and many
//! invocations at once in one process.

pub mod concurrency;
pub mod trial;
pub mod yardstick;

/// Declare the allocator this build of the probes was asked for: the
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

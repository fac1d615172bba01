//! The Rayon global pool: built once per cold start with the detected worker count.

/// The global pool was already built (by this crate or anyone else).
#[derive(Debug, thiserror::Error)]
#[error("the Rayon global pool could not be built with {workers} threads: {source}")]
pub struct PoolError {
    workers: usize,
    #[source]
    source: rayon::ThreadPoolBuildError,
}

/// Build Rayon's global pool with `workers` threads named `worker-N`.
///
/// Returns an error, never panics, if the pool already exists.
pub fn build_global(workers: usize) -> Result<(), PoolError> {
    rayon::ThreadPoolBuilder::new()
        .num_threads(workers)
        .thread_name(|i| format!("worker-{i}"))
        .build_global()
        .map_err(|source| PoolError { workers, source })
}

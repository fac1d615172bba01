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

/// A job handed to the pool with [`run`] did not return a value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JobError {
    /// The job panicked; the pool thread survived.
    #[error("the {0} job panicked")]
    Panicked(&'static str),
    /// The pool dropped the job without running it.
    #[error("the {0} job was dropped")]
    Dropped(&'static str),
}

/// Run CPU-bound `work` (named `what` in errors) on the Rayon global pool and
/// await its result, so that no tokio thread is blocked. A panic in `work`
/// comes back as an error, not as a crash of the pool.
pub async fn run<T: Send + 'static>(
    what: &'static str,
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, JobError> {
    let (answer, result) = tokio::sync::oneshot::channel();
    rayon::spawn(move || {
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(work));
        // The receiver is gone only if the invocation was abandoned.
        let _ = answer.send(outcome);
    });
    match result.await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(_panic)) => Err(JobError::Panicked(what)),
        Err(_) => Err(JobError::Dropped(what)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn jobs_return_values_and_panics_as_errors() {
        assert_eq!(run("answer", || 6 * 7).await, Ok(42));
        let panicked: Result<(), JobError> = run("boom", || panic!("boom")).await;
        assert_eq!(panicked, Err(JobError::Panicked("boom")));
        assert_eq!(
            JobError::Panicked("hashing").to_string(),
            "the hashing job panicked"
        );
    }
}

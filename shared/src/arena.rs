//! Pre-faulting memory at cold start, so the first invocation does not pay
//! the page faults of touching fresh memory: during init ([`prefault_now`],
//! when init time is free) or on a background thread ([`start`]).
//!
//! It allocates `bytes` in 1 MiB blocks through the global allocator, has
//! the kernel map every page (`MADV_POPULATE_WRITE`, or one written byte per
//! page where the kernel lacks it), and frees the blocks. With the allocator told to keep freed memory
//! (`MEMORY_RETURN=keep`; see `allocator/`), the pages stay mapped and later
//! allocations reuse them without faulting. With `prompt`, the allocator hands
//! them back to the OS and pre-warming is undone: [`start`] refuses it then.
//!
//! Measured (`shared/tests/allocator_checks/`, 64 MiB touched after a 128 MiB
//! pre-warm): mimalloc 3 with `purge_delay=-1` reuses the pre-faulted pages
//! (faults drop to a few percent). mimalloc 2, which the workspace builds,
//! first fills the free part of the allocating thread's own 32 MiB segment
//! with fresh pages: faults drop by half there, and the Arrow worker's first
//! invocation, spread over several threads, kept 91% of its faults (BENCHMARKS.md
//! section 2 has both builds). [`start`] refuses it. snmalloc returns memory on its own schedule
//! with no knob: one run kept nearly all pages, another lost a fifth of them.
//! jemalloc and glibc give each thread its own arena, so pages freed by the
//! background thread are not reused by the handler's thread at all. [`start`]
//! refuses all but mimalloc 3 rather than promise what it cannot keep.
//!
//! The handler awaits [`Prewarm::wait`] with a bound before its first heavy
//! allocation: it returns at once if pre-warming is done, and never waits
//! longer than the bound. The wait is asynchronous: the tokio thread it runs
//! on serves other tasks meanwhile (the pre-warm thread wakes it when done).

use crate::allocator::Policy;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// Blocks are this large: the size class big analytics buffers fall in.
pub const BLOCK: usize = 1 << 20;
/// Page size assumed for touching.
pub use crate::memory::PAGE;

/// What pre-warming did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Report {
    /// Bytes allocated, touched and freed.
    pub bytes: usize,
    /// How long it took.
    pub took: Duration,
    /// Minor page faults of the process while it ran (other threads included).
    pub minor_faults: u64,
}

/// Pre-warming in progress (or done).
#[derive(Debug)]
pub struct Prewarm {
    /// `None` until the pre-warm thread sends its report.
    done: watch::Receiver<Option<Report>>,
}

/// Whether pre-warming reliably helps with the allocator serving this binary
/// (see the module doc).
pub fn supported() -> bool {
    crate::allocator::keeps_pages_for_reuse()
}

/// Why pre-warming was not started.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotStarted {
    /// The allocator would not reliably keep and reuse the pre-faulted pages.
    #[error(
        "pre-warming is not reliable with {0}: it does not keep pages freed by another thread for reuse"
    )]
    Unsupported(&'static str),
    /// The allocator gives freed memory back: pre-faulted pages would be lost.
    #[error(
        "pre-warming needs MEMORY_RETURN=keep; with prompt the pages would be returned at once"
    )]
    PromptPolicy,
    /// The OS refused a thread.
    #[error("could not start the pre-warm thread: {0}")]
    Thread(String),
}

/// Start pre-faulting `bytes` (rounded up to whole blocks) on a background thread.
pub fn start(bytes: usize, policy: Policy) -> Result<Prewarm, NotStarted> {
    if !supported() {
        return Err(NotStarted::Unsupported(crate::allocator::name()));
    }
    if policy != Policy::Keep {
        return Err(NotStarted::PromptPolicy);
    }
    spawn(move || prefault(bytes))
}

/// Pre-fault `bytes` on this thread, now (during init, when init time is
/// free: provisioned concurrency), with the same checks as [`start`]; the
/// returned [`Prewarm`] is already finished.
pub fn prefault_now(bytes: usize, policy: Policy) -> Result<Prewarm, NotStarted> {
    if !supported() {
        return Err(NotStarted::Unsupported(crate::allocator::name()));
    }
    if policy != Policy::Keep {
        return Err(NotStarted::PromptPolicy);
    }
    let (_, done) = watch::channel(Some(prefault(bytes)));
    Ok(Prewarm { done })
}

/// Run `work` on the pre-warm thread.
fn spawn(work: impl FnOnce() -> Report + Send + 'static) -> Result<Prewarm, NotStarted> {
    let (tx, done) = watch::channel(None);
    std::thread::Builder::new()
        .name("arena-prewarm".into())
        .spawn(move || {
            // No receiver left is no error: nobody waits any more.
            let _ = tx.send(Some(work()));
        })
        .map_err(|e| NotStarted::Thread(e.to_string()))?;
    Ok(Prewarm { done })
}

/// Allocate, touch and free `bytes` on this thread.
pub fn prefault(bytes: usize) -> Report {
    let started = Instant::now();
    let faults_before = crate::memory::minor_faults();
    let blocks = bytes.div_ceil(BLOCK);
    let mut held: Vec<Vec<u8>> = Vec::with_capacity(blocks);
    for _ in 0..blocks {
        let mut block: Vec<u8> = Vec::with_capacity(BLOCK);
        // Ask the kernel to map the pages (cheaper than faulting them one by
        // one); where it cannot, write one byte per page of the spare
        // capacity, through safe code (`MaybeUninit` bytes).
        if !crate::memory::populate_write(block.spare_capacity_mut()) {
            for page in block.spare_capacity_mut().chunks_mut(PAGE) {
                page[0].write(1);
            }
        }
        std::hint::black_box(&block);
        held.push(block);
    }
    // All blocks are held at once so they occupy distinct memory; freeing them
    // together hands the whole range back to the allocator, which keeps it.
    drop(held);
    Report {
        bytes: blocks * BLOCK,
        took: started.elapsed(),
        minor_faults: crate::memory::minor_faults().saturating_sub(faults_before),
    }
}

impl Prewarm {
    /// Wait at most `bound` for pre-warming to finish, without blocking the
    /// thread (needs a tokio runtime with time enabled, as Lambda's is).
    /// Returns its report if it finished (now or earlier), `None` if the bound
    /// passed first or the pre-warm thread ended without a report.
    pub async fn wait(&self, bound: Duration) -> Option<Report> {
        let mut done = self.done.clone();
        // `wait_for` answers at once when the report is already there.
        match tokio::time::timeout(bound, done.wait_for(Option::is_some)).await {
            Ok(Ok(report)) => *report,
            Ok(Err(_)) | Err(_) => *self.done.borrow(),
        }
    }
}

/// A default arena size for a function of `memory_mb`: a quarter of it, at most 1 GiB.
pub fn default_bytes(memory_mb: u64) -> usize {
    let quarter = memory_mb.saturating_mul(1 << 20) / 4;
    usize::try_from(quarter.min(1 << 30)).unwrap_or(1 << 30)
}

/// The largest arena, in MiB, for a function of `memory_mb`: half of it. The
/// pre-faulted pages stay resident (the allocator keeps them for reuse) beside
/// what the runtime, the SDK client and the cold-start warm-up hold at the
/// same time; an arena the size of the memory would end the process at its
/// limit before the first invocation.
pub fn max_mib(memory_mb: u64) -> u64 {
    memory_mb / 2
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pre-warm that finishes when the returned sender sends or is dropped.
    fn held() -> (std::sync::mpsc::Sender<()>, Prewarm) {
        let (release, released) = std::sync::mpsc::channel::<()>();
        let prewarm = spawn(move || {
            let _ = released.recv();
            Report {
                bytes: 0,
                took: Duration::ZERO,
                minor_faults: 0,
            }
        })
        .expect("thread");
        (release, prewarm)
    }

    #[test]
    fn prompt_policy_or_unsupported_allocator_refuses() {
        let expected = if supported() {
            NotStarted::PromptPolicy
        } else {
            NotStarted::Unsupported(crate::allocator::name())
        };
        assert_eq!(start(BLOCK, Policy::Prompt).err(), Some(expected));
    }

    #[tokio::test(start_paused = true)]
    async fn waiting_leaves_the_runtime_free_and_is_bounded() {
        // One thread runs every task: a blocking wait would stop the ticker.
        let (release, prewarm) = held();
        let ticker = tokio::spawn(async {
            for _ in 0..50 {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        });
        let started = tokio::time::Instant::now();
        assert_eq!(prewarm.wait(Duration::from_secs(1)).await, None);
        assert_eq!(started.elapsed(), Duration::from_secs(1));
        assert!(
            ticker.is_finished(),
            "another task ran while the wait was pending"
        );
        drop(release);
    }

    #[tokio::test]
    async fn a_finished_prewarm_is_reported_and_remembered() {
        let (release, prewarm) = held();
        release.send(()).expect("the pre-warm thread waits");
        let report = prewarm.wait(Duration::from_secs(30)).await;
        assert!(report.is_some());
        // Asked again with no time to wait: the report is already there.
        assert_eq!(prewarm.wait(Duration::ZERO).await, report);
    }

    #[tokio::test]
    async fn a_prewarm_during_init_is_finished_when_it_returns() {
        assert!(prefault_now(BLOCK, Policy::Prompt).is_err());
        if !supported() {
            return;
        }
        let prewarm = prefault_now(4 * BLOCK, Policy::Keep).expect("prefaulted");
        let report = prewarm.wait(Duration::ZERO).await.expect("already done");
        assert_eq!(report.bytes, 4 * BLOCK);
    }

    #[tokio::test]
    async fn a_real_prewarm_reports_its_bytes() {
        if !supported() {
            return;
        }
        let prewarm = start(8 * BLOCK, Policy::Keep).expect("start");
        let report = prewarm
            .wait(Duration::from_secs(30))
            .await
            .expect("finishes");
        assert_eq!(report.bytes, 8 * BLOCK);
    }

    #[test]
    fn default_size_is_a_bounded_quarter_and_the_largest_is_half() {
        assert_eq!(default_bytes(1024), 256 << 20);
        assert_eq!(default_bytes(10_240), 1 << 30);
        assert_eq!(default_bytes(32_768), 1 << 30);
        assert_eq!(max_mib(1024), 512);
        assert_eq!(max_mib(129), 64);
    }
}

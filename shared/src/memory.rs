//! Memory figures for logs and metrics: RSS, peak RSS and minor page faults of
//! this process, plus the allocator's own statistics (and the process's CPU
//! time, from the same system call). One small file read and one system call:
//! cheap enough for every invocation.

use crate::allocator::{self, AllocatorStats};

/// One measurement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct Snapshot {
    /// Resident set size now (`VmRSS`), in bytes.
    pub rss_bytes: u64,
    /// Peak resident set size (`VmHWM`), in bytes.
    pub peak_rss_bytes: u64,
    /// Minor page faults of this process so far (`getrusage`).
    pub minor_faults: u64,
    /// The allocator's own view.
    pub allocator: AllocatorStats,
}

/// Take a snapshot. Fields that cannot be read (not Linux) are zero.
pub fn snapshot() -> Snapshot {
    let (rss_bytes, peak_rss_bytes) = std::fs::read_to_string("/proc/self/status")
        .map(|status| parse_status(&status))
        .unwrap_or_default();
    Snapshot {
        rss_bytes,
        peak_rss_bytes,
        minor_faults: minor_faults(),
        allocator: allocator::stats(),
    }
}

/// Minor page faults of this process so far.
pub fn minor_faults() -> u64 {
    u64::try_from(usage().ru_minflt).unwrap_or(0)
}

/// CPU time of this process so far, user and system, all threads.
pub fn cpu_time() -> std::time::Duration {
    let usage = usage();
    let micros = |t: libc::timeval| {
        u64::try_from(t.tv_sec).unwrap_or(0) * 1_000_000 + u64::try_from(t.tv_usec).unwrap_or(0)
    };
    std::time::Duration::from_micros(micros(usage.ru_utime) + micros(usage.ru_stime))
}

/// `getrusage(RUSAGE_SELF)`, zeroed where it fails.
fn usage() -> libc::rusage {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage writes a complete rusage into the buffer we own; on
    // failure it writes nothing and the zeroed value is read instead.
    unsafe {
        libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr());
        usage.assume_init()
    }
}

/// Page size assumed (Linux x86_64 and arm64 base pages).
pub const PAGE: usize = 4096;

/// Map every whole page inside `range` writable now, without writing to it
/// (`madvise(MADV_POPULATE_WRITE)`, Linux 5.14 and later; about a third
/// cheaper than touching each page). `false` where the kernel refuses (older
/// kernels answer `EINVAL`): the caller touches the pages instead.
pub fn populate_write(range: &mut [std::mem::MaybeUninit<u8>]) -> bool {
    let page = PAGE;
    let start = range.as_mut_ptr() as usize;
    let first = start.next_multiple_of(page);
    let end = (start + range.len()) / page * page;
    if end <= first {
        return true;
    }
    // MADV_POPULATE_WRITE only fills in page tables: it changes no byte and no
    // mapping, so the slice stays valid whatever the result.
    // SAFETY: [first, end) lies inside `range`, borrowed mutably for the call,
    // and is page aligned as madvise requires.
    let result = unsafe {
        libc::madvise(
            first as *mut libc::c_void,
            end - first,
            libc::MADV_POPULATE_WRITE,
        )
    };
    result == 0
}

/// Whether transparent huge pages are off for this process
/// (`prctl(PR_GET_THP_DISABLE)`; mimalloc turns them off at start-up under
/// `MEMORY_RETURN=prompt`, see `allocator/mimalloc.rs`).
pub fn huge_pages_disabled() -> bool {
    // SAFETY: PR_GET_THP_DISABLE reads a flag of this process; it takes no pointers.
    unsafe { libc::prctl(libc::PR_GET_THP_DISABLE, 0, 0, 0, 0) == 1 }
}

/// `(VmRSS, VmHWM)` in bytes from the text of `/proc/self/status`.
pub fn parse_status(status: &str) -> (u64, u64) {
    let field = |name: &str| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|rest| rest.trim().strip_suffix("kB"))
            .and_then(|kb| kb.trim().parse::<u64>().ok())
            .map_or(0, |kb| kb * 1024)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// Bytes as MiB with one decimal, for log lines.
pub fn mib(bytes: u64) -> f64 {
    (bytes as f64 / (1024.0 * 1024.0) * 10.0).round() / 10.0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Minor faults of the calling thread only: other tests run on other
    /// threads of this process at the same time, and their faults would count
    /// in the process-wide figure.
    fn thread_minor_faults() -> u64 {
        let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
        // SAFETY: as in `minor_faults`, for the calling thread.
        let usage = unsafe {
            libc::getrusage(libc::RUSAGE_THREAD, usage.as_mut_ptr());
            usage.assume_init()
        };
        u64::try_from(usage.ru_minflt).unwrap_or(0)
    }

    /// Populated pages are mapped: touching them afterwards faults (almost)
    /// never, where touching fresh pages faults once per page.
    #[test]
    fn populated_pages_are_mapped_without_faults_when_touched() {
        const PAGES: usize = 2_048;
        let page = PAGE;
        let touch_faults = |populate: bool| -> Option<u64> {
            // SAFETY: a fresh private anonymous mapping of PAGES pages, not
            // shared with anything; small pages only (no THP), so every first
            // touch faults unless populated. Unmapped below.
            let region = unsafe {
                let ptr = libc::mmap(
                    std::ptr::null_mut(),
                    PAGES * page,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                );
                if ptr == libc::MAP_FAILED {
                    return None;
                }
                libc::madvise(ptr, PAGES * page, libc::MADV_NOHUGEPAGE);
                std::slice::from_raw_parts_mut(
                    ptr.cast::<std::mem::MaybeUninit<u8>>(),
                    PAGES * page,
                )
            };
            if populate && !populate_write(region) {
                return None;
            }
            let before = thread_minor_faults();
            for chunk in region.chunks_mut(page) {
                chunk[0].write(1);
            }
            let faults = thread_minor_faults() - before;
            // SAFETY: the mapping made above, no longer borrowed.
            unsafe { libc::munmap(region.as_mut_ptr().cast(), PAGES * page) };
            Some(faults)
        };
        let Some(populated) = touch_faults(true) else {
            eprintln!("MADV_POPULATE_WRITE is not supported here: the arena touches pages instead");
            return;
        };
        let fresh = touch_faults(false).expect("mmap");
        assert!(
            fresh >= PAGES as u64 / 2,
            "fresh pages faulted {fresh} times"
        );
        assert!(populated < 64, "populated pages faulted {populated} times");
    }

    const STATUS: &str = "Name:\tbootstrap\nVmPeak:\t  123456 kB\nVmHWM:\t    8192 kB\nVmRSS:\t    4096 kB\nThreads:\t3\n";

    #[test]
    fn parses_rss_and_peak() {
        assert_eq!(parse_status(STATUS), (4096 * 1024, 8192 * 1024));
        assert_eq!(parse_status("garbage"), (0, 0));
        assert_eq!(parse_status("VmRSS:\tlots kB\n"), (0, 0));
    }

    #[test]
    fn live_snapshot_sees_touched_memory() {
        let before = snapshot();
        assert!(before.rss_bytes > 0 && before.peak_rss_bytes >= before.rss_bytes);
        let buffer = vec![1u8; 32 << 20];
        let after = snapshot();
        std::hint::black_box(&buffer);
        assert!(after.peak_rss_bytes >= before.rss_bytes + (16 << 20));
        assert!(after.minor_faults > before.minor_faults);
    }

    #[test]
    fn cpu_time_counts_work_done() {
        let before = cpu_time();
        let started = std::time::Instant::now();
        let mut x = 0u64;
        while started.elapsed() < std::time::Duration::from_millis(30) {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
        // Busy for 30 ms of wall time: most of it on this CPU, whatever else runs.
        assert!(cpu_time() - before >= std::time::Duration::from_millis(5));
    }

    #[test]
    fn mib_rounds_to_a_tenth() {
        assert_eq!(mib(1024 * 1024 * 3 / 2), 1.5);
    }
}

//! Local power tuning: for each Lambda memory size, the worker count the
//! shared crate chooses, the hasher's measured time for a fixed batch with that
//! many threads (capped by this machine's cores), a modelled time on Lambda and
//! the cost per million invocations.
//!
//! The model: Lambda gives CPU time in proportion to memory, `share =
//! MB / MB_PER_VCPU` vCPUs (at most the maximum), and the batch is CPU-bound.
//! With `threads = min(workers, cores)` measured here in `T` seconds, the work
//! is `T x threads` CPU-seconds at this machine's scaling efficiency, so on
//! Lambda it takes `T x threads / share` (below one vCPU, one thread runs for a
//! fraction of the time; above this machine's cores, the efficiency measured
//! at `cores` threads is assumed to hold).

/// Lambda price per GB-second, x86_64 (AWS published price, us-east-1, first tier).
pub const X86_64_GB_SECOND: f64 = 0.000_016_666_7;
/// Lambda price per GB-second, arm64 (us-east-1, first tier).
pub const ARM64_GB_SECOND: f64 = 0.000_013_333_4;
/// Lambda price per million requests.
pub const PER_MILLION_REQUESTS: f64 = 0.20;
/// The memory sizes tried: the range the 1,769 MB rule covers (Lambda's up to
/// 10,240 MB; above, only Managed Instances, priced and sized otherwise), with
/// the whole-vCPU steps.
pub const MEMORY_SIZES_MB: [u64; 16] = [
    128, 256, 512, 1024, 1536, 1769, 2048, 3008, 3538, 4096, 5307, 6144, 7076, 8192, 8845, 10240,
];

/// Lambda's CPU allocation, as the shared crate states it.
#[derive(Debug, Clone, Copy)]
pub struct CpuShare {
    /// Memory that buys one vCPU.
    pub mb_per_vcpu: f64,
    /// Most vCPUs a function gets.
    pub max_vcpus: f64,
}

impl CpuShare {
    /// vCPUs' worth of CPU time at `mb`.
    pub fn vcpus(&self, mb: u64) -> f64 {
        (mb as f64 / self.mb_per_vcpu).min(self.max_vcpus)
    }
}

/// One memory size.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// Lambda memory size.
    pub mb: u64,
    /// Workers the shared crate chooses there.
    pub workers: usize,
    /// Threads measured here: `min(workers, cores)`.
    pub threads: usize,
    /// Measured seconds for the batch on `threads` threads here.
    pub measured_s: f64,
    /// vCPUs' worth of CPU time Lambda gives.
    pub vcpus: f64,
    /// Modelled seconds on Lambda.
    pub modelled_s: f64,
    /// Dollars per million invocations, x86_64.
    pub x86_64_cost: f64,
    /// Dollars per million invocations, arm64 (at the same duration).
    pub arm64_cost: f64,
}

/// Dollars per million invocations of `seconds` at `mb` (duration billed in
/// whole milliseconds, rounded up), plus the request charge.
pub fn cost_per_million(seconds: f64, mb: u64, gb_second: f64) -> f64 {
    let billed_s = (seconds * 1e3).ceil() / 1e3;
    1e6 * billed_s * (mb as f64 / 1024.0) * gb_second + PER_MILLION_REQUESTS
}

/// The table, from the workers chosen per size and the batch time measured
/// per thread count (`measured[t - 1]` = seconds on `t` threads).
pub fn rows(
    share: CpuShare,
    workers: &[(u64, usize)],
    measured: &[f64],
) -> Result<Vec<Row>, String> {
    workers
        .iter()
        .map(|&(mb, workers)| {
            let threads = workers.min(measured.len());
            let measured_s = *measured
                .get(threads.wrapping_sub(1))
                .ok_or_else(|| format!("no measurement for {threads} thread(s)"))?;
            let vcpus = share.vcpus(mb);
            if vcpus.is_nan() || vcpus <= 0.0 {
                return Err(format!("no CPU share at {mb} MB"));
            }
            let modelled_s = measured_s * threads as f64 / vcpus;
            Ok(Row {
                mb,
                workers,
                threads,
                measured_s,
                vcpus,
                modelled_s,
                x86_64_cost: cost_per_million(modelled_s, mb, X86_64_GB_SECOND),
                arm64_cost: cost_per_million(modelled_s, mb, ARM64_GB_SECOND),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHARE: CpuShare = CpuShare {
        mb_per_vcpu: 1769.0,
        max_vcpus: 6.0,
    };

    #[test]
    fn cost_bills_whole_milliseconds_and_requests() {
        // 1 s at 1024 MB = 1 GB-s; a million of them plus the requests.
        let cost = cost_per_million(1.0, 1024, X86_64_GB_SECOND);
        assert!((cost - (16.6667 + 0.20)).abs() < 1e-6, "{cost}");
        // 1.2 ms is billed as 2 ms.
        let rounded = cost_per_million(0.0012, 1024, X86_64_GB_SECOND);
        assert!((rounded - (1e6 * 0.002 * X86_64_GB_SECOND + 0.20)).abs() < 1e-9);
    }

    #[test]
    fn below_one_vcpu_the_batch_takes_longer_and_threads_are_capped_by_cores() {
        // Two cores here: 1 thread 4 s, 2 threads 2.2 s.
        let rows = rows(SHARE, &[(884, 1), (3538, 2), (10240, 6)], &[4.0, 2.2]).expect("rows");
        assert_eq!(rows[0].threads, 1);
        assert!((rows[0].modelled_s - 4.0 * 1769.0 / 884.0).abs() < 1e-9);
        assert_eq!(rows[1].threads, 2);
        assert!((rows[1].modelled_s - 2.2).abs() < 1e-9);
        // 6 workers, 2 measured: 4.4 CPU-seconds over 5.79 vCPUs.
        assert_eq!(rows[2].threads, 2);
        assert!((rows[2].modelled_s - 4.4 / (10240.0 / 1769.0)).abs() < 1e-9);
        assert!(rows[2].arm64_cost < rows[2].x86_64_cost);
    }

    #[test]
    fn no_measurement_is_an_error() {
        assert!(rows(SHARE, &[(128, 1)], &[]).is_err());
    }
}

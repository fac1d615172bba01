//! How many worker threads this function should run: the vCPUs it really has.
//!
//! Lambda grants CPU in proportion to memory (one vCPU's worth per 1,769 MB, up
//! to 6 at 10,240 MB), yet `/proc/cpuinfo` and the CPUs a process may run on
//! may show the host's cores. The worker count is the smallest of:
//!
//! 1. the Lambda share from `AWS_LAMBDA_FUNCTION_MEMORY_SIZE` (rounded up: at
//!    1,770 MB a function gets a sliver more than one vCPU and a second thread
//!    can use it), up to 10,240 MB only,
//! 2. the cgroup CPU quota (v2 `cpu.max`, v1 `cpu.cfs_quota_us / cpu.cfs_period_us`,
//!    rounded up),
//! 3. the CPUs this process may run on ([`cpus_allowed`]),
//!
//! unless `WORKER_COUNT` is set, which overrides all three. Ties are decided in
//! that order. Every value is validated: a bad one is a [`ConfigError`].
//!
//! On Lambda Managed Instances (`AWS_LAMBDA_MAX_CONCURRENCY` set, see
//! [`crate::concurrency`]) a function's vCPUs follow the capacity provider's
//! memory per vCPU (2, 4 or 8 GiB), not the 1,769 MB rule: there the memory
//! is no input, and the cgroup quota and the CPUs allowed decide. Memory
//! above 10,240 MB (up to 32,768 MB) exists only there, and is no input
//! either.

use crate::concurrency::Concurrency;
use crate::config::{ConfigError, Env, parse_in_range};
use std::fmt;

/// Memory that buys one vCPU's worth of CPU time on Lambda: the one place
/// the rule lives (the local stack's CPU quota and the Arrow worker's
/// defaults take it from here).
pub const MB_PER_VCPU: u64 = 1_769;
/// Most vCPUs a Lambda function gets by the 1,769 MB rule (at 10,240 MB).
pub const MAX_LAMBDA_VCPUS: usize = 6;
/// Largest memory the 1,769 MB rule covers; above it, only Lambda Managed
/// Instances, whose vCPUs do not follow memory.
pub const MAX_RULE_MEMORY_MB: u64 = 10_240;
/// Lambda's memory range in MB (above 10,240 MB on Lambda Managed Instances only).
pub const LAMBDA_MEMORY_MB: std::ops::RangeInclusive<u64> = 128..=32_768;
/// Upper bound for `WORKER_COUNT`: more threads than this is a typo, not a plan.
pub const MAX_WORKERS: u64 = 256;

/// Which input decided the worker count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// `WORKER_COUNT` was set.
    Override,
    /// `AWS_LAMBDA_FUNCTION_MEMORY_SIZE`.
    LambdaMemory,
    /// The cgroup CPU quota.
    CgroupQuota,
    /// The CPUs this process may run on ([`cpus_allowed`]).
    CpusAllowed,
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Source::Override => "WORKER_COUNT",
            Source::LambdaMemory => "AWS_LAMBDA_FUNCTION_MEMORY_SIZE",
            Source::CgroupQuota => "cgroup cpu quota",
            Source::CpusAllowed => "cpus_allowed",
        })
    }
}

/// The cgroup CPU controller files, as text (read from `/sys/fs/cgroup` or given
/// by a test).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Cgroup {
    /// No CPU controller visible.
    #[default]
    Absent,
    /// cgroup v2: the contents of `cpu.max`, e.g. `"max 100000"` or `"150000 100000"`.
    V2 { cpu_max: String },
    /// cgroup v1: `cpu.cfs_quota_us` (-1 = no limit) and `cpu.cfs_period_us`.
    V1 { quota_us: String, period_us: String },
}

/// Everything detection looks at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inputs {
    /// `WORKER_COUNT`, if set.
    pub worker_count: Option<String>,
    /// `AWS_LAMBDA_FUNCTION_MEMORY_SIZE`, if set (it is on Lambda).
    pub memory_mb: Option<String>,
    /// The cgroup CPU quota files.
    pub cgroup: Cgroup,
    /// The CPUs this process may run on ([`cpus_allowed`]).
    pub available: usize,
}

/// The decision, with every input that was considered.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Vcpus {
    /// Threads to run CPU-bound work on.
    pub workers: usize,
    /// The CPU time the function can use, in vCPUs, not rounded: the smallest
    /// of the Lambda share (memory / 1,769 MB, at most 6; none above 10,240 MB),
    /// the cgroup quota and the CPUs allowed. `workers` rounds the share up (1,800 MB: 1.02
    /// vCPUs, 2 workers); estimates of how long CPU-bound work takes use this.
    /// `WORKER_COUNT` changes the workers, not the share.
    pub share: f64,
    /// The input that decided `workers`.
    pub decided_by: Source,
    /// The Lambda share, if the memory size was set and the 1,769 MB rule
    /// covers it (at most 10,240 MB).
    pub lambda_share: Option<usize>,
    /// The cgroup quota in whole CPUs (rounded up), if limited.
    pub cgroup_quota: Option<usize>,
    /// The CPUs this process may run on ([`cpus_allowed`]).
    pub available: usize,
}

/// vCPUs Lambda grants for `memory_mb`: one per 1,769 MB, rounded up, 1 to 6;
/// `None` above [`MAX_RULE_MEMORY_MB`], where memory does not decide.
pub fn lambda_share(memory_mb: u64) -> Option<usize> {
    let share = memory_mb.div_ceil(MB_PER_VCPU).max(1);
    (memory_mb <= MAX_RULE_MEMORY_MB)
        .then(|| usize::try_from(share).map_or(MAX_LAMBDA_VCPUS, |s| s.min(MAX_LAMBDA_VCPUS)))
}

/// Whole CPUs allowed by a quota of `quota` per `period` (rounded up, at least 1).
fn cpus_for_quota(quota: u64, period: u64) -> usize {
    usize::try_from(quota.div_ceil(period).max(1)).unwrap_or(usize::MAX)
}

/// The unrounded Lambda share for `memory_mb`: memory / 1,769 MB, at most 6;
/// `None` above [`MAX_RULE_MEMORY_MB`].
fn lambda_fraction(memory_mb: u64) -> Option<f64> {
    (memory_mb <= MAX_RULE_MEMORY_MB)
        .then(|| (memory_mb as f64 / MB_PER_VCPU as f64).min(MAX_LAMBDA_VCPUS as f64))
}

/// CPUs allowed by the cgroup, unrounded (`None`: no quota).
fn cgroup_fraction(cgroup: &Cgroup) -> Option<f64> {
    let (quota, period) = match cgroup {
        Cgroup::Absent => return None,
        Cgroup::V2 { cpu_max } => {
            let mut fields = cpu_max.split_whitespace();
            let quota = fields.next()?.parse::<u64>().ok()?;
            let period = fields.next().map_or(Some(100_000), |p| p.parse().ok())?;
            (quota, period)
        }
        Cgroup::V1 {
            quota_us,
            period_us,
        } => (
            quota_us.trim().parse::<u64>().ok()?,
            period_us.trim().parse::<u64>().ok()?,
        ),
    };
    (quota > 0 && period > 0).then(|| quota as f64 / period as f64)
}

/// Parse cgroup v2 `cpu.max` ("$MAX $PERIOD", where $MAX may be "max").
pub fn parse_cpu_max(text: &str) -> Result<Option<usize>, ConfigError> {
    const FILE: &str = "cgroup cpu.max";
    let bad = || {
        ConfigError::new(
            FILE,
            text.trim(),
            "expected \"max PERIOD\" or \"QUOTA PERIOD\"",
        )
    };
    let mut fields = text.split_whitespace();
    let (Some(max), period, None) = (fields.next(), fields.next(), fields.next()) else {
        return Err(bad());
    };
    let period = match period {
        Some(p) => p.parse::<u64>().ok().filter(|p| *p > 0).ok_or_else(bad)?,
        None => 100_000,
    };
    if max == "max" {
        return Ok(None);
    }
    let quota = max.parse::<u64>().ok().filter(|q| *q > 0).ok_or_else(bad)?;
    Ok(Some(cpus_for_quota(quota, period)))
}

/// Parse cgroup v1 `cpu.cfs_quota_us` / `cpu.cfs_period_us` (quota -1 = unlimited).
pub fn parse_cfs(quota_us: &str, period_us: &str) -> Result<Option<usize>, ConfigError> {
    let quota: i64 = quota_us.trim().parse().map_err(|_| {
        ConfigError::new(
            "cgroup cpu.cfs_quota_us",
            quota_us.trim(),
            "expected an integer",
        )
    })?;
    if quota == -1 {
        return Ok(None);
    }
    let quota = u64::try_from(quota)
        .ok()
        .filter(|q| *q > 0)
        .ok_or_else(|| {
            ConfigError::new(
                "cgroup cpu.cfs_quota_us",
                quota_us.trim(),
                "expected -1 or a positive integer",
            )
        })?;
    let period = period_us
        .trim()
        .parse::<u64>()
        .ok()
        .filter(|p| *p > 0)
        .ok_or_else(|| {
            ConfigError::new(
                "cgroup cpu.cfs_period_us",
                period_us.trim(),
                "expected a positive integer",
            )
        })?;
    Ok(Some(cpus_for_quota(quota, period)))
}

/// Decide the worker count from `inputs`.
pub fn detect(inputs: &Inputs) -> Result<Vcpus, ConfigError> {
    let memory_mb = inputs
        .memory_mb
        .as_deref()
        .map(|raw| parse_in_range("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", raw, LAMBDA_MEMORY_MB))
        .transpose()?;
    let lambda_share = memory_mb.and_then(lambda_share);
    let cgroup_quota = match &inputs.cgroup {
        Cgroup::Absent => None,
        Cgroup::V2 { cpu_max } => parse_cpu_max(cpu_max)?,
        Cgroup::V1 {
            quota_us,
            period_us,
        } => parse_cfs(quota_us, period_us)?,
    };
    let available = inputs.available.max(1);
    let override_count = inputs
        .worker_count
        .as_deref()
        .map(|raw| parse_in_range("WORKER_COUNT", raw, 1..=MAX_WORKERS))
        .transpose()?;

    let (workers, decided_by) = match override_count {
        // The range check above makes this conversion lossless.
        Some(n) => (usize::try_from(n).unwrap_or(1), Source::Override),
        None => [
            (lambda_share, Source::LambdaMemory),
            (cgroup_quota, Source::CgroupQuota),
            (Some(available), Source::CpusAllowed),
        ]
        .into_iter()
        .filter_map(|(n, source)| n.map(|n| (n, source)))
        // `min_by_key` keeps the first of equal minima: ties go to the earlier input.
        .min_by_key(|(n, _)| *n)
        .unwrap_or((available, Source::CpusAllowed)),
    };
    // The cgroup files were validated above, so a fraction exists when a quota does.
    let share = [
        memory_mb.and_then(lambda_fraction),
        cgroup_fraction(&inputs.cgroup),
        Some(available as f64),
    ]
    .into_iter()
    .flatten()
    .fold(f64::INFINITY, f64::min);
    Ok(Vcpus {
        workers,
        share,
        decided_by,
        lambda_share,
        cgroup_quota,
        available,
    })
}

/// Read the cgroup CPU files of this process (v2 first, then v1): those of its
/// own cgroup, named in `/proc/self/cgroup`, else the mount's root files.
pub fn read_cgroup() -> Cgroup {
    let read = |path: &str| std::fs::read_to_string(path).ok();
    let own = read("/proc/self/cgroup").unwrap_or_default();
    for dir in cgroup_dirs(&own) {
        let found = match dir {
            CgroupDir::V2(dir) => {
                read(&format!("{dir}/cpu.max")).map(|cpu_max| Cgroup::V2 { cpu_max })
            }
            CgroupDir::V1(dir) => read(&format!("{dir}/cpu.cfs_quota_us"))
                .zip(read(&format!("{dir}/cpu.cfs_period_us")))
                .map(|(quota_us, period_us)| Cgroup::V1 {
                    quota_us,
                    period_us,
                }),
        };
        if let Some(cgroup) = found {
            return cgroup;
        }
    }
    Cgroup::Absent
}

/// A directory that may hold this process's CPU controller files.
#[derive(Debug, Clone, PartialEq, Eq)]
enum CgroupDir {
    /// Holds cgroup v2 `cpu.max`.
    V2(String),
    /// Holds cgroup v1 `cpu.cfs_quota_us` and `cpu.cfs_period_us`.
    V1(String),
}

/// Where to look for the CPU quota, in order, given the text of
/// `/proc/self/cgroup`: v2 (`0::/path`) under `/sys/fs/cgroup`, then v1 (the
/// hierarchy whose controllers include `cpu`) under `/sys/fs/cgroup/cpu` and
/// `/sys/fs/cgroup/cpu,cpuacct`; each first at the process's own path, then at
/// the mount's root (a container sees its own cgroup there).
fn cgroup_dirs(proc_self_cgroup: &str) -> Vec<CgroupDir> {
    const ROOT: &str = "/sys/fs/cgroup";
    let path_of = |wanted: &dyn Fn(&str, &str) -> bool| {
        proc_self_cgroup.lines().find_map(|line| {
            let mut fields = line.splitn(3, ':');
            let (hierarchy, controllers, path) = (fields.next()?, fields.next()?, fields.next()?);
            wanted(hierarchy, controllers).then(|| path.trim_end_matches('/').to_owned())
        })
    };
    let v2 = path_of(&|hierarchy, controllers| hierarchy == "0" && controllers.is_empty());
    let v1 = path_of(&|_, controllers| controllers.split(',').any(|c| c == "cpu"));
    let mut dirs = Vec::new();
    if let Some(path) = v2.filter(|p| !p.is_empty()) {
        dirs.push(CgroupDir::V2(format!("{ROOT}{path}")));
    }
    dirs.push(CgroupDir::V2(ROOT.to_owned()));
    for mount in ["cpu", "cpu,cpuacct"] {
        if let Some(path) = v1.as_deref().filter(|p| !p.is_empty()) {
            dirs.push(CgroupDir::V1(format!("{ROOT}/{mount}{path}")));
        }
        dirs.push(CgroupDir::V1(format!("{ROOT}/{mount}")));
    }
    dirs
}

/// Gather the inputs from `env` and this machine, then [`detect`].
pub fn from_env(env: &dyn Env, concurrency: Concurrency) -> Result<Vcpus, ConfigError> {
    // On Managed Instances the vCPUs follow the capacity provider's memory
    // per vCPU, which the environment shows as its cgroup quota and CPUs:
    // the memory size is no input there, whatever it is.
    let memory_mb = match concurrency {
        Concurrency::ManagedInstances(_) => None,
        Concurrency::OnDemand => env.get("AWS_LAMBDA_FUNCTION_MEMORY_SIZE")?,
    };
    detect(&Inputs {
        worker_count: env.get("WORKER_COUNT")?,
        memory_mb,
        cgroup: read_cgroup(),
        available: cpus_allowed(),
    })
}

/// The CPUs this process may run on: its affinity (`Cpus_allowed_list` in
/// `/proc/self/status`), else `available_parallelism`. Not
/// `available_parallelism` first: it also rounds a cgroup quota down (1.16
/// CPUs become 1), and the quota is an input of its own, rounded up, as the
/// vCPUs Lambda shows are (2,048 MB: 1.16 vCPUs of time on 2 vCPUs).
pub fn cpus_allowed() -> usize {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|line| line.strip_prefix("Cpus_allowed_list:"))
                .and_then(|list| count_cpu_list(list.trim()))
        })
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from))
}

/// The CPUs in a kernel CPU list (`0-3,8,10-11`), or `None` if it is not one.
fn count_cpu_list(list: &str) -> Option<usize> {
    list.split(',')
        .try_fold(0_usize, |count, part| {
            let (first, last) = part.split_once('-').unwrap_or((part, part));
            let (first, last): (usize, usize) = (first.parse().ok()?, last.parse().ok()?);
            count.checked_add(last.checked_sub(first)?.checked_add(1)?)
        })
        .filter(|&n| n > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inputs(memory: Option<&str>, cgroup: Cgroup, available: usize) -> Inputs {
        Inputs {
            worker_count: None,
            memory_mb: memory.map(str::to_owned),
            cgroup,
            available,
        }
    }

    fn v2(text: &str) -> Cgroup {
        Cgroup::V2 {
            cpu_max: text.to_owned(),
        }
    }

    fn v1(quota: &str, period: &str) -> Cgroup {
        Cgroup::V1 {
            quota_us: quota.to_owned(),
            period_us: period.to_owned(),
        }
    }

    #[test]
    fn lambda_share_table() {
        for (mb, vcpus) in [
            (128, 1),
            (1_769, 1),
            (1_770, 2),
            (3_538, 2),
            (3_539, 3),
            (5_307, 3),
            (8_845, 5),
            (8_846, 6),
            (10_240, 6),
        ] {
            assert_eq!(lambda_share(mb), Some(vcpus), "{mb} MB");
        }
        assert_eq!(lambda_share(10_241), None);
    }

    #[test]
    fn memory_decides_on_a_big_host() {
        let v = detect(&inputs(Some("1769"), Cgroup::Absent, 64)).unwrap();
        assert_eq!((v.workers, v.decided_by), (1, Source::LambdaMemory));
        let v = detect(&inputs(Some("10240"), Cgroup::Absent, 64)).unwrap();
        assert_eq!((v.workers, v.decided_by), (6, Source::LambdaMemory));
    }

    #[test]
    fn smallest_input_wins_and_is_recorded() {
        // 10,240 MB allows 6, the cgroup 2, the host 4: the cgroup decides.
        let v = detect(&inputs(Some("10240"), v2("200000 100000\n"), 4)).unwrap();
        assert_eq!((v.workers, v.decided_by), (2, Source::CgroupQuota));
        assert_eq!(
            (v.lambda_share, v.cgroup_quota, v.available),
            (Some(6), Some(2), 4)
        );
        // The host has fewer cores than the share.
        let v = detect(&inputs(Some("10240"), v2("max 100000"), 2)).unwrap();
        assert_eq!((v.workers, v.decided_by), (2, Source::CpusAllowed));
        // Ties go to the earlier input (memory before cgroup before host).
        let v = detect(&inputs(Some("3538"), v2("200000 100000"), 2)).unwrap();
        assert_eq!((v.workers, v.decided_by), (2, Source::LambdaMemory));
        // Not on Lambda, no quota: the host decides.
        let v = detect(&inputs(None, Cgroup::Absent, 3)).unwrap();
        assert_eq!((v.workers, v.decided_by), (3, Source::CpusAllowed));
    }

    #[test]
    fn cgroup_v2_fixtures() {
        assert_eq!(parse_cpu_max("max 100000\n"), Ok(None));
        assert_eq!(parse_cpu_max("max"), Ok(None));
        assert_eq!(parse_cpu_max("100000 100000"), Ok(Some(1)));
        assert_eq!(parse_cpu_max("150000 100000"), Ok(Some(2)));
        assert_eq!(parse_cpu_max("50000 100000"), Ok(Some(1)));
        assert_eq!(parse_cpu_max("600000 100000"), Ok(Some(6)));
        for bad in [
            "",
            "abc 100000",
            "100000 0",
            "0 100000",
            "-5 100000",
            "1 2 3",
            "max x",
        ] {
            let err = parse_cpu_max(bad).unwrap_err();
            assert_eq!(err.setting, "cgroup cpu.max", "{bad:?}");
        }
    }

    #[test]
    fn cgroup_v1_fixtures() {
        assert_eq!(parse_cfs("-1\n", "100000\n"), Ok(None));
        assert_eq!(parse_cfs("200000", "100000"), Ok(Some(2)));
        assert_eq!(parse_cfs("250000", "100000"), Ok(Some(3)));
        assert_eq!(parse_cfs("20000", "100000"), Ok(Some(1)));
        assert!(parse_cfs("abc", "100000").is_err());
        assert!(parse_cfs("0", "100000").is_err());
        assert!(parse_cfs("-7", "100000").is_err());
        assert!(parse_cfs("100000", "0").is_err());
        assert!(parse_cfs("100000", "x").is_err());
        let v = detect(&inputs(Some("10240"), v1("300000", "100000"), 8)).unwrap();
        assert_eq!((v.workers, v.decided_by), (3, Source::CgroupQuota));
    }

    #[test]
    fn the_share_is_not_rounded() {
        let v = detect(&inputs(Some("1800"), Cgroup::Absent, 64)).unwrap();
        assert_eq!(v.workers, 2);
        assert!((v.share - 1800.0 / 1769.0).abs() < 1e-9, "{}", v.share);
        let v = detect(&inputs(Some("10240"), v1("50000", "100000"), 8)).unwrap();
        assert_eq!((v.workers, v.share), (1, 0.5));
        let v = detect(&inputs(Some("10240"), v2("max 100000"), 8)).unwrap();
        assert!((v.share - 10240.0 / 1769.0).abs() < 1e-9, "{}", v.share);
        let v = detect(&inputs(None, v2("150000 100000"), 8)).unwrap();
        assert_eq!((v.workers, v.share), (2, 1.5));
        let mut i = inputs(Some("1769"), Cgroup::Absent, 4);
        i.worker_count = Some("3".into());
        let v = detect(&i).unwrap();
        assert_eq!((v.workers, v.share), (3, 1.0));
    }

    #[test]
    fn managed_instances_memory_is_accepted_and_the_cgroup_and_cores_decide() {
        // 32,768 MB is Lambda's largest memory (on Lambda Managed Instances).
        let v = detect(&inputs(Some("32768"), Cgroup::Absent, 8)).unwrap();
        assert_eq!(
            (v.workers, v.decided_by, v.lambda_share, v.share),
            (8, Source::CpusAllowed, None, 8.0)
        );
        // 16,384 MB: the 1,769 MB rule does not apply; the quota decides.
        let v = detect(&inputs(Some("16384"), v2("250000 100000"), 16)).unwrap();
        assert_eq!(
            (v.workers, v.decided_by, v.lambda_share, v.share),
            (3, Source::CgroupQuota, None, 2.5)
        );
        let v = detect(&inputs(Some("16384"), v1("-1", "100000"), 4)).unwrap();
        assert_eq!(
            (v.workers, v.decided_by, v.lambda_share, v.share),
            (4, Source::CpusAllowed, None, 4.0)
        );
        // Up to 10,240 MB the rule still holds.
        let v = detect(&inputs(Some("10240"), Cgroup::Absent, 64)).unwrap();
        assert_eq!((v.workers, v.lambda_share), (6, Some(6)));
        let err = detect(&inputs(Some("32769"), Cgroup::Absent, 8)).unwrap_err();
        assert_eq!(err.setting, "AWS_LAMBDA_FUNCTION_MEMORY_SIZE");
        assert!(err.reason.contains("32768"), "{err}");
    }

    #[test]
    fn override_wins_over_everything() {
        let mut i = inputs(Some("128"), v2("100000 100000"), 1);
        i.worker_count = Some("12".into());
        let v = detect(&i).unwrap();
        assert_eq!((v.workers, v.decided_by), (12, Source::Override));
    }

    #[test]
    fn invalid_settings_are_errors_naming_the_setting() {
        for bad in ["0", "-1", "abc", "", "2.5", "257", "18446744073709551616"] {
            let mut i = inputs(None, Cgroup::Absent, 2);
            i.worker_count = Some(bad.into());
            let err = detect(&i).unwrap_err();
            assert_eq!(err.setting, "WORKER_COUNT", "{bad:?}");
        }
        for bad in ["0", "127", "32769", "-128", "lots", "1e3"] {
            let err = detect(&inputs(Some(bad), Cgroup::Absent, 2)).unwrap_err();
            assert_eq!(err.setting, "AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "{bad:?}");
        }
        let err = detect(&inputs(None, v2("garbage"), 2)).unwrap_err();
        assert_eq!(err.setting, "cgroup cpu.max");
    }

    #[test]
    fn the_quota_is_read_from_the_process_own_cgroup() {
        let dirs = |text: &str| cgroup_dirs(text);
        let v1 = "4:memory:/process_api/abc\n2:cpuacct:/\n1:cpu:/lambda-local-7-0\n0::/\n";
        assert_eq!(
            dirs(v1),
            [
                CgroupDir::V2("/sys/fs/cgroup".into()),
                CgroupDir::V1("/sys/fs/cgroup/cpu/lambda-local-7-0".into()),
                CgroupDir::V1("/sys/fs/cgroup/cpu".into()),
                CgroupDir::V1("/sys/fs/cgroup/cpu,cpuacct/lambda-local-7-0".into()),
                CgroupDir::V1("/sys/fs/cgroup/cpu,cpuacct".into()),
            ]
        );
        let joined = "3:cpu,cpuacct:/docker/x\n";
        assert_eq!(
            dirs(joined)[1],
            CgroupDir::V1("/sys/fs/cgroup/cpu/docker/x".into())
        );
        let v2 = "0::/user.slice/run-1.scope\n";
        assert_eq!(
            dirs(v2)[..2],
            [
                CgroupDir::V2("/sys/fs/cgroup/user.slice/run-1.scope".into()),
                CgroupDir::V2("/sys/fs/cgroup".into()),
            ]
        );
        // A container (or no /proc): the root files only.
        let root_only = [
            CgroupDir::V2("/sys/fs/cgroup".into()),
            CgroupDir::V1("/sys/fs/cgroup/cpu".into()),
            CgroupDir::V1("/sys/fs/cgroup/cpu,cpuacct".into()),
        ];
        assert_eq!(dirs("0::/\n1:cpu:/\n"), root_only);
        assert_eq!(dirs(""), root_only);
        assert_eq!(dirs("garbage\n::\n"), root_only);
    }

    #[test]
    fn cpu_lists_are_counted() {
        assert_eq!(count_cpu_list("0-1"), Some(2));
        assert_eq!(count_cpu_list("0"), Some(1));
        assert_eq!(count_cpu_list("0-3,8,10-11"), Some(7));
        for bad in ["", "a", "3-1", "0-", ","] {
            assert_eq!(count_cpu_list(bad), None, "{bad}");
        }
        assert!(cpus_allowed() >= 1);
    }

    #[test]
    fn a_fractional_quota_is_rounded_up_as_lambda_shows_its_vcpus() {
        // 2,048 MB under a quota of 1.16 CPUs on a 2-CPU machine: 1.16 vCPUs
        // of time and 2 workers, as on Lambda (2 vCPUs shown).
        let v = detect(&inputs(Some("2048"), v1("115800", "100000"), 2)).expect("valid");
        assert_eq!(v.workers, 2);
        assert!((v.share - 2048.0 / 1769.0).abs() < 1e-9, "{}", v.share);
    }

    #[test]
    fn from_env_reads_the_two_variables() {
        let v = from_env(
            &[
                ("WORKER_COUNT", "3"),
                ("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128"),
            ],
            Concurrency::OnDemand,
        )
        .unwrap();
        assert_eq!(
            (v.workers, v.decided_by, v.lambda_share),
            (3, Source::Override, Some(1))
        );
        let err = from_env(
            &[("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "abc")],
            Concurrency::OnDemand,
        )
        .unwrap_err();
        assert_eq!(err.setting, "AWS_LAMBDA_FUNCTION_MEMORY_SIZE");
    }

    #[test]
    fn on_managed_instances_the_memory_size_is_no_input() {
        // 128 MB would mean one vCPU on demand; on Managed Instances the
        // environment's own CPUs decide (no quota in a test process).
        let env = [("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128")];
        let v = from_env(&env, Concurrency::ManagedInstances(8)).unwrap();
        assert_eq!(v.lambda_share, None);
        assert_ne!(v.decided_by, Source::LambdaMemory);
        let on_demand = from_env(&env, Concurrency::OnDemand).unwrap();
        assert_eq!(on_demand.lambda_share, Some(1));
    }
}

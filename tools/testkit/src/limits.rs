//! The CPU and memory limits the local stack holds functions to, and what a
//! function's processes hold.

use local_stack::emulator::Emulator;

/// Whether CPU and memory limits are enforced here; if not, one line says
/// the test is skipped.
pub fn limits_enforced() -> bool {
    local_stack::cgroup::enforced()
        .inspect_err(|why| eprintln!("skipped: limits are not enforced: {why}"))
        .is_ok()
}

/// Assert that the function behind `emulator` has stayed within its memory
/// limit so far: no out-of-memory kill in its cgroup, and the cgroup's peak
/// (emulator and function) below the limit; both figures are printed, named
/// `what`. Where limits are not enforced, one line says the check is skipped.
pub fn assert_within_memory_limit(emulator: &Emulator, what: &str) {
    assert_memory_within_limit(
        what,
        emulator.memory_limit_bytes(),
        emulator.peak_memory_bytes(),
        emulator.oom_kills(),
    );
}

/// [`assert_within_memory_limit`] for the environments of `pool` (none
/// serving).
pub fn assert_pool_within_memory_limit(pool: &local_stack::pool::Pool, what: &str) {
    assert_memory_within_limit(
        what,
        pool.memory_limit_bytes(),
        pool.peak_memory_bytes(),
        pool.oom_kills(),
    );
}

/// The check of [`assert_within_memory_limit`] on a cgroup's figures: its
/// memory `limit`, its `peak` and its out-of-memory `kills`.
fn assert_memory_within_limit(
    what: &str,
    limit: Option<u64>,
    peak: Option<u64>,
    kills: Option<u64>,
) {
    if let Err(why) = local_stack::cgroup::enforced() {
        eprintln!("{what}: memory check skipped: limits are not enforced: {why}");
        return;
    }
    let limit = limit.unwrap_or_else(|| panic!("{what}: limits are enforced, yet no memory limit"));
    let peak = peak.unwrap_or_else(|| panic!("{what}: the kernel keeps no peak memory figure"));
    eprintln!(
        "{what}: peak memory {:.1} MiB of its {:.1} MiB limit; out-of-memory kills: {}",
        mib(peak),
        mib(limit),
        kills.map_or_else(
            || "not counted by this kernel".to_owned(),
            |k| k.to_string()
        )
    );
    assert_eq!(kills.unwrap_or(0), 0, "{what}: killed for memory");
    assert!(
        peak < limit,
        "{what}: peak memory {peak} bytes reached the limit {limit}"
    );
}

/// `bytes` in MiB, for messages.
pub fn mib(bytes: u64) -> f64 {
    bytes as f64 / f64::from(1 << 20)
}

/// The UDP sockets the processes below `pid` hold (their open files that are
/// sockets listed in `/proc/net/udp` or `udp6`).
pub fn udp_sockets_of_descendants(pid: u32) -> usize {
    let inodes = |table: &str| -> Vec<String> {
        std::fs::read_to_string(format!("/proc/{pid}/net/{table}"))
            .unwrap_or_default()
            .lines()
            .skip(1)
            .filter_map(|line| line.split_whitespace().nth(9).map(str::to_owned))
            .collect()
    };
    let udp: Vec<String> = [inodes("udp"), inodes("udp6")].concat();
    local_stack::process::descendants(pid)
        .into_iter()
        .filter_map(|child| std::fs::read_dir(format!("/proc/{child}/fd")).ok())
        .flatten()
        .filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok())
        .filter_map(|link| {
            let link = link.to_string_lossy().into_owned();
            Some(link.strip_prefix("socket:[")?.strip_suffix(']')?.to_owned())
        })
        .filter(|inode| udp.contains(inode))
        .count()
}

//! A cgroup per function process: the CPU time Lambda gives the function's
//! memory size (one vCPU per 1,769 MB on demand; on Lambda Managed Instances
//! its memory over its memory per vCPU; at most the machine's cores) and a
//! memory limit of that size. [`Share::of`] decides a function's share (on
//! demand by `shared::vcpus`'s rule, the one the functions size their threads
//! by), [`quota`] turns a share into CPU time per [`PERIOD_US`].
//!
//! cgroup v1 (`cpu` and `memory` controllers, writable as root): `cpu.cfs_quota_us`
//! per `cpu.cfs_period_us`, `memory.limit_in_bytes` (and `memory.memsw.limit_in_bytes`
//! where it exists, so swap does not hide the limit). cgroup v2: `cpu.max` and
//! `memory.max`, where this process may create a child of its own cgroup (the
//! `systemd-run --user --scope` route for normal users is not taken). Each cgroup
//! is a child of this process's own, so limits set around the caller still hold.
//! Where neither works, functions run without limits and one line says so.
//! `LOCAL_LIMITS=off` turns the limits off.
//!
//! **Init on demand.** Lambda runs an on-demand environment's init on at
//! least one whole vCPU, whatever the memory size, and the invocations at the
//! share (AWS's guidance: "On-demand Lambda functions use a full vCPU
//! (non-throttled) [...] during its initialization phase"; provisioned
//! concurrency has no such burst). [`Cgroup::burst_for_init`] gives the cgroup
//! [`init_quota`] until its [`AfterInit`] puts the share back, which the
//! emulator does when the runtime first asks for an invocation. Without it
//! an init at 256 MB spends the 100 ms period's 14.5 ms and the first
//! invocation waits for the next period, which Lambda's does not.
//!
//! The directories are removed when the [`Cgroup`] is dropped (after killing
//! whatever still runs in them) and on Ctrl-C ([`remove_live`]).

use crate::managed_instances::ManagedInstances;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, Once};
use std::time::{Duration, Instant};

/// The CFS period the quota is a share of, in microseconds.
pub const PERIOD_US: u64 = 100_000;
/// The environment variable that turns the limits off (`off`) or on (`on`, the default).
pub const SWITCH: &str = "LOCAL_LIMITS";

const ROOT: &str = "/sys/fs/cgroup";

/// Whether function processes run under CPU and memory limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limits {
    /// Lambda's CPU share and memory size, where cgroups allow it.
    Enforced,
    /// No limits.
    Off,
}

impl Limits {
    /// From [`SWITCH`]: unset or `on` is [`Limits::Enforced`], `off` is [`Limits::Off`].
    pub fn from_env() -> Result<Self, String> {
        match std::env::var(SWITCH).as_deref() {
            Err(std::env::VarError::NotPresent) | Ok("on") => Ok(Self::Enforced),
            Ok("off") => Ok(Self::Off),
            _ => Err(format!("{SWITCH} must be \"on\" or \"off\"")),
        }
    }
}

/// The CPU Lambda gives a function: its memory over the memory that buys one
/// vCPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Share {
    /// The function's memory size.
    pub memory_mb: u64,
    /// The memory that buys one vCPU's worth of CPU time.
    pub mb_per_vcpu: u64,
}

impl Share {
    /// The share of a function of `memory_mb`: on demand (`managed` is
    /// `None`) one vCPU per `shared::vcpus::MB_PER_VCPU`, the rule the
    /// functions size their threads by; on Lambda Managed Instances its
    /// memory per vCPU ([`ManagedInstances::mb_per_vcpu`]), not the 1,769 MB rule.
    pub fn of(memory_mb: u64, managed: Option<ManagedInstances>) -> Self {
        Self {
            memory_mb,
            mb_per_vcpu: managed.map_or(shared::vcpus::MB_PER_VCPU, ManagedInstances::mb_per_vcpu),
        }
    }

    /// The share in vCPUs, unrounded (256 MB on demand: 0.14).
    pub fn vcpus(self) -> f64 {
        self.memory_mb as f64 / self.mb_per_vcpu.max(1) as f64
    }
}

/// A CPU quota per [`PERIOD_US`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quota {
    /// Microseconds of CPU time per period.
    pub quota_us: u64,
    /// Whether the machine's cores, not the memory size, set it.
    pub capped: bool,
}

/// `share` as CPU time per [`PERIOD_US`] (one period per vCPU, rounded up
/// to the microsecond), at most `cores` whole CPUs.
pub fn quota(share: Share, cores: usize) -> Quota {
    let wanted = share
        .memory_mb
        .saturating_mul(PERIOD_US)
        .div_ceil(share.mb_per_vcpu.max(1));
    let cap = u64::try_from(cores.max(1))
        .unwrap_or(u64::MAX)
        .saturating_mul(PERIOD_US);
    Quota {
        quota_us: wanted.min(cap),
        capped: wanted > cap,
    }
}

/// The CPU quota of an on-demand function of `memory_mb` ([`quota`] of
/// its [`Share`]).
pub fn cpu_quota(memory_mb: u64, cores: usize) -> Quota {
    quota(Share::of(memory_mb, None), cores)
}

/// The CPU quota of a function of `memory_mb` on Lambda Managed Instances
/// (`managed`) or on demand (`None`) ([`quota`] of its [`Share`]).
pub fn function_quota(memory_mb: u32, managed: Option<ManagedInstances>, cores: usize) -> Quota {
    quota(Share::of(u64::from(memory_mb), managed), cores)
}

/// The CPU time per period an on-demand init may use: one whole vCPU, or the
/// quota where that is more (see the module's documentation).
pub fn init_quota(quota: Quota) -> u64 {
    quota.quota_us.max(PERIOD_US)
}

/// Say that `cores` cap `share`'s quota: once per share, not at every
/// process started (at most one entry per memory size and memory per vCPU
/// Lambda allows).
fn say_capped(share: Share, cores: usize) {
    static SAID: Mutex<Vec<Share>> = Mutex::new(Vec::new());
    let mut said = SAID.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if !said.contains(&share) {
        said.push(share);
        eprintln!(
            "{} MB buys {:.2} vCPUs on Lambda; this machine has {cores}: the CPU quota is {cores}",
            share.memory_mb,
            share.vcpus()
        );
    }
}

/// `sh -c` script for [`Cgroup::command`]: each `cgroup.procs` file to join,
/// `--`, then the command to become.
const JOIN_THEN_EXEC: &str = r#"set -e
while [ "$1" != -- ]; do echo $$ > "$1"; shift; done
shift
exec "$@""#;

/// Cgroup directories this process created and has not removed yet.
static LIVE: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

fn live() -> std::sync::MutexGuard<'static, Vec<PathBuf>> {
    LIVE.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Kill what runs in every cgroup this process created and remove them (for
/// the Ctrl-C handler, which exits without running destructors).
pub fn remove_live() {
    let dirs = std::mem::take(&mut *live());
    for dir in dirs.iter().rev() {
        remove(dir);
    }
}

/// Whether functions started now run under limits; `Err` says why not (the
/// switch is off or unreadable, or cgroups cannot be written here).
pub fn enforced() -> Result<(), String> {
    enforced_with(Limits::from_env()?)
}

/// [`enforced`] for `limits` given, not read from [`SWITCH`].
pub fn enforced_with(limits: Limits) -> Result<(), String> {
    match limits {
        Limits::Off => Err(format!("{SWITCH}=off")),
        Limits::Enforced => Cgroup::create(128).map(drop),
    }
}

/// One function's cgroup (a directory per v1 controller, one in v2), removed on drop.
#[derive(Debug)]
pub struct Cgroup {
    dirs: Vec<PathBuf>,
    /// The CPU quota it holds outside an on-demand init.
    quota: Quota,
}

impl Cgroup {
    /// A cgroup for a function of `memory_mb`, or `None` when `limits` is off
    /// or cgroups cannot be written here (then one line, printed once, says why).
    pub fn for_function(memory_mb: u32, limits: Limits) -> Option<Self> {
        Self::for_function_on(memory_mb, None, limits)
    }

    /// [`Cgroup::for_function`] for a function on Lambda Managed Instances
    /// (`managed`: its CPU quota follows its memory per vCPU, see
    /// [`function_quota`]) or on demand (`None`).
    pub fn for_function_on(
        memory_mb: u32,
        managed: Option<ManagedInstances>,
        limits: Limits,
    ) -> Option<Self> {
        let created = match limits {
            Limits::Off => Err(format!("{SWITCH}=off")),
            Limits::Enforced => Self::create_on(memory_mb, managed),
        };
        created
            .inspect_err(|reason| {
                static SAID: Once = Once::new();
                SAID.call_once(|| eprintln!("CPU and memory limits are not enforced: {reason}"));
            })
            .ok()
    }

    /// A new cgroup with the CPU quota and memory limit of `memory_mb` on demand.
    pub fn create(memory_mb: u64) -> Result<Self, String> {
        Self::create_with(Share::of(memory_mb, None))
    }

    /// A new cgroup for a function of `memory_mb` on Lambda Managed Instances
    /// (`managed`) or on demand (`None`): the [`quota`] of its [`Share`] and
    /// a memory limit of `memory_mb`.
    pub fn create_on(memory_mb: u32, managed: Option<ManagedInstances>) -> Result<Self, String> {
        Self::create_with(Share::of(u64::from(memory_mb), managed))
    }

    /// A new cgroup with the [`quota`] of `share` on this machine's cores and
    /// a memory limit of the share's memory.
    fn create_with(share: Share) -> Result<Self, String> {
        static COUNT: AtomicUsize = AtomicUsize::new(0);
        let name = format!(
            "lambda-local-{}-{}",
            std::process::id(),
            COUNT.fetch_add(1, Ordering::Relaxed)
        );
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        let quota = quota(share, cores);
        if quota.capped {
            say_capped(share, cores);
        }
        let bytes = share.memory_mb.saturating_mul(1024 * 1024).to_string();
        let own = std::fs::read_to_string("/proc/self/cgroup")
            .map_err(|e| format!("/proc/self/cgroup: {e}"))?;
        let mut cgroup = Self {
            dirs: Vec::new(),
            quota,
        };
        if Path::new(ROOT).join("cgroup.controllers").is_file() {
            let base = own_dir(Path::new(ROOT), own_path(&own, None));
            // Controllers reach a child only through its parent's subtree_control.
            write(&base.join("cgroup.subtree_control"), "+cpu +memory")?;
            let dir = cgroup.make(&base.join(&name))?;
            cgroup.set_cpu_quota(quota.quota_us)?;
            write(&dir.join("memory.max"), &bytes)?;
            return Ok(cgroup);
        }
        let cpu_mount = ["cpu", "cpu,cpuacct"]
            .iter()
            .map(|m| Path::new(ROOT).join(m))
            .find(|m| m.join("cpu.cfs_quota_us").is_file())
            .ok_or("no cgroup v2 and no cgroup v1 cpu controller under /sys/fs/cgroup")?;
        let memory_mount = Path::new(ROOT).join("memory");
        if !memory_mount.join("memory.limit_in_bytes").is_file() {
            return Err("no cgroup v1 memory controller under /sys/fs/cgroup".into());
        }
        let cpu = cgroup.make(&own_dir(&cpu_mount, own_path(&own, Some("cpu"))).join(&name))?;
        write(&cpu.join("cpu.cfs_period_us"), &PERIOD_US.to_string())?;
        cgroup.set_cpu_quota(quota.quota_us)?;
        let memory =
            cgroup.make(&own_dir(&memory_mount, own_path(&own, Some("memory"))).join(&name))?;
        write(&memory.join("memory.limit_in_bytes"), &bytes)?;
        let swap = memory.join("memory.memsw.limit_in_bytes");
        if swap.is_file() {
            write(&swap, &bytes)?;
        }
        Ok(cgroup)
    }

    /// Give the cgroup [`init_quota`] of CPU time, as Lambda gives an
    /// on-demand init; the [`AfterInit`] returned puts its share back.
    pub fn burst_for_init(&self) -> Result<AfterInit, String> {
        self.set_cpu_quota(init_quota(self.quota))?;
        Ok(AfterInit {
            writes: self.cpu_quota_writes(self.quota.quota_us),
        })
    }

    /// The CPU time per [`PERIOD_US`] the cgroup may use now, in
    /// microseconds (v1's `cpu.cfs_quota_us`, the first field of v2's
    /// `cpu.max`), or `None` where no file holds a number.
    pub fn cpu_quota_us(&self) -> Option<u64> {
        self.dirs
            .iter()
            .flat_map(|dir| [dir.join("cpu.cfs_quota_us"), dir.join("cpu.max")])
            .find_map(|file| {
                let text = std::fs::read_to_string(file).ok()?;
                text.split_whitespace().next()?.parse().ok()
            })
    }

    /// Set the CPU time per [`PERIOD_US`] to `quota_us`.
    fn set_cpu_quota(&self, quota_us: u64) -> Result<(), String> {
        let writes = self.cpu_quota_writes(quota_us);
        if writes.is_empty() {
            return Err(format!("no CPU quota file in {:?}", self.dirs));
        }
        write_all(&writes)
    }

    /// The files and values that set the CPU quota to `quota_us`: v2's
    /// `cpu.max`, or v1's `cpu.cfs_quota_us` in the `cpu` controller's directory.
    fn cpu_quota_writes(&self, quota_us: u64) -> Vec<(PathBuf, String)> {
        self.dirs
            .iter()
            .find_map(|dir| {
                let v2 = dir.join("cpu.max");
                let v1 = dir.join("cpu.cfs_quota_us");
                if v2.is_file() {
                    Some((v2, format!("{quota_us} {PERIOD_US}")))
                } else {
                    v1.is_file().then(|| (v1, quota_us.to_string()))
                }
            })
            .into_iter()
            .collect()
    }

    /// Move process `pid` (all its threads) into the cgroup; what it starts
    /// afterwards starts inside.
    pub fn add(&self, pid: u32) -> Result<(), String> {
        self.dirs
            .iter()
            .try_for_each(|dir| write(&dir.join("cgroup.procs"), &pid.to_string()))
    }

    /// A command that runs `program` inside the cgroup from its first
    /// instruction: a shell joins it, then becomes `program` (same pid), so
    /// what `program` reads at start (its CPU quota) is the cgroup's.
    pub fn command(&self, program: &Path) -> std::process::Command {
        let mut command = std::process::Command::new("sh");
        command.args(["-c", JOIN_THEN_EXEC, "sh"]);
        for dir in &self.dirs {
            command.arg(dir.join("cgroup.procs"));
        }
        command.arg("--").arg(program);
        command
    }

    /// The cgroup's directories (one per v1 controller, one in v2).
    pub fn dirs(&self) -> &[PathBuf] {
        &self.dirs
    }

    /// How many processes the kernel's out-of-memory killer has killed in the
    /// cgroup so far (`oom_kill` in v1's `memory.oom_control`, v2's
    /// `memory.events`), or `None` where the kernel does not count them.
    pub fn oom_kills(&self) -> Option<u64> {
        self.dirs
            .iter()
            .flat_map(|dir| [dir.join("memory.oom_control"), dir.join("memory.events")])
            .find_map(|file| oom_kill_count(&std::fs::read_to_string(file).ok()?))
    }

    /// The most memory the cgroup's processes held at once so far, in bytes
    /// (v1's `memory.max_usage_in_bytes`, v2's `memory.peak`), or `None` where
    /// the kernel does not keep it.
    pub fn peak_memory_bytes(&self) -> Option<u64> {
        self.memory_figure(["memory.max_usage_in_bytes", "memory.peak"])
    }

    /// The cgroup's memory limit in bytes as the kernel holds it (v1's
    /// `memory.limit_in_bytes`, v2's `memory.max`), or `None` without one.
    pub fn memory_limit_bytes(&self) -> Option<u64> {
        self.memory_figure(["memory.limit_in_bytes", "memory.max"])
    }

    /// The number in the first of `files` that one of the cgroup's directories holds.
    fn memory_figure(&self, files: [&str; 2]) -> Option<u64> {
        self.dirs
            .iter()
            .flat_map(|dir| files.map(|file| dir.join(file)))
            .find_map(|file| std::fs::read_to_string(file).ok()?.trim().parse().ok())
    }

    fn make(&mut self, dir: &Path) -> Result<PathBuf, String> {
        std::fs::create_dir(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        live().push(dir.to_path_buf());
        self.dirs.push(dir.to_path_buf());
        Ok(dir.to_path_buf())
    }
}

/// What puts a cgroup's CPU share back after an on-demand init
/// ([`Cgroup::burst_for_init`]): the files to write, so that it can be
/// handed to the thread that sees init end.
#[derive(Debug, Clone)]
pub struct AfterInit {
    writes: Vec<(PathBuf, String)>,
}

impl AfterInit {
    /// Put the share back. A cgroup removed meanwhile (its environment
    /// stopped during init) makes this an error the caller may ignore.
    pub fn apply(&self) -> Result<(), String> {
        write_all(&self.writes)
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        let mut live = live();
        for dir in self.dirs.iter().rev() {
            // Not in the list any more: the Ctrl-C path removed it already.
            if let Some(at) = live.iter().position(|d| d == dir) {
                live.remove(at);
                remove(dir);
            }
        }
    }
}

/// The path of this process's cgroup in `/proc/self/cgroup` text: v2's
/// (`0::/path`) for `None`, else the v1 hierarchy holding `controller`.
fn own_path<'a>(proc_self_cgroup: &'a str, controller: Option<&str>) -> &'a str {
    proc_self_cgroup
        .lines()
        .find_map(|line| {
            let mut fields = line.splitn(3, ':');
            let (hierarchy, controllers, path) = (fields.next()?, fields.next()?, fields.next()?);
            let matches = match controller {
                None => hierarchy == "0" && controllers.is_empty(),
                Some(c) => controllers.split(',').any(|name| name == c),
            };
            matches.then_some(path)
        })
        .unwrap_or("/")
}

/// The `oom_kill N` counter in the text of `memory.oom_control` (v1) or
/// `memory.events` (v2).
fn oom_kill_count(text: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let (key, value) = line.split_once(' ')?;
        (key == "oom_kill").then(|| value.trim().parse().ok())?
    })
}

/// `mount` joined with the cgroup `path`, or `mount` itself where that is no
/// directory (a container whose cgroup is the mount's root).
fn own_dir(mount: &Path, path: &str) -> PathBuf {
    let dir = mount.join(path.trim_start_matches('/'));
    if dir.is_dir() {
        dir
    } else {
        mount.to_path_buf()
    }
}

fn write(file: &Path, value: &str) -> Result<(), String> {
    std::fs::write(file, value).map_err(|e| format!("cannot write {}: {e}", file.display()))
}

fn write_all(writes: &[(PathBuf, String)]) -> Result<(), String> {
    writes
        .iter()
        .try_for_each(|(file, value)| write(file, value))
}

/// Kill every process left in `dir`, then remove it (retried while the
/// processes exit).
fn remove(dir: &Path) {
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let procs = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
        for pid in procs.split_whitespace() {
            let _ = std::process::Command::new("kill")
                .args(["-KILL", pid])
                .status();
        }
        match std::fs::remove_dir(dir) {
            Ok(()) => return,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
            Err(e) if Instant::now() >= deadline => {
                eprintln!("could not remove cgroup {}: {e}", dir.display());
                return;
            }
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::process::Guard;
    use std::process::Command;

    #[test]
    fn the_quota_is_lambdas_share_capped_by_the_cores() {
        assert_eq!(
            cpu_quota(256, 2),
            Quota {
                quota_us: 14_472,
                capped: false
            }
        );
        assert_eq!(cpu_quota(1_769, 2).quota_us, 100_000);
        assert_eq!(cpu_quota(3_538, 2), cpu_quota(3_538, 8));
        assert_eq!(cpu_quota(3_538, 2).quota_us, 200_000);
        assert_eq!(cpu_quota(885, 2).quota_us, 50_029);
        assert_eq!(
            cpu_quota(10_240, 2),
            Quota {
                quota_us: 200_000,
                capped: true
            }
        );
        assert_eq!(
            cpu_quota(10_240, 8),
            Quota {
                quota_us: 578_859,
                capped: false
            }
        );
        assert_eq!(cpu_quota(128, 0).quota_us, 7_236);
    }

    #[test]
    fn the_share_is_the_functions_rule_on_demand_and_the_memory_per_vcpu_on_lmi() {
        let on_demand = Share::of(3_538, None);
        assert_eq!(on_demand.mb_per_vcpu, shared::vcpus::MB_PER_VCPU);
        assert_eq!(on_demand.vcpus(), 2.0);
        assert!((Share::of(256, None).vcpus() - 256.0 / 1_769.0).abs() < 1e-12);
        let managed = Share::of(
            8_192,
            Some(ManagedInstances {
                max_concurrency: 4,
                memory_gib_per_vcpu: 4,
            }),
        );
        assert_eq!((managed.mb_per_vcpu, managed.vcpus()), (4_096, 2.0));
        // One quota rule for both: CPU time rounded up to the microsecond.
        let odd = Share {
            memory_mb: 3_000,
            mb_per_vcpu: 2_048,
        };
        assert_eq!(quota(odd, 8).quota_us, 146_485);
        assert_eq!(quota(Share::of(256, None), 8).quota_us, 14_472);
    }

    #[test]
    fn an_on_demand_init_gets_a_whole_vcpu_or_the_share_where_larger() {
        assert_eq!(init_quota(cpu_quota(128, 2)), PERIOD_US);
        assert_eq!(init_quota(cpu_quota(1_769, 2)), PERIOD_US);
        assert_eq!(init_quota(cpu_quota(3_538, 2)), 200_000);
        assert_eq!(init_quota(cpu_quota(10_240, 2)), 200_000);
        assert_eq!(init_quota(cpu_quota(128, 1)), PERIOD_US);
    }

    #[test]
    fn on_managed_instances_the_quota_follows_the_memory_per_vcpu() {
        let managed = |ratio| {
            Some(ManagedInstances {
                max_concurrency: 4,
                memory_gib_per_vcpu: ratio,
            })
        };
        // 2,048 MB: one vCPU at 2 GiB per vCPU (1.16 by the 1,769 MB rule).
        assert_eq!(function_quota(2_048, managed(2), 8).quota_us, 100_000);
        assert_eq!(function_quota(2_048, None, 8).quota_us, 115_772);
        assert_eq!(function_quota(2_048, managed(4), 8).quota_us, 50_000);
        assert_eq!(function_quota(8_192, managed(8), 8).quota_us, 100_000);
        assert_eq!(
            function_quota(8_192, managed(2), 2),
            Quota {
                quota_us: 200_000,
                capped: true
            }
        );
    }

    #[test]
    fn own_paths_from_proc_self_cgroup() {
        let v1 = "9:name=systemd:/\n4:memory:/process_api/abc\n2:cpuacct:/\n1:cpu:/x\n0::/\n";
        assert_eq!(own_path(v1, Some("memory")), "/process_api/abc");
        assert_eq!(own_path(v1, Some("cpu")), "/x");
        assert_eq!(own_path(v1, None), "/");
        let joined = "3:cpu,cpuacct:/docker/1:2\n";
        assert_eq!(own_path(joined, Some("cpu")), "/docker/1:2");
        assert_eq!(
            own_path("0::/user.slice/a.scope\n", None),
            "/user.slice/a.scope"
        );
        assert_eq!(own_path("garbage", Some("cpu")), "/");
        assert_eq!(own_path("", None), "/");
    }

    #[test]
    fn oom_kills_are_counted_in_v1_and_v2_files() {
        let v1 = "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n";
        assert_eq!(oom_kill_count(v1), Some(3));
        let v2 = "low 0\nhigh 0\nmax 12\noom 2\noom_kill 1\noom_group_kill 0\n";
        assert_eq!(oom_kill_count(v2), Some(1));
        // Kernels before 4.13 do not count kills in v1.
        assert_eq!(oom_kill_count("oom_kill_disable 0\nunder_oom 0\n"), None);
        assert_eq!(oom_kill_count("oom_kill many\n"), None);
        assert_eq!(oom_kill_count(""), None);
    }

    #[test]
    fn limits_switch_values() {
        // The variable is read as the process has it; only check the parsing
        // of what this run was given.
        match std::env::var(SWITCH).as_deref() {
            Ok("off") => assert_eq!(Limits::from_env(), Ok(Limits::Off)),
            Ok("on") | Err(_) => assert_eq!(Limits::from_env(), Ok(Limits::Enforced)),
            Ok(_) => assert!(Limits::from_env().is_err()),
        }
    }

    /// Whether this machine lets the tests create cgroups; prints why not.
    fn cgroups_writable() -> Option<Cgroup> {
        Cgroup::create(128)
            .inspect_err(|e| eprintln!("skipped: cgroups are not writable here: {e}"))
            .ok()
    }

    #[test]
    fn a_cgroup_holds_its_limits_and_is_removed_with_what_runs_in_it() {
        let Some(cgroup) = cgroups_writable() else {
            return;
        };
        let dirs = cgroup.dirs().to_vec();
        assert!(!dirs.is_empty());
        let limits: Vec<String> = dirs
            .iter()
            .flat_map(|d| {
                [
                    "cpu.cfs_quota_us",
                    "cpu.max",
                    "memory.limit_in_bytes",
                    "memory.max",
                ]
                .map(|f| d.join(f))
            })
            .filter_map(|f| std::fs::read_to_string(f).ok())
            .map(|s| s.trim().to_owned())
            .collect();
        assert!(limits.iter().any(|l| l.starts_with("7236")), "{limits:?}");
        assert!(
            limits.contains(&(128 * 1024 * 1024).to_string()),
            "{limits:?}"
        );
        assert_eq!(cgroup.memory_limit_bytes(), Some(128 * 1024 * 1024));
        assert_eq!(cgroup.cpu_quota_us(), Some(7_236));
        let after = cgroup.burst_for_init().expect("burst");
        assert_eq!(cgroup.cpu_quota_us(), Some(PERIOD_US));
        after.apply().expect("apply");
        assert_eq!(cgroup.cpu_quota_us(), Some(7_236));
        // A process inside that fills a 24 MiB buffer: the peak counts it. It
        // waits for a file, so that it allocates only once it is inside.
        let go = std::env::temp_dir().join(format!("cgroup-peak-{}", std::process::id()));
        let fill = r#"while [ ! -e "$0" ]; do sleep 0.01; done
            exec dd if=/dev/zero of=/dev/null bs=24M count=1 status=none"#;
        let mut filler =
            Guard::spawn("filler", Command::new("sh").args(["-c", fill]).arg(&go)).expect("sh");
        cgroup.add(filler.pid()).expect("add");
        std::fs::write(&go, "").expect("go");
        let deadline = Instant::now() + Duration::from_secs(10);
        while filler.exited().is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = std::fs::remove_file(&go);
        let peak = cgroup.peak_memory_bytes().expect("a peak");
        assert!(peak >= 24 << 20, "peak {peak} bytes");
        let mut sleeper = Guard::spawn("sleeper", Command::new("sleep").arg("300")).expect("sleep");
        cgroup.add(sleeper.pid()).expect("add");
        let own = std::fs::read_to_string(format!("/proc/{}/cgroup", sleeper.pid())).expect("read");
        let name = dirs[0]
            .file_name()
            .expect("name")
            .to_string_lossy()
            .into_owned();
        assert!(own.contains(&name), "{own}");
        drop(cgroup);
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut status = None;
        while status.is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
            status = sleeper.exited();
        }
        assert!(status.is_some(), "the sleeper was killed");
        for dir in &dirs {
            assert!(!dir.exists(), "{} removed", dir.display());
        }
        // The Ctrl-C path removes what is not dropped yet (in this test, not
        // a test of its own: it removes every cgroup of the process).
        let cgroup = Cgroup::create(128).expect("create");
        let dirs = cgroup.dirs().to_vec();
        remove_live();
        for dir in &dirs {
            assert!(!dir.exists(), "{} removed", dir.display());
        }
        drop(cgroup);
    }
}

//! Child processes that are stopped, by pid, when their guard is dropped (also
//! when a test fails or panics), and loopback ports that are free.

use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Process groups started by this process and not yet stopped, for
/// [`stop_all_on_interrupt`].
static LIVE_GROUPS: Mutex<Vec<u32>> = Mutex::new(Vec::new());

fn live_groups() -> std::sync::MutexGuard<'static, Vec<u32>> {
    LIVE_GROUPS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// On Ctrl-C or SIGTERM, stop every process group this process started,
/// remove its cgroups and its hold on `/var/task` ([`crate::task_root`]), then
/// exit with status 130. (The groups do not receive the terminal's Ctrl-C
/// themselves: each runs in a group of its own.)
pub fn stop_all_on_interrupt() -> Result<(), String> {
    ctrlc::set_handler(|| {
        let groups = std::mem::take(&mut *live_groups());
        let descendants: Vec<u32> = groups.iter().flat_map(|pgid| descendants(*pgid)).collect();
        for pgid in &groups {
            signal_group(*pgid, "TERM");
        }
        std::thread::sleep(Duration::from_millis(500));
        for pgid in &groups {
            signal_group(*pgid, "KILL");
        }
        kill_survivors(&descendants);
        crate::cgroup::remove_live();
        crate::task_root::release_all();
        eprintln!("interrupted: stopped {} process group(s)", groups.len());
        std::process::exit(130);
    })
    .map_err(|e| format!("cannot install the Ctrl-C handler: {e}"))
}

/// Every descendant of `pid`, from `/proc/PID/task/*/children` (Linux).
pub fn descendants(pid: u32) -> Vec<u32> {
    let mut found = Vec::new();
    let mut queue = vec![pid];
    while let Some(parent) = queue.pop() {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{parent}/task")) else {
            continue;
        };
        for task in tasks.filter_map(Result::ok) {
            let children =
                std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
            for child in children
                .split_whitespace()
                .filter_map(|c| c.parse::<u32>().ok())
            {
                found.push(child);
                queue.push(child);
            }
        }
    }
    found
}

/// SIGKILL each of `pids` still alive (descendants that left their group).
fn kill_survivors(pids: &[u32]) {
    for pid in pids.iter().filter(|pid| is_alive(**pid)) {
        let _ = Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status();
    }
}

/// Whether `pid` is a live (not zombie) process.
pub fn is_alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            stat.rsplit(')')
                .next()
                .map(|rest| !rest.trim_start().starts_with('Z'))
        })
        .unwrap_or(false)
}

/// Send `signal` to the process group `pgid`.
fn signal_group(pgid: u32, signal: &str) {
    let _ = Command::new("kill")
        .args([&format!("-{signal}"), "--", &format!("-{pgid}")])
        .status();
}

/// Send `signal` (`STOP`, `TERM`, …) to the process `pid`.
pub fn signal(pid: u32, signal: &str) -> Result<(), String> {
    let status = Command::new("kill")
        .args([&format!("-{signal}"), &pid.to_string()])
        .status()
        .map_err(|e| format!("kill: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("kill -{signal} {pid}: {status}"))
    }
}

/// How many of the ports [`free_port`] handed out it remembers.
const REMEMBERED_PORTS: usize = 1024;

/// A free TCP port on 127.0.0.1 (the OS picks it; the listener is closed at
/// once), never one of the last [`REMEMBERED_PORTS`] this process was given
/// (see [`free_listener`]).
pub fn free_port() -> std::io::Result<u16> {
    Ok(free_listener()?.local_addr()?.port())
}

/// A listener on a free 127.0.0.1 port, never one of the last
/// [`REMEMBERED_PORTS`] [`free_port`] or this gave: the OS may hand a port it
/// just freed out again (about once in 20,000 pairs here), and two servers
/// started one after the other would then race for one port, or a listener
/// take the port a server was about to bind.
pub fn free_listener() -> std::io::Result<TcpListener> {
    static GIVEN: Mutex<std::collections::VecDeque<u16>> =
        Mutex::new(std::collections::VecDeque::new());
    loop {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
        let port = listener.local_addr()?.port();
        let mut given = GIVEN
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if !given.contains(&port) {
            if given.len() == REMEMBERED_PORTS {
                given.pop_front();
            }
            given.push_back(port);
            return Ok(listener);
        }
    }
}

/// Wait until something accepts connections on `127.0.0.1:port`.
pub fn wait_for_port(port: u16, timeout: Duration) -> Result<(), String> {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if TcpStream::connect((Ipv4Addr::LOCALHOST, port)).is_ok() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Err(format!(
        "nothing listened on 127.0.0.1:{port} within {timeout:?}"
    ))
}

/// Wait until `ready()` holds, polling while the process of `guard` (named
/// `what`) runs, at most `timeout`; `Err` with the end of its `log` if it
/// exits first.
pub fn wait_until_ready(
    guard: &mut Guard,
    what: &str,
    log: &Path,
    timeout: Duration,
    mut ready: impl FnMut() -> bool,
) -> Result<(), String> {
    let deadline = Instant::now() + timeout;
    while !ready() {
        if let Some(status) = guard.exited() {
            let logs = std::fs::read_to_string(log).unwrap_or_default();
            return Err(format!(
                "{what} exited ({status}) before it listened; the end of its log ({}):\n{}",
                log.display(),
                log_end(&logs)
            ));
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "{what} did not listen within {timeout:?}; see {}",
                log.display()
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

/// The last lines of `logs` (at most 20), for an error message.
pub fn log_end(logs: &str) -> String {
    let lines: Vec<&str> = logs.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}

/// Owns a child process, started in a process group of its own, and stops
/// exactly that group (the child and whatever it started) when dropped.
#[derive(Debug)]
pub struct Guard {
    child: Child,
    name: String,
}

impl Guard {
    /// Start `command` in a new process group; `name` is for messages.
    pub fn spawn(name: impl Into<String>, command: &mut Command) -> Result<Self, String> {
        let name = name.into();
        let child = command.process_group(0).spawn().map_err(|e| {
            format!(
                "{name}: could not start {}: {e}",
                crate::tools::describe(command)
            )
        })?;
        live_groups().push(child.id());
        Ok(Self { child, name })
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the process has exited (and its status, if so).
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Stop the process: SIGTERM, then SIGKILL after `grace` (some servers,
    /// the emulator among them, ignore the first SIGTERM). Descendants that left
    /// the group (the emulator starts the function in a group of its own) are
    /// stopped by pid if they outlive it.
    pub fn stop(&mut self, grace: Duration) {
        live_groups().retain(|pgid| *pgid != self.pid());
        if self.exited().is_some() {
            return;
        }
        // Collected while the child is alive and not yet reaped, so neither its
        // pid (the group id) nor its descendants' pids can have been reused.
        let descendants = descendants(self.pid());
        signal_group(self.pid(), "TERM");
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline && self.exited().is_none() {
            std::thread::sleep(Duration::from_millis(20));
        }
        if self.exited().is_none() {
            signal_group(self.pid(), "KILL");
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        kill_survivors(&descendants);
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        self.stop(Duration::from_secs(2));
        if std::thread::panicking() {
            eprintln!("stopped {} (pid {})", self.name, self.pid());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_port_hands_out_no_port_twice_within_its_memory() {
        // The OS's own choice repeats about 10 times in 768 binds (the
        // ephemeral range holds about 28,000 ports); the rest of the memory is
        // room for the other tests' ports meanwhile.
        let ports: Vec<u16> = (0..REMEMBERED_PORTS * 3 / 4)
            .map(|_| free_port().expect("port"))
            .collect();
        let distinct: std::collections::BTreeSet<_> = ports.iter().collect();
        assert_eq!(distinct.len(), ports.len());
    }

    #[test]
    fn stop_also_ends_descendants_in_other_groups() {
        // A shell that starts a sleeper in a new session (so outside its process
        // group) and ignores SIGTERM itself, like an emulator that ignores the
        // first SIGTERM and leaves its runtime behind.
        let mut guard = Guard::spawn(
            "shell",
            Command::new("sh").args(["-c", "trap '' TERM; setsid sleep 300 & wait"]),
        )
        .expect("spawn");
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut sleeper = Vec::new();
        while sleeper.is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
            sleeper = descendants(guard.pid());
        }
        assert_eq!(sleeper.len(), 1, "the sleeper started");
        assert!(is_alive(sleeper[0]));
        guard.stop(Duration::from_millis(200));
        std::thread::sleep(Duration::from_millis(100));
        assert!(
            !is_alive(sleeper[0]),
            "the sleeper outside the group was stopped too"
        );
        assert!(guard.exited().is_some());
    }
}

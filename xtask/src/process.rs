//! Child processes that are stopped, by pid, when their guard is dropped (also
//! when a test fails or panics), and loopback ports that are free.

use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
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

/// On Ctrl-C or SIGTERM, stop every process group this process started, then
/// exit with status 130. (The groups do not receive the terminal's Ctrl-C
/// themselves: each runs in a group of its own.)
pub fn stop_all_on_interrupt() -> Result<(), String> {
    ctrlc::set_handler(|| {
        let groups = std::mem::take(&mut *live_groups());
        for pgid in &groups {
            signal_group(*pgid, "TERM");
        }
        std::thread::sleep(Duration::from_millis(500));
        for pgid in &groups {
            signal_group(*pgid, "KILL");
        }
        eprintln!("interrupted: stopped {} process group(s)", groups.len());
        std::process::exit(130);
    })
    .map_err(|e| format!("cannot install the Ctrl-C handler: {e}"))
}

/// Send `signal` to the process group `pgid`.
fn signal_group(pgid: u32, signal: &str) {
    let _ = Command::new("kill")
        .args([&format!("-{signal}"), "--", &format!("-{pgid}")])
        .status();
}

/// A free TCP port on 127.0.0.1 (the OS picks it; the listener is closed at once).
pub fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?
        .local_addr()?
        .port())
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
    /// the emulator among them, ignore the first SIGTERM).
    pub fn stop(&mut self, grace: Duration) {
        live_groups().retain(|pgid| *pgid != self.pid());
        if self.exited().is_some() {
            return;
        }
        // The child is ours and not yet reaped, so its pid (the group id) cannot
        // have been reused.
        signal_group(self.pid(), "TERM");
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if self.exited().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        signal_group(self.pid(), "KILL");
        let _ = self.child.kill();
        let _ = self.child.wait();
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

//! `/var/task`, the mount point of a Lambda Managed Instances environment.
//!
//! With `AWS_LAMBDA_MAX_CONCURRENCY` set, the runtime interface emulator of
//! aws-sam-cli 1.170 ignores the bootstrap named on its command line and runs
//! the first of `/var/runtime/bootstrap`, `/var/task/bootstrap` and
//! `/opt/bootstrap` that exists. So [`crate::emulator`] starts such an
//! emulator in a private mount namespace of its own (`unshare --mount
//! --propagation private`, as root), where the function's `bootstrap` is
//! mounted under `/var/task` (`/var/task/bootstrap` starts it: see
//! `emulator.rs`): no other process sees that mount, and it goes with the
//! namespace's last process.
//!
//! The mount point itself must exist, and a directory made inside a namespace
//! is made on the machine's file system. [`TaskRoot::lease`] creates
//! `/var/task` when it is missing; the last lease, of any process, removes it
//! again if the local stack created it and it is still empty. Each process
//! holding a lease holds a shared lock on [`USERS_FILE`]; creating and removing
//! happen under an exclusive lock on [`LOCK_FILE`], which also records that the
//! local stack created the directory. So a test and `cargo xtask run` side by
//! side never remove it from under each other, and a run stopped by `kill -9`
//! leaves a directory the next run's last lease removes.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

/// Where the emulator looks for the bootstrap.
pub const TASK_ROOT: &str = "/var/task";
/// Where, inside the namespace, the function's own bootstrap is mounted: the
/// command line of a Managed Instances environment's runtime process.
pub const FUNCTION_BOOTSTRAP: &str = "/var/task/function/bootstrap";
/// Held exclusively while [`TASK_ROOT`] is created or removed; records
/// whether the local stack created the directory.
pub const LOCK_FILE: &str = "/run/local-stack-var-task.lock";
/// Held shared by every process with a lease.
pub const USERS_FILE: &str = "/run/local-stack-var-task.users";
/// What [`LOCK_FILE`] holds while the local stack owns [`TASK_ROOT`].
const CREATED: &str = "created by the local stack\n";

/// The files one task root is coordinated through.
#[derive(Debug, Clone)]
struct Paths {
    dir: PathBuf,
    lock: PathBuf,
    users: PathBuf,
}

impl Paths {
    fn system() -> Self {
        Self {
            dir: PathBuf::from(TASK_ROOT),
            lock: PathBuf::from(LOCK_FILE),
            users: PathBuf::from(USERS_FILE),
        }
    }
}

/// This process's hold on a task root: the shared lock, and how many leases
/// use it.
struct Held {
    paths: Paths,
    users: File,
    leases: usize,
}

/// This process's hold on [`TASK_ROOT`], if any lease is live.
static HELD: Mutex<Option<Held>> = Mutex::new(None);

fn held() -> MutexGuard<'static, Option<Held>> {
    HELD.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A lease on [`TASK_ROOT`]: the directory exists while any lease is live.
#[derive(Debug)]
pub struct TaskRoot {
    /// Whose directory this is (tests use their own).
    dir: PathBuf,
}

impl TaskRoot {
    /// A lease on `/var/task`, which is created if missing.
    pub fn lease() -> Result<Self, String> {
        lease(&Paths::system())
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.dir
    }
}

impl Drop for TaskRoot {
    fn drop(&mut self) {
        let mut state = held();
        let last = match state.as_mut() {
            Some(held) if held.paths.dir == self.dir => {
                held.leases -= 1;
                held.leases == 0
            }
            // Taken already by the Ctrl-C path.
            _ => false,
        };
        if last && let Some(held) = state.take() {
            release(held);
        }
    }
}

/// Give up this process's hold on [`TASK_ROOT`] whatever its leases, and
/// remove the directory if no other process uses it (for the Ctrl-C handler,
/// which exits without running destructors, after stopping the processes).
pub fn release_all() {
    if let Some(held) = held().take() {
        release(held);
    }
}

fn lease(paths: &Paths) -> Result<TaskRoot, String> {
    let mut state = held();
    if let Some(held) = state.as_mut() {
        if held.paths.dir != paths.dir {
            return Err(format!(
                "{} is in use; one task root per process",
                held.paths.dir.display()
            ));
        }
        held.leases += 1;
        return Ok(TaskRoot {
            dir: paths.dir.clone(),
        });
    }
    let lock = open(&paths.lock)?;
    lock.lock()
        .map_err(|e| format!("lock {}: {e}", paths.lock.display()))?;
    if !paths.dir.exists() {
        std::fs::create_dir_all(&paths.dir)
            .map_err(|e| format!("cannot create {}: {e}", paths.dir.display()))?;
        mark(&lock, CREATED)?;
    } else if !paths.dir.is_dir() {
        return Err(format!("{} is not a directory", paths.dir.display()));
    }
    let users = open(&paths.users)?;
    users
        .lock_shared()
        .map_err(|e| format!("lock {}: {e}", paths.users.display()))?;
    // The exclusive lock ends with `lock`, once this process counts as a user.
    drop(lock);
    *state = Some(Held {
        paths: paths.clone(),
        users,
        leases: 1,
    });
    Ok(TaskRoot {
        dir: paths.dir.clone(),
    })
}

/// End `held`, then remove the directory if no process uses it any more, the
/// local stack created it and it is empty (nothing is mounted on it here:
/// mounts live in the namespaces). Problems are printed, not returned: this
/// runs on drop.
fn release(held: Held) {
    let Held { paths, users, .. } = held;
    drop(users);
    if let Err(e) = remove_if_unused(&paths) {
        eprintln!("{}: {e}", paths.dir.display());
    }
}

fn remove_if_unused(paths: &Paths) -> Result<(), String> {
    let lock = open(&paths.lock)?;
    lock.lock()
        .map_err(|e| format!("lock {}: {e}", paths.lock.display()))?;
    let users = open(&paths.users)?;
    if users.try_lock().is_err() {
        // Another process holds a lease: it removes the directory later.
        return Ok(());
    }
    let mut mark_text = String::new();
    (&lock)
        .read_to_string(&mut mark_text)
        .map_err(|e| format!("read {}: {e}", paths.lock.display()))?;
    let empty = std::fs::read_dir(&paths.dir).map(|mut entries| entries.next().is_none());
    match (mark_text == CREATED, empty) {
        (true, Ok(true)) => {
            std::fs::remove_dir(&paths.dir)
                .map_err(|e| format!("cannot remove {}: {e}", paths.dir.display()))?;
            mark(&lock, "")
        }
        // Gone already: forget it was ours.
        (true, Err(e)) if e.kind() == std::io::ErrorKind::NotFound => mark(&lock, ""),
        // Not ours, or someone put files in it: left as it is.
        _ => Ok(()),
    }
}

fn open(path: &Path) -> Result<File, String> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(|e| format!("{}: {e}", path.display()))
}

/// Make the lock file hold `text` (it is locked by the caller).
fn mark(lock: &File, text: &str) -> Result<(), String> {
    let mut file = lock;
    file.set_len(0)
        .and_then(|()| std::io::Seek::rewind(&mut file))
        .and_then(|()| file.write_all(text.as_bytes()))
        .map_err(|e| format!("cannot write the task root's lock file: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch() -> Paths {
        let base = std::env::temp_dir().join(format!("task-root-test-{}", std::process::id()));
        std::fs::create_dir_all(&base).expect("scratch");
        Paths {
            dir: base.join("task"),
            lock: base.join("lock"),
            users: base.join("users"),
        }
    }

    /// One test, as the hold is one per process: its own paths throughout.
    #[test]
    fn the_last_lease_removes_what_the_first_created_and_nothing_else() {
        let paths = scratch();
        let first = lease(&paths).expect("lease");
        let second = lease(&paths).expect("second lease");
        assert!(paths.dir.is_dir());
        assert_eq!(first.path(), paths.dir);
        drop(first);
        assert!(paths.dir.is_dir(), "still leased");
        // Another process's lease (another open file: its own lock) keeps it.
        let other = open(&paths.users).expect("open");
        other.lock_shared().expect("shared");
        drop(second);
        assert!(paths.dir.is_dir(), "another process still uses it");
        drop(other);
        // Its own last release finds no user and removes it.
        let again = lease(&paths).expect("lease again");
        drop(again);
        assert!(!paths.dir.exists(), "removed by the last lease");
        // A directory that was there before is not the local stack's.
        std::fs::create_dir_all(&paths.dir).expect("mkdir");
        drop(lease(&paths).expect("lease"));
        assert!(paths.dir.is_dir(), "left as it was");
        // Nor is one somebody put a file in.
        std::fs::remove_dir(&paths.dir).expect("rmdir");
        let leased = lease(&paths).expect("lease");
        std::fs::write(paths.dir.join("theirs"), "x").expect("a file");
        drop(leased);
        assert!(paths.dir.join("theirs").is_file(), "left with the file");
        // Ctrl-C: given up whatever the leases.
        std::fs::remove_file(paths.dir.join("theirs")).expect("rm");
        std::fs::remove_dir(&paths.dir).expect("rmdir");
        let forgotten = lease(&paths).expect("lease");
        release_all();
        assert!(!paths.dir.exists(), "removed on Ctrl-C");
        drop(forgotten);
        let _ = std::fs::remove_dir_all(paths.lock.parent().expect("base"));
    }
}

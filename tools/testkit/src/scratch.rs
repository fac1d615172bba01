//! Fresh paths for logs and data under `target/e2e-logs/`.

use local_stack::workspace_root;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

/// A fresh path under `target/e2e-logs/` for a log or data folder named `what`.
pub fn scratch(what: &str) -> PathBuf {
    static RUN: AtomicUsize = AtomicUsize::new(0);
    let dir = workspace_root().join("target").join("e2e-logs");
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    dir.join(format!(
        "{what}-{}-{}",
        std::process::id(),
        RUN.fetch_add(1, Ordering::Relaxed)
    ))
}

/// A folder for DynamoDB Local's database ([`LocalDynamoDb::start_persistent`]),
/// removed on drop. In `/dev/shm` where there is one: memory, so no disk sync
/// per write (on disk, a 5,000-message drain took about a third longer), and
/// still there when the server is killed; else under `target/e2e-logs/`.
pub struct DataDir(PathBuf);

impl DataDir {
    /// A fresh folder named after `what` (created by the server).
    pub fn new(what: &str) -> Self {
        let scratch = scratch(what);
        let shm = Path::new("/dev/shm");
        match scratch.file_name() {
            Some(name) if shm.is_dir() => Self(shm.join(name)),
            _ => Self(scratch),
        }
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for DataDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// File name of `path`, for messages.
pub fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

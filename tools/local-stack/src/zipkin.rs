//! Zipkin, a real trace store with a viewer, on a free 127.0.0.1 port
//! (in memory, bounded by its own span limit), stopped on drop. The local
//! X-Ray daemon ([`crate::xray_daemon`]) hands it the functions' spans.

use crate::jvm::{self, Compiler};
use crate::process::{Guard, free_port, wait_for_port};
use crate::tools;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

/// Spans Zipkin keeps in memory before it drops the oldest traces.
const MAX_SPANS: u32 = 200_000;

/// A running Zipkin.
#[derive(Debug)]
pub struct Zipkin {
    // Fields drop in order: the process stops before its folder goes.
    _guard: Guard,
    _scratch: Scratch,
    port: u16,
}

/// Java's temporary folder for one Zipkin, removed on drop: its HTTP server
/// unpacks a native library (brotli) there at each start, which would
/// otherwise pile up in `/tmp`.
#[derive(Debug)]
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl Zipkin {
    /// Start Zipkin on a free loopback port; its output goes to `log`.
    pub fn start(log: &Path, compiler: Compiler) -> Result<Self, String> {
        let jar = tools::zipkin_jar();
        tools::require(&jar, "Zipkin")?;
        let port = free_port().map_err(|e| e.to_string())?;
        let out = std::fs::File::create(log).map_err(|e| format!("{}: {e}", log.display()))?;
        let err = out.try_clone().map_err(|e| e.to_string())?;
        let scratch = Scratch(PathBuf::from(format!("{}.tmp", log.display())));
        let _ = std::fs::remove_dir_all(&scratch.0);
        std::fs::create_dir_all(&scratch.0).map_err(|e| format!("{}: {e}", scratch.0.display()))?;
        let mut command = jvm::command("256m", compiler);
        command
            .arg(format!("-Djava.io.tmpdir={}", scratch.0.display()))
            .arg("-jar")
            .arg(&jar)
            // Armeria's port, bound to loopback only (Zipkin's own
            // `QUERY_PORT` would listen on every address).
            .arg("--armeria.ports[0].ip=127.0.0.1")
            .arg(format!("--armeria.ports[0].port={port}"))
            .arg("--armeria.ports[0].protocols[0]=http")
            .env("STORAGE_TYPE", "mem")
            .env("MEM_MAX_SPANS", MAX_SPANS.to_string())
            .env("SELF_TRACING_ENABLED", "false")
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err);
        let guard = Guard::spawn("Zipkin", &mut command)?;
        wait_for_port(port, Duration::from_secs(60))
            .map_err(|e| format!("Zipkin: {e}; see {}", log.display()))?;
        Ok(Self {
            _guard: guard,
            _scratch: scratch,
            port,
        })
    }

    /// `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Where a person sees the trace `trace_id` (32 hex digits).
    pub fn trace_url(&self, trace_id: &str) -> String {
        format!("{}/zipkin/traces/{trace_id}", self.endpoint())
    }

    /// The spans Zipkin holds of the trace `trace_id` (Zipkin's JSON v2), or
    /// none when it holds none.
    pub fn trace(&self, trace_id: &str) -> Result<Vec<serde_json::Value>, String> {
        let url = format!("{}/api/v2/trace/{trace_id}", self.endpoint());
        match ureq::get(&url).call() {
            Ok(mut answer) => answer
                .body_mut()
                .read_json()
                .map_err(|e| format!("{url}: {e}")),
            Err(ureq::Error::StatusCode(404)) => Ok(Vec::new()),
            Err(e) => Err(format!("{url}: {e}")),
        }
    }
}

/// Send `spans` (Zipkin's JSON v2) to the Zipkin at `endpoint`.
pub fn post(endpoint: &str, spans: &[serde_json::Value]) -> Result<(), String> {
    let url = format!("{endpoint}/api/v2/spans");
    ureq::post(&url)
        .send_json(spans)
        .map(|_| ())
        .map_err(|e| format!("{url}: {e}"))
}

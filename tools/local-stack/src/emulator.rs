//! A function binary running under the Lambda runtime interface emulator (the
//! one `sam local invoke` runs inside its container), on loopback ports, no
//! Docker needed.
//!
//! A function past its memory limit is killed by the kernel mid-invocation;
//! the emulator then answers `Runtime.ExitError` ("signal: killed") and starts
//! a fresh process at the next invocation (a cold start). Lambda reports that
//! kill as `Runtime.OutOfMemory`, so [`Emulator::invoke`] does too, when the
//! cgroup's out-of-memory killer fired during the invocation.

use crate::cgroup::{Cgroup, Limits};
use crate::pool::{Invoked, Options};
use crate::process::{Guard, free_port, wait_for_port};
use crate::template::Function;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// An emulator with one function behind it, stopped on drop.
#[derive(Debug)]
pub struct Emulator {
    /// Dropped first: the cgroup is removed once its processes are stopped.
    guard: Guard,
    /// The function's CPU quota and memory limit, if enforced.
    cgroup: Option<Cgroup>,
    url: String,
    log: PathBuf,
    agent: ureq::Agent,
}

/// One invocation's outcome.
#[derive(Debug, Clone)]
pub struct Invocation {
    /// HTTP status from the emulator (200 even for handler errors, as on Lambda).
    pub status: u16,
    /// The response body: the handler's JSON or an error object.
    pub body: String,
}

impl Invocation {
    /// The body as JSON.
    pub fn json(&self) -> Result<serde_json::Value, String> {
        serde_json::from_str(&self.body).map_err(|e| format!("not JSON ({e}): {}", self.body))
    }
}

impl Emulator {
    /// Start `bootstrap` under the emulator found at `rie`, with only the
    /// variables Lambda sets, the function's own (`spec.env`), then `extra_env`
    /// (which wins); output goes to `log`. The emulator, and so the function,
    /// runs in a cgroup with Lambda's CPU share and memory limit for
    /// `spec.memory_mb` (see [`crate::cgroup`]; `LOCAL_LIMITS=off` turns it off).
    pub fn start(
        rie: &Path,
        bootstrap: &Path,
        spec: &Function,
        extra_env: &[(&str, &str)],
        log: &Path,
    ) -> Result<Self, String> {
        Self::start_with(rie, bootstrap, spec, extra_env, log, Limits::from_env()?)
    }

    /// [`Emulator::start`] with the limits given, not read from `LOCAL_LIMITS`.
    pub fn start_with(
        rie: &Path,
        bootstrap: &Path,
        spec: &Function,
        extra_env: &[(&str, &str)],
        log: &Path,
        limits: Limits,
    ) -> Result<Self, String> {
        let cgroup = Cgroup::for_function(spec.memory_mb, limits);
        let port = free_port().map_err(|e| format!("free port: {e}"))?;
        let api_port = free_port().map_err(|e| format!("free port: {e}"))?;
        // Appending, so that lines written here (out of memory) land after the
        // emulator's, never over them.
        std::fs::File::create(log).map_err(|e| format!("{}: {e}", log.display()))?;
        let out = std::fs::OpenOptions::new()
            .append(true)
            .open(log)
            .map_err(|e| format!("{}: {e}", log.display()))?;
        let err = out
            .try_clone()
            .map_err(|e| format!("{}: {e}", log.display()))?;
        let mut command = Command::new(rie);
        command
            .arg("--runtime-interface-emulator-address")
            .arg(format!("127.0.0.1:{port}"))
            .arg("--runtime-api-address")
            .arg(format!("127.0.0.1:{api_port}"))
            .arg(bootstrap)
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("AWS_LAMBDA_FUNCTION_NAME", &spec.logical_id)
            .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
            .env(
                "AWS_LAMBDA_FUNCTION_MEMORY_SIZE",
                spec.memory_mb.to_string(),
            )
            .env("AWS_LAMBDA_FUNCTION_TIMEOUT", spec.timeout_s.to_string())
            // Every local environment starts when an invocation needs it, as
            // an on-demand cold start does (the test's own environment may
            // say otherwise: it is applied after these).
            .env("AWS_LAMBDA_INITIALIZATION_TYPE", "on-demand")
            .env("AWS_REGION", crate::local_aws::REGION)
            .env("AWS_DEFAULT_REGION", crate::local_aws::REGION)
            // Local runs never reach AWS: no instance-metadata lookups for
            // credentials, and every AWS service not pointed elsewhere goes to
            // a closed loopback port (fails at once).
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .env("AWS_ENDPOINT_URL", crate::local_aws::NO_SERVER)
            .envs(spec.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .envs(extra_env.iter().copied())
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err);
        let guard = Guard::spawn(format!("emulator for {}", spec.logical_id), &mut command)?;
        // The emulator starts the function at the first invocation, so the
        // function starts inside the cgroup too.
        if let Some(cgroup) = &cgroup {
            cgroup.add(guard.pid())?;
        }
        wait_for_port(port, Duration::from_secs(10))?;
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(u64::from(spec.timeout_s) + 30)))
            .build()
            .into();
        Ok(Self {
            guard,
            cgroup,
            url: format!("http://127.0.0.1:{port}/2015-03-31/functions/function/invocations"),
            log: log.to_path_buf(),
            agent,
        })
    }

    /// Invoke the function with `payload` (any bytes: the suite also sends
    /// what is not JSON), as `sam local invoke -e` does. A function killed for
    /// exceeding its memory answers as on Lambda: `Runtime.OutOfMemory`, one
    /// line in the log.
    pub fn invoke(&self, payload: impl AsRef<[u8]>) -> Result<Invocation, String> {
        self.invoke_with(payload.as_ref(), &Options::default())
            .map(|invoked| invoked.invocation)
    }

    /// [`Emulator::invoke`] with a client context (the emulator takes the
    /// Invoke API's `X-Amz-Client-Context` header and hands the runtime its
    /// decoded JSON, as Lambda does) and, with [`Options::tail`], the log
    /// lines written during this invocation, up to its `REPORT` line.
    pub fn invoke_with(&self, payload: &[u8], options: &Options) -> Result<Invoked, String> {
        let log_start = options
            .tail
            .then(|| std::fs::metadata(&self.log).map_or(0, |m| m.len()));
        let kills_before = self.oom_kills();
        let mut invocation = self.post(payload, options.client_context.as_deref())?;
        let killed = matches!(
            (kills_before, self.oom_kills()),
            (Some(before), Some(after)) if after > before
        );
        if let Some((answer, line)) = killed.then(|| out_of_memory(&invocation)).flatten() {
            std::fs::OpenOptions::new()
                .append(true)
                .open(&self.log)
                .and_then(|mut log| {
                    std::io::Write::write_all(&mut log, format!("{line}\n").as_bytes())
                })
                .map_err(|e| format!("{}: {e}", self.log.display()))?;
            invocation = answer;
        }
        let log = log_start.map(|start| self.log_since(start));
        Ok(Invoked { invocation, log })
    }

    /// The log from byte `start` to the end of the first `REPORT` line after
    /// it (the emulator writes it just after answering: waited for at most
    /// [`REPORT_WAIT`]), or to the end of the log without one.
    fn log_since(&self, start: u64) -> Vec<u8> {
        let deadline = std::time::Instant::now() + REPORT_WAIT;
        loop {
            let mut part = read_from(&self.log, start);
            if let Some(end) = report_end(&part) {
                part.truncate(end);
                return part;
            }
            if std::time::Instant::now() >= deadline {
                return part;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The out-of-memory kills in the function's cgroup so far (`None` without one).
    pub fn oom_kills(&self) -> Option<u64> {
        self.cgroup.as_ref().and_then(Cgroup::oom_kills)
    }

    /// The most memory the emulator and the function held at once so far, in
    /// bytes, as their cgroup counts it (`None` without one).
    pub fn peak_memory_bytes(&self) -> Option<u64> {
        self.cgroup.as_ref().and_then(Cgroup::peak_memory_bytes)
    }

    /// The memory limit of the function's cgroup, in bytes (`None` without one).
    pub fn memory_limit_bytes(&self) -> Option<u64> {
        self.cgroup.as_ref().and_then(Cgroup::memory_limit_bytes)
    }

    fn post(&self, payload: &[u8], client_context: Option<&str>) -> Result<Invocation, String> {
        let mut request = self
            .agent
            .post(&self.url)
            .header("content-type", "application/json");
        if let Some(context) = client_context {
            request = request.header("X-Amz-Client-Context", context);
        }
        let response = request
            .send(payload)
            .map_err(|e| format!("invoke {}: {e}", self.url))?;
        let status = response.status().as_u16();
        let body = response
            .into_body()
            .read_to_string()
            .map_err(|e| format!("read response: {e}"))?;
        Ok(Invocation { status, body })
    }

    /// The invoke URL (`POST` an event to it).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Everything the emulator and the function printed so far.
    pub fn logs(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The logs once `done` holds for them, or as they are after 5 s (the
    /// emulator writes an invocation's `REPORT` line just after it answers).
    pub fn logs_when(&self, done: impl Fn(&str) -> bool) -> String {
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        let mut logs = self.logs();
        while !done(&logs) && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
            logs = self.logs();
        }
        logs
    }

    /// The init duration the emulator reported for the cold start, in ms
    /// (`INIT REPORT(durationMs: X)`), once the first invocation started it.
    pub fn init_duration_ms(&self) -> Option<f64> {
        init_duration_ms(&self.logs())
    }

    /// The emulator's process id.
    pub fn pid(&self) -> u32 {
        self.guard.pid()
    }

    /// Stop the emulator and the function now (dropping does the same).
    pub fn stop(mut self) {
        self.guard.stop(Duration::from_secs(2));
    }
}

/// How long [`Emulator::invoke_with`] waits for an invocation's `REPORT` line.
const REPORT_WAIT: Duration = Duration::from_secs(2);

/// The bytes of the file at `path` from `start` on (none if it cannot be read).
fn read_from(path: &Path, start: u64) -> Vec<u8> {
    use std::io::{Read, Seek, SeekFrom};
    let mut bytes = Vec::new();
    let read = std::fs::File::open(path).and_then(|mut file| {
        file.seek(SeekFrom::Start(start))?;
        file.read_to_end(&mut bytes)
    });
    if read.is_err() {
        bytes.clear();
    }
    bytes
}

/// The end (after its newline) of the first complete `REPORT RequestId:`
/// line in `log`.
fn report_end(log: &[u8]) -> Option<usize> {
    const REPORT: &[u8] = b"REPORT RequestId:";
    let at = log.windows(REPORT.len()).position(|w| w == REPORT)?;
    let newline = log[at..].iter().position(|&b| b == b'\n')?;
    Some(at + newline + 1)
}

/// Lambda's `errorType` for a function killed for exceeding its memory.
pub const OUT_OF_MEMORY: &str = "Runtime.OutOfMemory";

/// The emulator's answer for a killed process (`Runtime.ExitError`) as Lambda
/// answers it when the kill was for memory: `Runtime.OutOfMemory`, the same
/// message ("RequestId: ... Error: Runtime exited with error: signal: killed"),
/// a function error (HTTP 200), and the line Lambda logs for it (the message,
/// then the error type). `None` for any other answer.
fn out_of_memory(answer: &Invocation) -> Option<(Invocation, String)> {
    let json = answer.json().ok()?;
    if json["errorType"] != "Runtime.ExitError" {
        return None;
    }
    let message = json["errorMessage"].as_str()?;
    let body = serde_json::json!({ "errorType": OUT_OF_MEMORY, "errorMessage": message });
    let answer = Invocation {
        status: 200,
        body: body.to_string(),
    };
    Some((answer, format!("{message} {OUT_OF_MEMORY}")))
}

/// The init duration in emulator output `logs`, in ms (`INIT REPORT(durationMs: X)`).
pub fn init_duration_ms(logs: &str) -> Option<f64> {
    logs.lines().find_map(|line| {
        let rest = line.split("INIT REPORT(durationMs: ").nth(1)?;
        rest.split(')').next()?.trim().parse().ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(status: u16, body: &str) -> Invocation {
        Invocation {
            status,
            body: body.into(),
        }
    }

    #[test]
    fn a_killed_runtime_is_reported_out_of_memory_as_on_lambda() {
        let message = "RequestId: 1-2 Error: Runtime exited with error: signal: killed";
        let killed = answer(
            502,
            &serde_json::json!({ "errorType": "Runtime.ExitError", "errorMessage": message })
                .to_string(),
        );
        let (reported, line) = out_of_memory(&killed).expect("out of memory");
        assert_eq!(reported.status, 200);
        assert_eq!(
            reported.json().expect("JSON"),
            serde_json::json!({ "errorType": "Runtime.OutOfMemory", "errorMessage": message })
        );
        assert_eq!(line, format!("{message} Runtime.OutOfMemory"));
    }

    #[test]
    fn an_invocations_log_ends_with_its_report_line() {
        let log = b"START RequestId: 1\nhello\nEND RequestId: 1\nREPORT RequestId: 1\tDuration: 2 ms\t\nSTART RequestId: 2\n";
        let end = report_end(log).expect("a REPORT line");
        assert!(log[..end].ends_with(b"2 ms\t\n"));
        assert_eq!(report_end(b"REPORT RequestId: 1 no newline yet"), None);
        assert_eq!(report_end(b"START RequestId: 1\n"), None);
    }

    #[test]
    fn other_answers_are_not_out_of_memory() {
        for body in [
            r#"{"ok":true}"#,
            r#"{"errorType":"Runtime.Unhandled","errorMessage":"x"}"#,
            r#"{"errorType":"Runtime.ExitError"}"#,
            "not JSON",
            "",
        ] {
            assert!(out_of_memory(&answer(200, body)).is_none(), "{body}");
        }
    }
}

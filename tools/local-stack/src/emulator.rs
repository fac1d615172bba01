//! A function binary running under the Lambda runtime interface emulator (the
//! one `sam local invoke` runs inside its container), on loopback ports, no
//! Docker needed.
//!
//! A function past its memory limit is killed by the kernel mid-invocation;
//! the emulator then answers `Runtime.ExitError` ("signal: killed") and starts
//! a fresh process at the next invocation (a cold start). Lambda reports that
//! kill as `Runtime.OutOfMemory`, so [`Emulator::invoke`] does too, when the
//! cgroup's out-of-memory killer fired during the invocation.
//!
//! **Lambda Managed Instances** ([`Emulator::start_managed`]): one environment
//! serves up to `PerExecutionEnvironmentMaxConcurrency` invocations at once.
//! The emulator does so with `AWS_LAMBDA_MAX_CONCURRENCY` set (checked with
//! aws-sam-cli 1.170's: 4 invocations sleeping 1 s each answered in 1.02 s by
//! one runtime process). In that mode it differs from the on-demand one:
//!
//! - it ignores the bootstrap named on its command line and runs
//!   `/var/task/bootstrap` (or `/var/runtime/bootstrap`, `/opt/bootstrap`):
//!   it runs in a private mount namespace where the function's bootstrap is
//!   mounted there ([`crate::task_root`]), through a script that points it
//!   at the runtime API proxy ([`crate::runtime_api_proxy`]), as on demand;
//! - it runs init at once, not at the first invocation, so the process joins
//!   its cgroup before the emulator starts (the namespace's shell writes its
//!   own pid into `cgroup.procs`), and writes no `INIT REPORT` line: the init
//!   duration is the function's own (`cold start: first invocation`, `init_ms`);
//! - an invocation that finds none of the runtime's workers waiting on `/next`
//!   is answered at once with 400 `Runtime.Unavailable`, even below the
//!   maximum, while a worker is between its answer and its next `/next` (28%
//!   of back-to-back invocations from 2 clients at a maximum of 2). The pool
//!   keeps at most the maximum in flight, so [`Emulator::invoke_with`] sends
//!   such an invocation again until a worker takes it (at most the function's
//!   timeout); past the maximum it would be refused the same way;
//! - a runtime that exits ends the emulator too (exit 1): init failing (the
//!   invocation waiting for it gets `Runtime.ExitError`, later ones find
//!   nothing listening and their error quotes the end of the log), or a kill
//!   for memory (answered `Runtime.OutOfMemory`, as on demand, though the
//!   emulator gives no message). Such an environment has [`Emulator::ended`]:
//!   the pool starts a fresh one in its place.

use crate::cgroup::{Cgroup, Limits};
use crate::managed_instances::ManagedInstances;
use crate::process::{Guard, free_port, log_end, wait_until_ready};
use crate::runtime_api_proxy::{InitEnd, RuntimeProxy};
use crate::task_root::{FUNCTION_BOOTSTRAP, TASK_ROOT, TaskRoot};
use crate::template::Function;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The variable that tells a function how Lambda initialised its environment.
pub const INITIALIZATION_TYPE: &str = "AWS_LAMBDA_INITIALIZATION_TYPE";
/// [`INITIALIZATION_TYPE`] of an environment started by an invocation.
const ON_DEMAND: &str = "on-demand";

/// An emulator with one function behind it, stopped on drop.
#[derive(Debug)]
pub struct Emulator {
    /// Dropped first: the cgroup is removed once its processes are stopped.
    guard: Guard,
    /// The function's CPU quota and memory limit, if enforced.
    cgroup: Option<Cgroup>,
    /// `/var/task`, leased while a Managed Instances environment runs
    /// (dropped after its processes, so after the namespace's mounts).
    _task_root: Option<TaskRoot>,
    /// Lambda Managed Instances settings; `None`: on demand.
    managed: Option<ManagedInstances>,
    /// The runtime API proxy: hands the runtime each invocation's trace header.
    runtime_proxy: RuntimeProxy,
    /// The function's timeout.
    timeout: Duration,
    /// Whether its runtime exited (Managed Instances: the emulator with it).
    ended: std::sync::atomic::AtomicBool,
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

/// What an invocation asks for beyond its payload.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Options {
    /// `X-Amz-Client-Context`: base64 of a JSON object, passed to the runtime.
    pub client_context: Option<String>,
    /// `X-Amz-Log-Type: Tail`: the invocation's log lines are wanted.
    pub tail: bool,
    /// `X-Amzn-Trace-Id`: the caller's X-Ray trace header, which the
    /// invocation continues.
    pub trace_header: Option<String>,
}

/// One invocation's answer and, if asked for, its log lines.
#[derive(Debug, Clone)]
pub struct Invoked {
    /// The answer.
    pub invocation: Invocation,
    /// What the environment logged during the invocation, up to its `REPORT`
    /// line (with [`Options::tail`]).
    pub log: Option<Vec<u8>>,
}

impl Emulator {
    /// Start `bootstrap` under the emulator found at `rie`, with only the
    /// variables Lambda sets, the function's own (`spec.env`), then `extra_env`
    /// (which wins); output goes to `log`. The emulator, and so the function,
    /// runs in a cgroup with Lambda's CPU share and memory limit for
    /// `spec.memory_mb` (see [`crate::cgroup`]; `LOCAL_LIMITS=off` turns it
    /// off); on demand its init runs on at least a whole vCPU, as on Lambda.
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
        // Every local environment starts when an invocation needs it, as an
        // on-demand cold start does (the test's own environment may say
        // otherwise, provisioned concurrency: it is applied after these).
        let env = lambda_env(spec, &[(INITIALIZATION_TYPE, ON_DEMAND)], extra_env);
        let on_demand = env
            .iter()
            .rev()
            .find(|(name, _)| *name == INITIALIZATION_TYPE)
            .is_some_and(|(_, value)| value == ON_DEMAND);
        let started = spawn_listening(log, |port, api_port| {
            let (out, err) = appending(log)?;
            // On demand, init runs on at least a whole vCPU and the share
            // applies from the runtime's first `/next`, as on Lambda.
            let at_init_end = match &cgroup {
                Some(cgroup) if on_demand => Some(cgroup.burst_for_init()?),
                _ => None,
            }
            .map(|after| -> InitEnd {
                Box::new(move || {
                    if let Err(e) = after.apply() {
                        eprintln!("the CPU share after init: {e}");
                    }
                })
            });
            let runtime_proxy =
                RuntimeProxy::start(([127, 0, 0, 1], api_port).into(), at_init_end)?;
            let mut command = Command::new(rie);
            command
                .arg("--runtime-interface-emulator-address")
                .arg(format!("127.0.0.1:{port}"))
                .arg("--runtime-api-address")
                .arg(format!("127.0.0.1:{api_port}"))
                // The emulator runs its bootstrap command with the runtime API's
                // address; `env` points the function at the proxy instead.
                .arg("/usr/bin/env")
                .arg(format!(
                    "AWS_LAMBDA_RUNTIME_API={}",
                    runtime_proxy.address()
                ))
                .arg(bootstrap)
                .env_clear()
                .envs(env.iter().map(|(name, value)| (name, value)))
                .stdin(Stdio::null())
                .stdout(out)
                .stderr(err);
            let guard = Guard::spawn(format!("emulator for {}", spec.logical_id), &mut command)?;
            // The emulator starts the function at the first invocation, so the
            // function starts inside the cgroup too.
            if let Some(cgroup) = &cgroup {
                cgroup.add(guard.pid())?;
            }
            Ok((guard, runtime_proxy))
        })?;
        Ok(Self::running(started, cgroup, None, None, spec, log))
    }

    /// Start `bootstrap` as one Lambda Managed Instances environment of
    /// `spec` (see the module's documentation): one emulator, told
    /// `AWS_LAMBDA_MAX_CONCURRENCY`, serving up to `managed.max_concurrency`
    /// invocations at once, in a private mount namespace (root only) and in
    /// a cgroup whose CPU quota follows `managed`'s memory per vCPU
    /// ([`crate::cgroup::function_quota`]). Lambda's and the function's
    /// variables as in [`Emulator::start_with`], then `extra_env` (which wins).
    pub fn start_managed(
        rie: &Path,
        bootstrap: &Path,
        spec: &Function,
        managed: ManagedInstances,
        extra_env: &[(&str, &str)],
        log: &Path,
        limits: Limits,
    ) -> Result<Self, String> {
        // Absolute, as the namespace's shell resolves it after mounting.
        let bootstrap =
            std::path::absolute(bootstrap).map_err(|e| format!("{}: {e}", bootstrap.display()))?;
        if !bootstrap.is_file() {
            return Err(format!("no bootstrap {}", bootstrap.display()));
        }
        let task_root = TaskRoot::lease()?;
        let cgroup = Cgroup::for_function_on(spec.memory_mb, Some(managed), limits);
        let started = spawn_listening(log, |port, api_port| {
            let (out, err) = appending(log)?;
            let runtime_proxy = RuntimeProxy::start(([127, 0, 0, 1], api_port).into(), None)?;
            // In the cgroup from the first instruction, then in the namespace.
            let unshare = Path::new("unshare");
            let mut command = cgroup
                .as_ref()
                .map_or_else(|| Command::new(unshare), |c| c.command(unshare));
            command
                .args(["--mount", "--propagation", "private", "--", "sh", "-c"])
                .arg(IN_NAMESPACE)
                .arg("sh")
                .arg(&bootstrap)
                .arg(runtime_proxy.address().to_string())
                .arg(FUNCTION_BOOTSTRAP);
            let max_concurrency = managed.max_concurrency.to_string();
            command
                .arg(rie)
                .arg("--runtime-interface-emulator-address")
                .arg(format!("127.0.0.1:{port}"))
                .arg("--runtime-api-address")
                .arg(format!("127.0.0.1:{api_port}"))
                // Ignored in this mode (it runs /var/task/bootstrap), named anyway.
                .arg(format!("{TASK_ROOT}/bootstrap"))
                .env_clear()
                // What Lambda sets on Managed Instances (the emulator sets the
                // same in this mode).
                .envs(lambda_env(
                    spec,
                    &[
                        (INITIALIZATION_TYPE, "lambda-managed-instances"),
                        ("AWS_LAMBDA_MAX_CONCURRENCY", &max_concurrency),
                    ],
                    extra_env,
                ))
                .stdin(Stdio::null())
                .stdout(out)
                .stderr(err);
            let guard = Guard::spawn(
                format!("emulator for {} (Managed Instances)", spec.logical_id),
                &mut command,
            )?;
            Ok((guard, runtime_proxy))
        })
        .map_err(|e| {
            format!(
                "{e}\n(a Managed Instances environment also needs root, for its mount namespace)"
            )
        })?;
        Ok(Self::running(
            started,
            cgroup,
            Some(task_root),
            Some(managed),
            spec,
            log,
        ))
    }

    /// The emulator `guard` runs, listening on `port`, its function told the
    /// runtime API of `runtime_proxy`.
    fn running(
        (guard, port, runtime_proxy): (Guard, u16, RuntimeProxy),
        cgroup: Option<Cgroup>,
        task_root: Option<TaskRoot>,
        managed: Option<ManagedInstances>,
        spec: &Function,
        log: &Path,
    ) -> Self {
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(u64::from(spec.timeout_s) + 30)))
            .build()
            .into();
        Self {
            guard,
            cgroup,
            _task_root: task_root,
            managed,
            runtime_proxy,
            timeout: Duration::from_secs(u64::from(spec.timeout_s.max(1))),
            ended: std::sync::atomic::AtomicBool::new(false),
            url: format!("http://127.0.0.1:{port}/2015-03-31/functions/function/invocations"),
            log: log.to_path_buf(),
            agent,
        }
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
        let client_context = options.client_context.as_deref();
        // On Managed Instances invocations overlap in the log and at the
        // runtime API: each is named, so that its own `REPORT` line ends its
        // tail and its runtime worker gets its own trace header.
        let request_id = self.managed.map(|_| request_id());
        let trace_header = options
            .trace_header
            .clone()
            .or_else(|| sqs_trace_header(payload));
        if let Some(header) = trace_header {
            self.runtime_proxy.hand_over(request_id.as_deref(), header);
        }
        let posted = match &request_id {
            None => self.post(payload, client_context, None),
            Some(id) => self.post_to_a_free_worker(payload, client_context, id),
        };
        self.runtime_proxy.withdraw(request_id.as_deref());
        let mut invocation = posted?;
        let killed = matches!(
            (kills_before, self.oom_kills()),
            (Some(before), Some(after)) if after > before
        );
        if self.managed.is_some() && ends_the_environment(&invocation) {
            // In this mode the emulator shuts down with its runtime.
            self.ended.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        let answer = killed.then(|| out_of_memory(&invocation, request_id.as_deref()));
        if let Some((answer, line)) = answer.flatten() {
            std::fs::OpenOptions::new()
                .append(true)
                .open(&self.log)
                .and_then(|mut log| {
                    std::io::Write::write_all(&mut log, format!("{line}\n").as_bytes())
                })
                .map_err(|e| format!("{}: {e}", self.log.display()))?;
            invocation = answer;
        }
        let log = log_start.map(|start| self.log_since(start, request_id.as_deref()));
        Ok(Invoked { invocation, log })
    }

    /// Post an invocation named `request_id` to a Managed Instances
    /// environment, again while the emulator answers `Runtime.Unavailable`
    /// (no worker of the runtime waiting on `/next` yet: see the module's
    /// documentation), at most for the function's timeout.
    fn post_to_a_free_worker(
        &self,
        payload: &[u8],
        client_context: Option<&str>,
        request_id: &str,
    ) -> Result<Invocation, String> {
        let give_up = Instant::now() + self.timeout;
        let mut pause = Duration::from_millis(1);
        loop {
            let answer = self
                .post(payload, client_context, Some(request_id))
                .map_err(|e| self.explained(e))?;
            if !runtime_unavailable(&answer) {
                return Ok(answer);
            }
            if Instant::now() >= give_up {
                return Err(format!(
                    "no worker of the runtime took the invocation within {:?} (Runtime.Unavailable): {}",
                    self.timeout,
                    self.log.display()
                ));
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(20));
        }
    }

    /// `error` with the end of the log when the emulator has exited or is
    /// exiting (a Managed Instances environment whose init failed: it
    /// closes its port while it shuts down, so it is given a moment).
    fn explained(&self, error: String) -> String {
        let deadline = Instant::now() + Duration::from_millis(500);
        while crate::process::is_alive(self.pid()) {
            if Instant::now() >= deadline {
                return error;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        format!(
            "{error}: the emulator has exited; the end of its log ({}):\n{}",
            self.log.display(),
            log_end(&self.logs())
        )
    }

    /// The log from byte `start` to the end of the first `REPORT` line after
    /// it (of the invocation `request_id`, if given; the emulator writes it
    /// just after answering: waited for at most [`REPORT_WAIT`]), or to the
    /// end of the log without one.
    fn log_since(&self, start: u64, request_id: Option<&str>) -> Vec<u8> {
        let deadline = std::time::Instant::now() + REPORT_WAIT;
        loop {
            let mut part = read_from(&self.log, start);
            if let Some(end) = report_end(&part, request_id) {
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

    /// The CPU time per 100 ms its cgroup gives the function now, in
    /// microseconds (`None` without one): on demand, at least a whole vCPU
    /// until its runtime first asks for an invocation, the share after.
    pub fn cpu_quota_us(&self) -> Option<u64> {
        self.cgroup.as_ref().and_then(Cgroup::cpu_quota_us)
    }

    /// The memory limit of the function's cgroup, in bytes (`None` without one).
    pub fn memory_limit_bytes(&self) -> Option<u64> {
        self.cgroup.as_ref().and_then(Cgroup::memory_limit_bytes)
    }

    /// Post one invocation (named `request_id`, if given: the emulator takes
    /// `X-Amzn-RequestId` as the invocation's id).
    fn post(
        &self,
        payload: &[u8],
        client_context: Option<&str>,
        request_id: Option<&str>,
    ) -> Result<Invocation, String> {
        let mut request = self
            .agent
            .post(&self.url)
            .header("content-type", "application/json");
        if let Some(context) = client_context {
            request = request.header("X-Amz-Client-Context", context);
        }
        if let Some(id) = request_id {
            request = request.header("X-Amzn-RequestId", id);
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
        logs_when(|| self.logs(), done)
    }

    /// The init duration the emulator reported for the cold start, in ms
    /// (`INIT REPORT(durationMs: X)`), once the first invocation started it.
    /// On Managed Instances, where the emulator reports none, the function's
    /// own (`init_ms` of its `cold start: first invocation` line).
    pub fn init_duration_ms(&self) -> Option<f64> {
        let logs = self.logs();
        match self.managed {
            None => init_duration_ms(&logs),
            Some(_) => function_init_ms(&logs),
        }
    }

    /// Lambda Managed Instances settings (`None`: on demand).
    pub fn managed_instances(&self) -> Option<ManagedInstances> {
        self.managed
    }

    /// Whether this environment cannot serve again: on Managed Instances
    /// its runtime exited (killed for memory, say) and the emulator with it.
    /// (On demand the emulator starts a fresh runtime: never.)
    pub fn ended(&self) -> bool {
        self.ended.load(std::sync::atomic::Ordering::Relaxed)
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
/// line in `log` (of the invocation `request_id`, if given).
fn report_end(log: &[u8], request_id: Option<&str>) -> Option<usize> {
    let report = format!("REPORT RequestId: {}", request_id.unwrap_or_default());
    let report = report.trim_end().as_bytes();
    let at = log.windows(report.len()).position(|w| w == report)?;
    let newline = log[at..].iter().position(|&b| b == b'\n')?;
    Some(at + newline + 1)
}

/// The shell a Managed Instances emulator starts through, inside its new
/// mount namespace (already in its cgroup: [`Cgroup::command`]): `$1` is the
/// function's bootstrap, `$2` the runtime API it is told (the runtime API
/// proxy's: [`RuntimeProxy`]), `$3` where it is mounted
/// ([`FUNCTION_BOOTSTRAP`]), then the emulator's command. It mounts a small
/// tmpfs on `/var/task` (seen only in the namespace) holding the function's
/// bootstrap and, as the `bootstrap` the emulator runs, a script that becomes
/// it with that runtime API (same pid); then it becomes the emulator (same
/// pid).
const IN_NAMESPACE: &str = r#"set -e
bootstrap=$1
runtime_api=$2
function=$3
shift 3
mount -t tmpfs -o size=64k,mode=0755 local-stack-task /var/task
mkdir "${function%/*}"
: > "$function"
mount --bind "$bootstrap" "$function"
printf '#!/bin/sh\nexec /usr/bin/env AWS_LAMBDA_RUNTIME_API=%s %s\n' "$runtime_api" "$function" > /var/task/bootstrap
chmod 0755 /var/task/bootstrap
exec "$@""#;

/// What `read` returns once `done` holds for it, or after 5 s.
pub fn logs_when(read: impl Fn() -> String, done: impl Fn(&str) -> bool) -> String {
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let mut logs = read();
    while !done(&logs) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
        logs = read();
    }
    logs
}

/// The log file at `log`, opened twice for appending (stdout, stderr), so
/// that lines written here land after the emulator's, never over them.
fn appending(log: &Path) -> Result<(std::fs::File, std::fs::File), String> {
    let out = std::fs::OpenOptions::new()
        .append(true)
        .open(log)
        .map_err(|e| format!("{}: {e}", log.display()))?;
    let err = out
        .try_clone()
        .map_err(|e| format!("{}: {e}", log.display()))?;
    Ok((out, err))
}

/// How many times an emulator is started on fresh ports when it lost one of
/// its two to another process between their choice and its bind.
const BIND_ATTEMPTS: u32 = 3;

/// The emulator `spawn` starts (with whatever it needs beside, such as a
/// runtime API proxy) on two free ports, its own and its runtime API's, its
/// output going to `log` (emptied first), once it listens on the first. Again
/// on other ports when it exits because one was taken meanwhile: another
/// server bound it first ("address already in use" in its log).
fn spawn_listening<T>(
    log: &Path,
    mut spawn: impl FnMut(u16, u16) -> Result<(Guard, T), String>,
) -> Result<(Guard, u16, T), String> {
    let mut attempt = 1;
    loop {
        let port = free_port().map_err(|e| format!("free port: {e}"))?;
        let api_port = free_port().map_err(|e| format!("free port: {e}"))?;
        // Emptied here; the emulator appends, so that lines written by this
        // crate (out of memory) land after its own, never over them.
        std::fs::File::create(log).map_err(|e| format!("{}: {e}", log.display()))?;
        let (mut guard, beside) = spawn(port, api_port)?;
        match listening(&mut guard, port, log) {
            Ok(()) => return Ok((guard, port, beside)),
            Err(_) if attempt < BIND_ATTEMPTS && lost_a_port(log) => attempt += 1,
            Err(e) => return Err(e),
        }
    }
}

/// Whether the emulator logging to `log` could not bind one of its ports.
fn lost_a_port(log: &Path) -> bool {
    std::fs::read_to_string(log).is_ok_and(|logs| logs.contains("address already in use"))
}

/// Wait until the emulator of `guard` listens on `port`; `Err` with the end
/// of its `log` if it exits first (its init failed, a port was taken).
fn listening(guard: &mut Guard, port: u16, log: &Path) -> Result<(), String> {
    wait_until_ready(guard, "the emulator", log, Duration::from_secs(10), || {
        std::net::TcpStream::connect((std::net::Ipv4Addr::LOCALHOST, port)).is_ok()
    })
}

/// Whether `answer` is the emulator's "no runtime worker free" (400
/// `Runtime.Unavailable`, Managed Instances mode).
fn runtime_unavailable(answer: &Invocation) -> bool {
    answer.status == 400
        && answer
            .json()
            .is_ok_and(|body| body["errorType"] == "Runtime.Unavailable")
}

/// A fresh invocation id, shaped like Lambda's (a UUID): this process's id,
/// the clock and a counter, so unique across the processes of a run.
fn request_id() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNT: AtomicU64 = AtomicU64::new(0);
    let n = COUNT.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!(
        "{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
        std::process::id(),
        nanos >> 16,
        (nanos >> 4) & 0xfff,
        (n >> 48) & 0xfff,
        n & 0xffff_ffff_ffff
    )
}

/// The function's own init duration in `logs`, in ms: `init_ms` of the JSON
/// line `cold start: first invocation` the shared crate writes at its first
/// invocation (top level or under `fields`).
pub fn function_init_ms(logs: &str) -> Option<f64> {
    logs.lines()
        .filter(|line| line.contains("cold start: first invocation"))
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .find_map(|line| {
            let fields = line.get("fields").unwrap_or(&line);
            fields.get("init_ms").and_then(serde_json::Value::as_f64)
        })
}

/// Lambda's `errorType` for a function killed for exceeding its memory.
pub const OUT_OF_MEMORY: &str = "Runtime.OutOfMemory";

/// The emulator's answer for a killed process (`Runtime.ExitError`) as Lambda
/// answers it when the kill was for memory: `Runtime.OutOfMemory`, the same
/// message ("RequestId: ... Error: Runtime exited with error: signal: killed";
/// made for the invocation `request_id` on Managed Instances, where the
/// emulator gives none), a function error (HTTP 200), and the line Lambda logs
/// for it (the message, then the error type). `None` for any other answer.
fn out_of_memory(answer: &Invocation, request_id: Option<&str>) -> Option<(Invocation, String)> {
    let json = answer.json().ok()?;
    if json["errorType"] != "Runtime.ExitError" {
        return None;
    }
    let made = request_id
        .map(|id| format!("RequestId: {id} Error: Runtime exited with error: signal: killed"));
    let message = json["errorMessage"].as_str().map(str::to_owned).or(made)?;
    let body = serde_json::json!({ "errorType": OUT_OF_MEMORY, "errorMessage": message });
    let answer = Invocation {
        status: 200,
        body: body.to_string(),
    };
    Some((answer, format!("{message} {OUT_OF_MEMORY}")))
}

/// Whether `answer` says the runtime exited (`Runtime.ExitError`, or
/// `Runtime.OutOfMemory` once reported as Lambda does): on Managed Instances
/// the emulator then ends too.
fn ends_the_environment(answer: &Invocation) -> bool {
    answer.json().is_ok_and(|body| {
        body["errorType"] == "Runtime.ExitError" || body["errorType"] == OUT_OF_MEMORY
    })
}

/// The init duration in emulator output `logs`, in ms (`INIT REPORT(durationMs: X)`).
pub fn init_duration_ms(logs: &str) -> Option<f64> {
    logs.lines().find_map(|line| {
        let rest = line.split("INIT REPORT(durationMs: ").nth(1)?;
        rest.split(')').next()?.trim().parse().ok()
    })
}

/// The trace an SQS batch continues: Lambda's poller hands the function the
/// first message's `AWSTraceHeader` (the producer's X-Ray trace) as the
/// invocation's trace header. Here for every way a batch reaches an emulator
/// (the event source, the runner, tests). `None` for other events.
fn sqs_trace_header(payload: &[u8]) -> Option<String> {
    const ATTRIBUTE: &[u8] = ATTRIBUTE_NAME.as_bytes();
    // Most payloads are no SQS batch with a trace: not parsed.
    payload
        .windows(ATTRIBUTE.len())
        .any(|w| w == ATTRIBUTE)
        .then_some(())?;
    let event: serde_json::Value = serde_json::from_slice(payload).ok()?;
    let first = event.get("Records")?.get(0)?;
    (first.get("eventSource")?.as_str()? == "aws:sqs").then_some(())?;
    Some(
        first
            .get("attributes")?
            .get(ATTRIBUTE_NAME)?
            .as_str()?
            .to_owned(),
    )
}

/// The SQS system attribute holding a producer's X-Ray trace header.
const ATTRIBUTE_NAME: &str = "AWSTraceHeader";

/// A function's whole environment, for a command started with
/// `env_clear()`: what Lambda sets in every environment, then `kind` (what
/// one kind of environment adds), the template's variables, and `extra_env`,
/// which wins.
fn lambda_env<'a>(
    spec: &'a Function,
    kind: &[(&'a str, &'a str)],
    extra_env: &[(&'a str, &'a str)],
) -> Vec<(&'a str, String)> {
    let mut env: Vec<(&str, String)> = vec![
        ("PATH", "/usr/local/bin:/usr/bin:/bin".into()),
        ("AWS_LAMBDA_FUNCTION_NAME", spec.logical_id.clone()),
        ("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST".into()),
        (
            "AWS_LAMBDA_FUNCTION_MEMORY_SIZE",
            spec.memory_mb.to_string(),
        ),
        ("AWS_LAMBDA_FUNCTION_TIMEOUT", spec.timeout_s.to_string()),
        ("AWS_REGION", crate::local_aws::REGION.into()),
        ("AWS_DEFAULT_REGION", crate::local_aws::REGION.into()),
        // Local runs never reach AWS: no instance-metadata lookups for
        // credentials, and every AWS service not pointed elsewhere goes to a
        // closed loopback port (fails at once).
        ("AWS_EC2_METADATA_DISABLED", "true".into()),
        ("AWS_ENDPOINT_URL", crate::local_aws::NO_SERVER.into()),
        // Lambda's X-Ray daemon, which a function with active tracing sends
        // its spans to: the local one when `extra_env` names it.
        (
            "AWS_XRAY_DAEMON_ADDRESS",
            crate::local_aws::NO_DAEMON.into(),
        ),
    ];
    let later = kind
        .iter()
        .copied()
        .chain(spec.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .chain(extra_env.iter().copied());
    env.extend(later.map(|(k, v)| (k, v.to_owned())));
    env
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stand-in for the emulator: a shell that, like it, logs the bind
    /// error and exits when `taken`, or else listens on `port`.
    fn stand_in(port: u16, taken: bool, log: &Path) -> Result<(Guard, ()), String> {
        let (out, err) = appending(log)?;
        let script = if taken {
            "echo 'listen tcp 127.0.0.1:1: bind: address already in use'; exit 2".to_owned()
        } else {
            format!(
                "exec python3 -c 'import socket,time; s=socket.socket(); s.bind((\"127.0.0.1\", {port})); s.listen(); time.sleep(60)'"
            )
        };
        let mut command = Command::new("sh");
        command.args(["-c", &script]).stdout(out).stderr(err);
        Ok((Guard::spawn("stand-in", &mut command)?, ()))
    }

    #[test]
    fn an_emulator_that_lost_a_port_is_started_again_on_others() {
        let log = std::env::temp_dir().join(format!("lost-port-{}.log", std::process::id()));
        let mut attempts = Vec::new();
        let (_guard, port, ()) = spawn_listening(&log, |port, api_port| {
            attempts.push((port, api_port));
            stand_in(port, attempts.len() == 1, &log)
        })
        .expect("listening at the second attempt");
        assert_eq!(attempts.len(), 2);
        assert_eq!(port, attempts[1].0);
        assert_ne!(attempts[0], attempts[1], "other ports");
        let mut again = 0;
        let refused = spawn_listening(&log, |port, _| {
            again += 1;
            stand_in(port, true, &log)
        });
        assert!(refused.is_err_and(|e| e.contains("address already in use")));
        assert_eq!(again, BIND_ATTEMPTS, "then it gives up");
        let _ = std::fs::remove_file(&log);
    }

    #[test]
    fn an_sqs_batch_continues_its_first_messages_trace() {
        let record = |header: &str| serde_json::json!({"eventSource": "aws:sqs", "attributes": {"AWSTraceHeader": header}});
        let batch =
            serde_json::json!({"Records": [record("Root=1-a;Parent=b;Sampled=1"), record("x")]});
        assert_eq!(
            sqs_trace_header(batch.to_string().as_bytes()).as_deref(),
            Some("Root=1-a;Parent=b;Sampled=1")
        );
        let other = serde_json::json!({"Records": [{"eventSource": "aws:s3", "attributes": {"AWSTraceHeader": "h"}}]});
        for payload in [
            other.to_string(),
            r#"{"AWSTraceHeader": "h"}"#.into(),
            "AWSTraceHeader".into(),
        ] {
            assert_eq!(sqs_trace_header(payload.as_bytes()), None, "{payload}");
        }
    }

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
        let (reported, line) = out_of_memory(&killed, None).expect("out of memory");
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
        let end = report_end(log, None).expect("a REPORT line");
        assert!(log[..end].ends_with(b"2 ms\t\n"));
        assert_eq!(
            report_end(b"REPORT RequestId: 1 no newline yet", None),
            None
        );
        assert_eq!(report_end(b"START RequestId: 1\n", None), None);
    }

    #[test]
    fn a_managed_instances_tail_ends_with_its_own_report_line() {
        let log = b"START RequestId: a\nSTART RequestId: b\nREPORT RequestId: b\tDuration: 1 ms\nREPORT RequestId: a\tDuration: 2 ms\n";
        let end = report_end(log, Some("a")).expect("a's REPORT line");
        assert!(log[..end].ends_with(b"2 ms\n"));
        assert!(report_end(log, Some("b")).is_some_and(|b| b < end));
        assert_eq!(report_end(log, Some("c")), None);
        let (first, second) = (request_id(), request_id());
        assert_ne!(first, second);
        assert_eq!(first.len(), 36, "{first}");
        assert_eq!(first.matches('-').count(), 4, "{first}");
    }

    #[test]
    fn unavailable_runtimes_and_the_functions_own_init_duration() {
        assert!(runtime_unavailable(&answer(
            400,
            r#"{"errorType":"Runtime.Unavailable"}"#
        )));
        assert!(!runtime_unavailable(&answer(
            200,
            r#"{"errorType":"Runtime.Unavailable"}"#
        )));
        assert!(!runtime_unavailable(&answer(400, "not JSON")));
        let logs = concat!(
            "time=2026-11-27T09:47:11.584Z level=INFO msg=\"executing bootstrap\"\n",
            r#"{"timestamp":"t","level":"INFO","fields":{"message":"cold start: first invocation","init_ms":12.5}}"#,
            "\n"
        );
        assert_eq!(function_init_ms(logs), Some(12.5));
        assert_eq!(function_init_ms("INIT REPORT(durationMs: 3)"), None);
        assert_eq!(log_end(&"x\n".repeat(30)).lines().count(), 20);
    }

    #[test]
    fn on_managed_instances_a_kill_without_a_message_is_out_of_memory_too() {
        let killed = answer(200, r#"{"errorType":"Runtime.ExitError"}"#);
        let (reported, line) = out_of_memory(&killed, Some("r-1")).expect("out of memory");
        let message = "RequestId: r-1 Error: Runtime exited with error: signal: killed";
        assert_eq!(
            reported.json().expect("JSON"),
            serde_json::json!({ "errorType": "Runtime.OutOfMemory", "errorMessage": message })
        );
        assert_eq!(line, format!("{message} Runtime.OutOfMemory"));
        assert!(ends_the_environment(&killed));
        assert!(ends_the_environment(&reported));
        assert!(!ends_the_environment(&answer(200, r#"{"ok":true}"#)));
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
            assert!(out_of_memory(&answer(200, body), None).is_none(), "{body}");
        }
    }
}

//! The template's functions, their real binaries under the Lambda runtime
//! interface emulator, configured as `template.yaml` declares them.

use crate::scratch::file_name;
use local_stack::elasticmq::with_queue_urls;
use local_stack::emulator::Emulator;
use local_stack::local_aws::NO_SERVER;
use local_stack::template::{Function, Template};
use local_stack::workspace_root;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

/// `template.yaml`, read.
pub fn template() -> Template {
    Template::load(&workspace_root().join("template.yaml")).unwrap_or_else(|e| panic!("{e}"))
}

/// The binaries of the template's functions, in the template's order.
pub fn functions() -> Vec<String> {
    template()
        .functions()
        .unwrap_or_else(|e| panic!("{e}"))
        .into_iter()
        .map(|f| f.binary)
        .collect()
}

/// The variable naming a `sam build` folder whose bootstraps [`binary`] uses.
pub use local_stack::tools::BOOTSTRAPS;

/// The debug build of function `name` (the suite tests behaviour, not speed).
///
/// Built once per test process by `cargo test --workspace --no-run`: the very
/// command of the suite, so the binaries come with the same features as every
/// other test target and nothing is compiled twice (a `cargo build -p NAME`
/// would resolve features for NAME alone and rebuild much of the dependency
/// tree). Cheap when everything is up to date; after `cargo test -p e2e` alone,
/// the first call compiles the rest of the workspace's tests once.
///
/// With `E2E_BOOTSTRAPS` set to a `sam build` folder, a function of the
/// template is that build's `bootstrap` instead (the suite runs the sam-built
/// functions of a scratch copy this way).
pub fn binary(name: &str) -> PathBuf {
    static BUILT: OnceLock<()> = OnceLock::new();
    if let Some(built) = std::env::var_os(BOOTSTRAPS)
        && let Ok(function) = template().function(name)
    {
        let path = PathBuf::from(built)
            .join(&function.logical_id)
            .join("bootstrap");
        assert!(path.is_file(), "no bootstrap {}", path.display());
        return path;
    }
    let root = workspace_root();
    BUILT.get_or_init(|| {
        let mut build = std::process::Command::new(env!("CARGO"));
        local_stack::without_cargo_run_variables(&mut build);
        let status = build
            .current_dir(&root)
            .args(["test", "--workspace", "--no-run", "--quiet"])
            .status()
            .unwrap_or_else(|e| panic!("cargo test --no-run: {e}"));
        assert!(
            status.success(),
            "cargo test --workspace --no-run: {status}"
        );
    });
    let path = local_stack::target_dir().join("debug").join(name);
    assert!(path.is_file(), "no binary {}", path.display());
    path
}

/// The function declared in `template.yaml` with this binary. Its queue
/// references (`!Ref` of a queue) are URLs of queues where nothing listens.
pub fn function(name: &str) -> Function {
    declared(&template(), name, NO_SERVER)
}

/// The function declared in `template` with this binary, its queue
/// references the URLs of those queues on the ElasticMQ at `sqs`.
fn declared(template: &Template, name: &str, sqs: &str) -> Function {
    let mut function = template.function(name).unwrap_or_else(|e| panic!("{e}"));
    let queues = template.queues().unwrap_or_else(|e| panic!("{e}"));
    function.env = with_queue_urls(&function.env, &queues, sqs);
    function
}

/// Start `name` under the emulator, as the template declares it, with `env` on top.
pub fn start(name: &str, env: &[(&str, &str)]) -> Emulator {
    start_from(&template(), name, env)
}

/// Start `name` under the emulator, as `template` declares it, with `env` on
/// top. Its queue references name the queues of the ElasticMQ at `env`'s
/// `AWS_ENDPOINT_URL_SQS` (see [`LocalQueues::env`]); without one, queues
/// where nothing listens, so that a send fails at once.
pub fn start_from(template: &Template, name: &str, env: &[(&str, &str)]) -> Emulator {
    start_as(template, name, &binary(name), env)
}

/// Start `bootstrap` under the emulator as if it were the function `name`
/// of `template` (its memory, timeout and environment, queues as in
/// [`start_from`]), with `env` on top: a test-only build of a function.
pub fn start_as(
    template: &Template,
    name: &str,
    bootstrap: &Path,
    env: &[(&str, &str)],
) -> Emulator {
    let (rie, spec, log) = launch(template, name, bootstrap, env);
    Emulator::start(&rie, bootstrap, &spec, env, &log).unwrap_or_else(|e| panic!("{e}"))
}

/// A pool of `size` environments of the function `name` of `template` (as
/// [`start_from`] starts one), throttled past the size if `overflow` says so.
pub fn pool(
    template: &Template,
    name: &str,
    env: &[(&str, &str)],
    size: local_stack::pool::Size,
) -> local_stack::pool::Pool {
    let bootstrap = binary(name);
    let (rie, spec, log) = launch(template, name, &bootstrap, env);
    let limits = local_stack::cgroup::Limits::from_env().unwrap_or_else(|e| panic!("{e}"));
    local_stack::pool::Pool::of_emulators(&rie, &bootstrap, &spec, env, &log, size, limits)
}

/// The Lambda Managed Instances environment of the function `name` of
/// `template`, as `cargo xtask run` starts it: a pool of one emulator serving
/// up to the function's `PerExecutionEnvironmentMaxConcurrency` at once, with
/// `env` on top (queues as in [`start_from`]); `memory_mb`, if given, instead
/// of the template's `MemorySize`. Panics if `template` runs it on demand.
pub fn managed_pool(
    template: &Template,
    name: &str,
    env: &[(&str, &str)],
    memory_mb: Option<u32>,
) -> local_stack::pool::Pool {
    let bootstrap = binary(name);
    let (rie, mut spec, log) = launch(template, name, &bootstrap, env);
    let managed = template
        .managed_instances(&spec)
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|| panic!("{name} runs on demand in this template"));
    if let Some(memory_mb) = memory_mb {
        spec.memory_mb = memory_mb;
    }
    let limits = local_stack::cgroup::Limits::from_env().unwrap_or_else(|e| panic!("{e}"));
    local_stack::pool::Pool::of_managed_instances(
        &rie, &bootstrap, &spec, managed, env, &log, limits,
    )
}

/// The emulator, the spec of `name` in `template` with its queues on the
/// ElasticMQ of `env` (see [`start_from`]), and a fresh log path for `bootstrap`.
fn launch(
    template: &Template,
    name: &str,
    bootstrap: &Path,
    env: &[(&str, &str)],
) -> (PathBuf, Function, PathBuf) {
    static RUN: AtomicUsize = AtomicUsize::new(0);
    let rie = local_stack::tools::emulator().unwrap_or_else(|e| panic!("{e}"));
    let logs = workspace_root().join("target").join("e2e-logs");
    std::fs::create_dir_all(&logs).unwrap_or_else(|e| panic!("{}: {e}", logs.display()));
    let log = logs.join(format!(
        "{}-{}-{}.log",
        file_name(bootstrap),
        std::process::id(),
        RUN.fetch_add(1, Ordering::Relaxed)
    ));
    let sqs = env
        .iter()
        .find(|(key, _)| *key == "AWS_ENDPOINT_URL_SQS")
        .map_or(NO_SERVER, |(_, url)| *url);
    (rie, declared(template, name, sqs), log)
}

/// `calls` (each an event and its options) sent to `pool` at once (released
/// together by a barrier), each answered (HTTP 200, a function error
/// included); the answers, in order.
pub fn send_at_once(
    pool: &local_stack::pool::Pool,
    calls: Vec<(String, local_stack::pool::Options)>,
) -> Vec<serde_json::Value> {
    let start = std::sync::Barrier::new(calls.len());
    std::thread::scope(|s| {
        let calls: Vec<_> = calls
            .into_iter()
            .map(|(event, options)| {
                let start = &start;
                s.spawn(move || {
                    start.wait();
                    pool.invoke_with(event.as_bytes(), &options)
                })
            })
            .collect();
        calls
            .into_iter()
            .map(|call| {
                let answer = call
                    .join()
                    .expect("thread")
                    .unwrap_or_else(|e| panic!("{e}\n{}", pool.logs()))
                    .invocation;
                assert_eq!(answer.status, 200, "{}", answer.body);
                answer.json().expect("JSON")
            })
            .collect()
    })
}

/// The sample events of a function: every event in `events/<name>/` (each
/// with its expectation beside it, see `local_stack::events::samples`).
pub fn events(name: &str) -> Vec<(PathBuf, String)> {
    local_stack::events::of(name).unwrap_or_else(|e| panic!("{e}"))
}

//! Everything a function does once per cold start, in one call.
//!
//! ```no_run
//! use shared::config::{ConfigError, Env, table_name};
//!
//! /// The function's own settings.
//! struct Config {
//!     table_name: String,
//! }
//!
//! impl Config {
//!     fn from_env(env: &dyn Env) -> Result<Self, ConfigError> {
//!         Ok(Self { table_name: table_name(env, "TABLE_NAME", "where orders go")? })
//!     }
//! }
//!
//! # async fn handler(e: lambda_runtime::LambdaEvent<serde_json::Value>) -> Result<serde_json::Value, lambda_runtime::Error> { Ok(e.payload) }
//! #[tokio::main]
//! async fn main() -> Result<(), lambda_runtime::Error> {
//!     // Every setting, shared and the function's own, is checked first; then
//!     // logging, the allocator policy and the Rayon pool are installed.
//!     let (init, config) = shared::start_or_exit(Config::from_env);
//!     # let _ = config.table_name;
//!     shared::run(&init, lambda_runtime::service_fn(handler)).await
//! }
//! ```
//!
//! [`start`] reads and validates every shared setting and, with the reader the
//! function hands in, the function's own; only then does it apply the
//! allocator's memory-return policy, build the Rayon pool and install logging.
//! The shared settings are listed in [`SETTINGS`].

pub mod allocator;
pub mod arena;
#[cfg(feature = "aws")]
pub mod aws;
pub mod concurrency;
pub mod config;
pub mod connections;
pub mod invocation;
pub mod logging;
pub mod memory;
pub mod metrics;
pub mod orders;
pub mod pool;
pub mod traces;
pub mod vcpus;

use config::{ConfigError, Env, ProcessEnv};
use lambda_runtime::{Diagnostic, IntoFunctionResponse, LambdaEvent, Runtime, Service};
use serde::{Deserialize, Serialize};
use std::fmt::Debug;
use std::time::{Duration, Instant};

/// The environment variables the shared crate reads, for documentation and tools.
pub const SETTINGS: &[&str] = &[
    "WORKER_COUNT",
    "AWS_LAMBDA_FUNCTION_MEMORY_SIZE",
    "MEMORY_RETURN",
    "AWS_LAMBDA_LOG_FORMAT",
    "AWS_LAMBDA_LOG_LEVEL",
    "RUST_LOG",
    "OPEN_CONNECTIONS_AT_INIT",
    concurrency::MAX_CONCURRENCY_VAR,
    traces::TRACING_VAR,
];

/// What cold start decided, for the handler and its responses.
#[derive(Debug, Clone)]
pub struct Init {
    /// The worker count and the input that decided it.
    pub vcpus: vcpus::Vcpus,
    /// The allocator's memory-return policy.
    pub policy: allocator::Policy,
    /// The allocator serving this binary.
    pub allocator: &'static str,
    /// When cold start began (close to process start).
    pub started: Instant,
    /// Whether the function opens its connections during init
    /// (`OPEN_CONNECTIONS_AT_INIT`, see [`connections`]).
    pub open_connections: bool,
    /// How many invocations this environment serves at once
    /// (`AWS_LAMBDA_MAX_CONCURRENCY`, see [`concurrency`]).
    pub concurrency: concurrency::Concurrency,
}

impl Init {
    /// Time since cold start began.
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// The cold-start decisions and the memory figures now, for responses.
    pub fn facts(&self) -> Facts {
        Facts {
            allocator: self.allocator,
            memory_return: self.policy,
            vcpus: self.vcpus,
            memory: memory::snapshot(),
        }
    }
}

/// What a function can report about itself in a response.
#[derive(Debug, Clone, Serialize)]
pub struct Facts {
    /// The allocator serving this binary.
    pub allocator: &'static str,
    /// Its memory-return policy.
    pub memory_return: allocator::Policy,
    /// The worker count and what decided it.
    pub vcpus: vcpus::Vcpus,
    /// RSS, peak RSS, minor faults, allocator statistics.
    pub memory: memory::Snapshot,
}

/// Why cold start failed. `Display` is one line naming the cause.
#[derive(Debug, thiserror::Error)]
pub enum InitError {
    /// A shared setting has a value that cannot be used.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The allocator refused its policy.
    #[error("invalid MEMORY_RETURN: the allocator refused it: {0}")]
    Allocator(String),
    /// The Rayon pool could not be built.
    #[error(transparent)]
    Pool(#[from] pool::PoolError),
    /// Logging could not be installed.
    #[error(transparent)]
    Logging(#[from] logging::AlreadyInitialised),
    #[error("tracing: cannot open the socket to the X-Ray daemon: {0}")]
    Traces(std::io::Error),
    /// One of the function's own settings (read by the reader handed to
    /// [`start`]) cannot be used. The message is that error's `Display`, on
    /// one line.
    #[error("{0}")]
    Function(String),
}

impl Init {
    /// Read and validate the settings and decide, without installing anything
    /// global (no logging, no pool, no allocator change): for unit tests and
    /// benchmarks of handlers.
    pub fn decide(env: &dyn Env) -> Result<Self, ConfigError> {
        let concurrency = concurrency::Concurrency::from_env(env)?;
        Ok(Self {
            vcpus: vcpus::from_env(env, concurrency)?,
            policy: allocator::Policy::from_env(env)?,
            allocator: allocator::name(),
            started: Instant::now(),
            open_connections: connections::at_init(env)?,
            concurrency,
        })
    }
}

/// Do all cold-start work with settings from `env`: the shared ones and the
/// function's own, read by `settings` (such as a `Config::from_env`).
///
/// Every setting is read and validated before anything global is changed
/// (logging, allocator policy, Rayon pool), so a bad setting, shared or the
/// function's, leaves the process untouched. Shared settings are checked
/// first; `settings` is not called when one of them is bad.
pub fn start<C, E: std::fmt::Display>(
    env: &dyn Env,
    settings: impl FnOnce(&dyn Env) -> Result<C, E>,
) -> Result<(Init, C), InitError> {
    let log_settings = logging::Settings::from_env(env)?;
    let trace_settings = traces::Settings::from_env(env)?;
    let Init {
        vcpus,
        policy,
        started,
        open_connections,
        concurrency,
        ..
    } = Init::decide(env)?;
    // `Display` of any error type: keep the promised single line.
    let config = settings(env)
        .map_err(|e| InitError::Function(e.to_string().lines().collect::<Vec<_>>().join(" ")))?;

    let traces = traces::layer(trace_settings, env).map_err(InitError::Traces)?;
    let traced = traces.is_some();
    logging::init(&log_settings, traces)?;
    if traced {
        traces::warm();
    }
    let applied = allocator::apply(policy).map_err(InitError::Allocator)?;
    pool::build_global(vcpus.workers)?;
    tracing::info!(
        workers = vcpus.workers,
        cpu_share = vcpus.share,
        decided_by = %vcpus.decided_by,
        lambda_share = vcpus.lambda_share,
        cgroup_quota = vcpus.cgroup_quota,
        cpus_allowed = vcpus.available,
        allocator = allocator::name(),
        memory_return = %policy,
        allocator_settings = %applied,
        concurrency = %concurrency,
        tracing = trace_settings.describe(),
        init_ms = started.elapsed().as_secs_f64() * 1000.0,
        "shared init done"
    );
    let init = Init {
        vcpus,
        policy,
        allocator: allocator::name(),
        started,
        open_connections,
        concurrency,
    };
    Ok((init, config))
}

/// [`start`] with the process environment, or print one line
/// `cold start failed: <error naming the setting>` and exit with status 1.
///
/// Lambda reports the exit as `Runtime.ExitError` with that line in the logs.
pub fn start_or_exit<C, E: std::fmt::Display>(
    settings: impl FnOnce(&dyn Env) -> Result<C, E>,
) -> (Init, C) {
    or_exit(start(&ProcessEnv, settings))
}

/// The value, or (for other cold-start errors, such as a failed calibration)
/// print `cold start failed: <error>` and exit with status 1.
pub fn or_exit<T, E: std::fmt::Display>(result: Result<T, E>) -> T {
    result.unwrap_or_else(|e| {
        eprintln!("cold start failed: {e}");
        std::process::exit(1)
    })
}

/// Run the Lambda runtime loop with `handler`, wrapping every invocation in a
/// span with its request id and the cold-start marker.
///
/// One code path for both ways Lambda invokes: on Lambda Managed Instances
/// (`AWS_LAMBDA_MAX_CONCURRENCY` set, see [`concurrency`]) up to that many
/// invocations run at once, each on a clone of `handler` (so a handler holds
/// its state behind an `Arc`); on-demand, one after another.
pub async fn run<A, F, R, B, S, D, E>(init: &Init, handler: F) -> Result<(), lambda_runtime::Error>
where
    F: Service<LambdaEvent<A>, Response = R> + Clone + Send + 'static,
    F::Future: Future<Output = Result<R, F::Error>> + Send + 'static,
    F::Error: Into<Diagnostic> + Debug,
    A: for<'de> Deserialize<'de> + Send + 'static,
    R: IntoFunctionResponse<B, S> + Send + 'static,
    B: Serialize + Send + 'static,
    S: futures_core::Stream<Item = Result<D, E>> + Unpin + Send + 'static,
    D: Into<bytes::Bytes> + Send + 'static,
    E: Into<lambda_runtime::Error> + Send + Debug + 'static,
{
    // What init traced (connections opened) leaves before the first invocation.
    traces::flush();
    Runtime::new(handler)
        .layer(invocation::ColdStartLayer::new(init.elapsed()))
        .run_concurrent()
        .await
}

/// `handler` as the runtime's service: one per execution environment, behind
/// an `Arc`, shared by every invocation in flight (several at once on Lambda
/// Managed Instances); each invocation calls `handle` with it.
///
/// ```ignore
/// shared::run(&init, shared::share(handler, |h, event| async move { h.handle(event).await })).await
/// ```
pub fn share<H, A, F, Fut, R, E>(
    handler: H,
    handle: F,
) -> lambda_runtime::tower::util::ServiceFn<impl Fn(LambdaEvent<A>) -> Fut + Clone + Send + 'static>
where
    H: Send + Sync + 'static,
    F: Fn(std::sync::Arc<H>, LambdaEvent<A>) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = Result<R, E>> + Send + 'static,
{
    let handler = std::sync::Arc::new(handler);
    lambda_runtime::service_fn(move |event| handle(std::sync::Arc::clone(&handler), event))
}

/// An error and its sources on one line (the AWS SDK's own `Display` is terse:
/// "dispatch failure" without the refused connection behind it).
pub struct ErrorChain<'a>(pub &'a dyn std::error::Error);

impl std::fmt::Display for ErrorChain<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)?;
        let mut source = self.0.source();
        while let Some(e) = source {
            write!(f, ": {e}")?;
            source = e.source();
        }
        Ok(())
    }
}

//! Logging, set up exactly once, the way Lambda's advanced logging controls expect.
//!
//! - `AWS_LAMBDA_LOG_FORMAT`: `JSON` (one object per line, for CloudWatch Logs
//!   Insights) or `Text` (the default).
//! - `AWS_LAMBDA_LOG_LEVEL`: `TRACE`, `DEBUG`, `INFO` (default), `WARN`, `ERROR`,
//!   `FATAL`. Lambda sets it from the function's logging configuration, so it
//!   wins over `RUST_LOG`, as in `lambda_runtime`'s own subscriber.
//! - `RUST_LOG`: `tracing` target directives (`info,aws_smithy=warn`), used
//!   when `AWS_LAMBDA_LOG_LEVEL` is not set. Levels per target only: span and
//!   field filters need `EnvFilter`, whose regex engine costs 0.5 MiB of binary.
//!
//! Whatever the level, the runtime's TRACE line with the raw event is dropped:
//! events may carry secrets.

use crate::config::{ConfigError, Env};
use tracing::Level;
use tracing_subscriber::filter::{FilterExt, ParseError, Targets, filter_fn};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::registry::Registry;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{Layer, fmt};

/// Log line format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// One JSON object per line.
    Json,
    /// Human-readable text.
    Text,
}

/// Validated logging settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// Line format.
    pub format: Format,
    /// A valid `tracing` filter.
    pub filter: String,
}

impl Settings {
    /// Read and validate the three variables.
    pub fn from_env(env: &dyn Env) -> Result<Self, ConfigError> {
        let format = match env.get("AWS_LAMBDA_LOG_FORMAT")?.as_deref().map(str::trim) {
            None => Format::Text,
            Some(f) if f.eq_ignore_ascii_case("json") => Format::Json,
            Some(f) if f.eq_ignore_ascii_case("text") => Format::Text,
            Some(other) => {
                return Err(ConfigError::new(
                    "AWS_LAMBDA_LOG_FORMAT",
                    other,
                    "must be \"JSON\" or \"Text\"",
                ));
            }
        };
        let filter = if let Some(level) = env.get("AWS_LAMBDA_LOG_LEVEL")? {
            match level.trim().to_ascii_uppercase().as_str() {
                l @ ("TRACE" | "DEBUG" | "INFO" | "WARN" | "ERROR") => l.to_ascii_lowercase(),
                "FATAL" => "error".to_owned(),
                _ => {
                    return Err(ConfigError::new(
                        "AWS_LAMBDA_LOG_LEVEL",
                        level,
                        "must be one of TRACE, DEBUG, INFO, WARN, ERROR, FATAL",
                    ));
                }
            }
        } else if let Some(directives) = env.get("RUST_LOG")? {
            targets(&directives).map_err(|e| {
                ConfigError::new("RUST_LOG", &directives, format!("not a valid filter: {e}"))
            })?;
            directives
        } else {
            "info".to_owned()
        };
        Ok(Self { format, filter })
    }
}

/// `directives` as a filter. Empty directives (`info,`) are skipped: `Targets`
/// alone reads one as "every target at TRACE".
fn targets(directives: &str) -> Result<Targets, ParseError> {
    let kept: Vec<&str> = directives
        .split(',')
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .collect();
    if kept.is_empty() {
        return Ok(Targets::new());
    }
    kept.join(",").parse()
}

/// Logging was already initialised in this process.
#[derive(Debug, thiserror::Error)]
#[error("logging is already initialised: {0}")]
pub struct AlreadyInitialised(String);

/// The runtime logs every raw event at TRACE level under this target; events
/// may carry secrets (the password hasher's do), so those lines are always dropped.
const RAW_EVENT_TARGET: &str = "lambda_runtime::layers::api_response";
/// The AWS SDK logs whole requests and responses (stored items) at TRACE level
/// under targets starting with this: dropped too, for the same reason.
const SDK_EXCHANGE_TARGETS: &str = "aws_smithy_runtime::client::orchestrator";

/// Whether a TRACE line of `target` could carry an event or stored data.
fn carries_data(target: &str) -> bool {
    target == RAW_EVENT_TARGET || target.starts_with(SDK_EXCHANGE_TARGETS)
}

/// Install the global subscriber, with `traces` (the OpenTelemetry layer,
/// when tracing is on) beside the log. A second call returns an error, never
/// panics.
pub fn init(
    settings: &Settings,
    traces: Option<Box<dyn Layer<Registry> + Send + Sync>>,
) -> Result<(), AlreadyInitialised> {
    // `from_env` validated the filter; an invalid one here would be a bug, so
    // fall back to `info` rather than panic.
    let levels =
        targets(&settings.filter).unwrap_or_else(|_| Targets::new().with_default(Level::INFO));
    let no_raw_events =
        filter_fn(|meta| !(*meta.level() == Level::TRACE && carries_data(meta.target())));
    let layer = match settings.format {
        Format::Json => fmt::layer()
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .with_span_list(false)
            .with_writer(std::io::stdout)
            .boxed(),
        // CloudWatch adds its own timestamps and shows no colours.
        Format::Text => fmt::layer()
            .with_ansi(false)
            .without_time()
            .with_writer(std::io::stdout)
            .boxed(),
    };
    tracing_subscriber::registry()
        .with(traces)
        .with(layer.with_filter(levels.and(no_raw_events)))
        .try_init()
        .map_err(|e| AlreadyInitialised(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trace_lines_of_events_and_sdk_exchanges_are_the_ones_dropped() {
        assert!(carries_data("lambda_runtime::layers::api_response"));
        assert!(carries_data("aws_smithy_runtime::client::orchestrator"));
        assert!(carries_data(
            "aws_smithy_runtime::client::orchestrator::http"
        ));
        assert!(!carries_data("order_processor::handler"));
        assert!(!carries_data("aws_smithy_runtime::client::retries"));
    }

    #[test]
    fn defaults_are_text_and_info() {
        let s = Settings::from_env(&[]).unwrap();
        assert_eq!((s.format, s.filter.as_str()), (Format::Text, "info"));
    }

    #[test]
    fn lambda_level_wins_over_rust_log() {
        let s = Settings::from_env(&[
            ("AWS_LAMBDA_LOG_FORMAT", "JSON"),
            ("AWS_LAMBDA_LOG_LEVEL", "fatal"),
            ("RUST_LOG", "trace"),
        ])
        .unwrap();
        assert_eq!((s.format, s.filter.as_str()), (Format::Json, "error"));
        let s = Settings::from_env(&[("RUST_LOG", "warn,shared=debug")]).unwrap();
        assert_eq!(s.filter, "warn,shared=debug");
    }

    #[test]
    fn empty_directives_enable_nothing() {
        let t = targets(" info , shared=debug,").unwrap();
        assert!(t.would_enable("shared::pool", &Level::DEBUG));
        assert!(t.would_enable("hyper", &Level::INFO));
        assert!(!t.would_enable("hyper", &Level::DEBUG));
        for empty in ["", ",", " , "] {
            assert!(!targets(empty).unwrap().would_enable("hyper", &Level::ERROR));
        }
    }

    #[test]
    fn bad_values_name_the_setting() {
        for (env, setting) in [
            ([("AWS_LAMBDA_LOG_FORMAT", "xml")], "AWS_LAMBDA_LOG_FORMAT"),
            ([("AWS_LAMBDA_LOG_LEVEL", "loud")], "AWS_LAMBDA_LOG_LEVEL"),
            ([("RUST_LOG", "foo=[")], "RUST_LOG"),
        ] {
            assert_eq!(Settings::from_env(&env).unwrap_err().setting, setting);
        }
    }
}

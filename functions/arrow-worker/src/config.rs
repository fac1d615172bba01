//! The Arrow worker's settings, read and validated once at cold start.

use shared::config::{ConfigError, Env, number_or, parse_in_range, table_name};
use std::time::Duration;

/// Memory size assumed when `AWS_LAMBDA_FUNCTION_MEMORY_SIZE` is unset (tests,
/// tools): one vCPU's worth, the template's size.
pub const DEFAULT_MEMORY_MB: u64 = shared::vcpus::MB_PER_VCPU;
/// Rows one invocation may hold, per MB of function memory (about 100 bytes a
/// row in Arrow, twice while combining, leaves most memory to the rest).
pub const ROWS_PER_MB: u64 = 1_000;
/// How long the first invocation waits for the pre-warm, by default.
pub const DEFAULT_ARENA_WAIT_MS: u64 = 2_000;

/// When the arena is pre-faulted (`PREWARM`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prewarm {
    /// During init, which then ends only once the pages are mapped: for
    /// environments initialised ahead of traffic, where init time is free.
    AtInit,
    /// On a background thread; the first invocation waits for it at most
    /// `ARENA_WAIT_MS`. Competes with that invocation for the CPU share.
    Background,
    /// Not at all.
    Off,
}

/// The `PREWARM` setting: `auto` (the default) pre-faults during init when
/// Lambda initialises ahead of traffic (`AWS_LAMBDA_INITIALIZATION_TYPE`
/// `provisioned-concurrency`, `snap-start`, or `lambda-managed-instances`:
/// Managed Instances start their environments before routing to them) and
/// not at all for on-demand
/// cold starts, where the caller waits for init and the first invocation
/// both and a pre-warm only pays off for requests that touch the whole arena;
/// `auto` never pre-faults where the allocator would not reuse the pages
/// (`keeps_pages`: `shared::arena::supported`, false for mimalloc 2);
/// `init`, `background` and `off` choose one way whatever the init type.
fn prewarm(env: &dyn Env, keeps_pages: bool) -> Result<Prewarm, ConfigError> {
    let ahead_of_traffic = matches!(
        env.get("AWS_LAMBDA_INITIALIZATION_TYPE")?.as_deref(),
        Some("provisioned-concurrency" | "snap-start" | "lambda-managed-instances")
    );
    match env.get("PREWARM")?.as_deref().unwrap_or("auto") {
        "auto" if ahead_of_traffic && keeps_pages => Ok(Prewarm::AtInit),
        "auto" | "off" => Ok(Prewarm::Off),
        "init" => Ok(Prewarm::AtInit),
        "background" => Ok(Prewarm::Background),
        other => Err(ConfigError::new(
            "PREWARM",
            other,
            "must be auto, init, background or off",
        )),
    }
}

/// Validated settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// `TABLE_NAME`: the orders table (required).
    pub table_name: String,
    /// `REPORTS_TABLE`: where daily reports are written (required).
    pub reports_table: String,
    /// `ARENA_MIB`: MiB pre-faulted at cold start; 0 turns pre-warming off.
    /// Default: a quarter of the function's memory, at most 1 GiB; at most
    /// half of the memory (the rest is for the runtime, the SDK and the work).
    pub arena_bytes: usize,
    /// When the arena is pre-faulted (`PREWARM`, see [`Prewarm`]).
    pub prewarm: Prewarm,
    /// `ARENA_WAIT_MS`: the most the first invocation waits for a background pre-warm.
    pub arena_wait: Duration,
    /// `MAX_ROWS`: rows one invocation may read; more is an error that says to
    /// fan out. Default: 1,000 per MB of function memory. Also the most groups
    /// a merge may hold.
    pub max_rows: u64,
    /// `ANALYTICS_BUCKET`: where stored partials and answers over 6 MB go;
    /// without it, fan-outs merge inline partials only.
    pub analytics_bucket: Option<String>,
    /// Path-style S3 addresses, for a local S3 server: set when an endpoint
    /// override (`AWS_ENDPOINT_URL_S3` or `AWS_ENDPOINT_URL`) is configured.
    pub s3_path_style: bool,
    /// Bytes of stored partials a merge holds at once (an eighth of the
    /// memory): the reads in flight together, so also the largest partial it
    /// reads. Decoding one takes about 2.5 times its bytes, and the merged
    /// groups (at most `max_rows`, about 250 bytes each) a quarter of the
    /// memory: together well within it.
    pub merge_read_bytes: usize,
    /// `REPORT_LATE_DAYS`: how many days before the reported one each
    /// scheduled daily report computes again, to count orders stored late.
    pub report_late_days: u32,
    /// `REPORT_STATE_MACHINE_ARN`: the report state machine, which a daily
    /// report hands a day too large for one invocation to; without it, such
    /// a day fails with `DeadlineTooShort`.
    pub report_state_machine: Option<String>,
    /// `REPORT_DAY_SECONDS`: the most time a daily report reads one day
    /// itself before it hands the day to the state machine. Default: the
    /// invocation's time left, shared evenly among the days still to read.
    pub report_day_time: Option<Duration>,
}

/// Days a scheduled daily report looks back by default (`REPORT_LATE_DAYS`).
pub const DEFAULT_REPORT_LATE_DAYS: u32 = 2;
/// The most days it may: the dead-letter queue's retention (14 days).
pub const MAX_REPORT_LATE_DAYS: u32 = 14;

/// `ANALYTICS_BUCKET`, if set: 3 to 63 characters of a-z 0-9 . - (upper case
/// too, for local servers that name buckets by logical id).
fn bucket(env: &dyn Env) -> Result<Option<String>, ConfigError> {
    let Some(name) = env.get("ANALYTICS_BUCKET")?.filter(|n| !n.is_empty()) else {
        return Ok(None);
    };
    let valid = (3..=63).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-'));
    if !valid {
        return Err(ConfigError::new(
            "ANALYTICS_BUCKET",
            &name,
            "must be an S3 bucket name: 3 to 63 characters of a-z 0-9 . -",
        ));
    }
    Ok(Some(name))
}

/// `REPORT_STATE_MACHINE_ARN`, if set: a Step Functions state machine's ARN.
fn state_machine(env: &dyn Env) -> Result<Option<String>, ConfigError> {
    let Some(arn) = env
        .get("REPORT_STATE_MACHINE_ARN")?
        .filter(|a| !a.is_empty())
    else {
        return Ok(None);
    };
    let parts: Vec<&str> = arn.split(':').collect();
    let valid = arn.len() <= 256
        && parts.len() == 7
        && parts[0] == "arn"
        && parts[2] == "states"
        && parts[5] == "stateMachine"
        && !parts[6].is_empty();
    if !valid {
        return Err(ConfigError::new(
            "REPORT_STATE_MACHINE_ARN",
            &arn,
            "must be a state machine's ARN: arn:aws:states:<region>:<account>:stateMachine:<name>",
        ));
    }
    Ok(Some(arn))
}

impl Config {
    /// Read every setting from `env`.
    pub fn from_env(env: &dyn Env) -> Result<Self, ConfigError> {
        let memory_mb = number_or(
            env,
            "AWS_LAMBDA_FUNCTION_MEMORY_SIZE",
            DEFAULT_MEMORY_MB,
            shared::vcpus::LAMBDA_MEMORY_MB,
        )?;
        let default_arena_mib = (shared::arena::default_bytes(memory_mb) >> 20) as u64;
        let max_arena_mib = shared::arena::max_mib(memory_mb);
        let arena_mib = number_or(env, "ARENA_MIB", default_arena_mib, 0..=max_arena_mib)
            .map_err(|e| ConfigError {
                reason: format!(
                    "{} (at most half of the function's {memory_mb} MB: the rest is for the runtime, the SDK and the work)",
                    e.reason
                ),
                ..e
            })?;
        Ok(Self {
            table_name: table_name(env, "TABLE_NAME", "the DynamoDB table of orders")?,
            reports_table: table_name(env, "REPORTS_TABLE", "the DynamoDB table for reports")?,
            arena_bytes: usize::try_from(arena_mib << 20).unwrap_or(usize::MAX),
            prewarm: prewarm(env, shared::arena::supported())?,
            arena_wait: Duration::from_millis(number_or(
                env,
                "ARENA_WAIT_MS",
                DEFAULT_ARENA_WAIT_MS,
                0..=60_000,
            )?),
            max_rows: number_or(env, "MAX_ROWS", memory_mb * ROWS_PER_MB, 1..=100_000_000)?,
            analytics_bucket: bucket(env)?,
            s3_path_style: ["AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"]
                .into_iter()
                .map(|name| env.get(name))
                .collect::<Result<Vec<_>, _>>()?
                .into_iter()
                .any(|v| v.is_some_and(|v| !v.is_empty())),
            merge_read_bytes: usize::try_from((memory_mb << 20) / 8).unwrap_or(usize::MAX),
            report_late_days: u32::try_from(number_or(
                env,
                "REPORT_LATE_DAYS",
                u64::from(DEFAULT_REPORT_LATE_DAYS),
                0..=u64::from(MAX_REPORT_LATE_DAYS),
            )?)
            .unwrap_or(DEFAULT_REPORT_LATE_DAYS),
            report_state_machine: state_machine(env)?,
            report_day_time: env
                .get("REPORT_DAY_SECONDS")?
                .map(|raw| parse_in_range("REPORT_DAY_SECONDS", &raw, 0..=900))
                .transpose()?
                .map(Duration::from_secs),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLES: [(&str, &str); 2] = [("TABLE_NAME", "orders"), ("REPORTS_TABLE", "reports")];

    #[test]
    fn defaults_follow_the_memory_size() {
        let env = [
            TABLES[0],
            TABLES[1],
            ("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "1024"),
        ];
        let config = Config::from_env(&env).unwrap();
        assert_eq!(config.arena_bytes, 256 << 20);
        assert_eq!(config.max_rows, 1_024_000);
        assert_eq!(config.arena_wait, Duration::from_secs(2));
        assert_eq!(config.merge_read_bytes, 128 << 20);
        assert_eq!(config.report_late_days, DEFAULT_REPORT_LATE_DAYS);
    }

    #[test]
    fn managed_instances_memory_sizes_are_accepted() {
        let env = [
            TABLES[0],
            TABLES[1],
            ("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "32768"),
        ];
        let config = Config::from_env(&env).unwrap();
        assert_eq!(config.arena_bytes, 1 << 30);
        assert_eq!(config.max_rows, 32_768_000);
        let env = [
            TABLES[0],
            TABLES[1],
            ("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "32769"),
        ];
        let err = Config::from_env(&env).unwrap_err();
        assert_eq!(err.setting, "AWS_LAMBDA_FUNCTION_MEMORY_SIZE");
    }

    #[test]
    fn the_arena_leaves_half_the_memory_to_the_rest() {
        let env = |arena_mib: &'static str| {
            [
                TABLES[0],
                TABLES[1],
                ("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "1024"),
                ("ARENA_MIB", arena_mib),
            ]
        };
        assert_eq!(Config::from_env(&env("0")).unwrap().arena_bytes, 0);
        assert_eq!(
            Config::from_env(&env("512")).unwrap().arena_bytes,
            512 << 20
        );
        for too_big in ["513", "1024"] {
            let err = Config::from_env(&env(too_big)).unwrap_err();
            assert_eq!(err.setting, "ARENA_MIB", "{too_big}");
            assert!(
                err.reason.contains("0 to 512") && err.reason.contains("half"),
                "{err}"
            );
        }
    }

    #[test]
    fn bad_values_name_the_setting() {
        for (setting, value) in [
            ("ARENA_MIB", "lots"),
            ("ARENA_MIB", "100000"),
            ("ARENA_WAIT_MS", "-1"),
            ("MAX_ROWS", "0"),
            ("REPORT_LATE_DAYS", "15"),
            ("REPORT_DAY_SECONDS", "901"),
            ("REPORT_DAY_SECONDS", "soon"),
            ("REPORT_STATE_MACHINE_ARN", "OrdersReportStateMachine"),
            (
                "REPORT_STATE_MACHINE_ARN",
                "arn:aws:lambda:eu-west-1:123456789012:function:report",
            ),
        ] {
            let env = [TABLES[0], TABLES[1], (setting, value)];
            let err = Config::from_env(&env.as_slice()).unwrap_err();
            assert_eq!(err.setting, setting);
        }
        let err = Config::from_env(&[TABLES[0]]).unwrap_err();
        assert_eq!(err.setting, "REPORTS_TABLE");
        let env = [TABLES[0], TABLES[1], ("ANALYTICS_BUCKET", "my bucket")];
        assert_eq!(
            Config::from_env(&env).unwrap_err().setting,
            "ANALYTICS_BUCKET"
        );
    }

    #[test]
    fn the_arena_is_prefaulted_at_init_only_ahead_of_traffic_by_default() {
        let with_pages = |init: &'static str, mode: &'static str, keeps_pages: bool| {
            let env = [("AWS_LAMBDA_INITIALIZATION_TYPE", init), ("PREWARM", mode)];
            prewarm(&env, keeps_pages)
        };
        let with = |init, mode| with_pages(init, mode, true);
        assert_eq!(with("on-demand", "auto"), Ok(Prewarm::Off));
        assert_eq!(with("provisioned-concurrency", "auto"), Ok(Prewarm::AtInit));
        assert_eq!(with("snap-start", "auto"), Ok(Prewarm::AtInit));
        assert_eq!(
            with("lambda-managed-instances", "auto"),
            Ok(Prewarm::AtInit)
        );
        assert_eq!(with("on-demand", "init"), Ok(Prewarm::AtInit));
        assert_eq!(with("provisioned-concurrency", "off"), Ok(Prewarm::Off));
        assert_eq!(with("on-demand", "background"), Ok(Prewarm::Background));
        assert_eq!(with("on-demand", "always").unwrap_err().setting, "PREWARM");
        assert_eq!(
            Config::from_env(&TABLES).map(|c| c.prewarm),
            Ok(Prewarm::Off)
        );
        // An allocator that would not reuse the pages: `auto` never
        // pre-faults; an explicit choice still does (and is told why not).
        let without = |init, mode| with_pages(init, mode, false);
        assert_eq!(without("provisioned-concurrency", "auto"), Ok(Prewarm::Off));
        assert_eq!(
            without("lambda-managed-instances", "auto"),
            Ok(Prewarm::Off)
        );
        assert_eq!(without("on-demand", "init"), Ok(Prewarm::AtInit));
    }

    #[test]
    fn a_report_state_machine_is_optional() {
        let config = Config::from_env(&TABLES).unwrap();
        assert_eq!(config.report_state_machine, None);
        assert_eq!(config.report_day_time, None);
        let arn = "arn:aws:states:eu-west-1:123456789012:stateMachine:orders-report";
        let env = [
            TABLES[0],
            TABLES[1],
            ("REPORT_STATE_MACHINE_ARN", arn),
            ("REPORT_DAY_SECONDS", "0"),
        ];
        let config = Config::from_env(&env).unwrap();
        assert_eq!(config.report_state_machine.as_deref(), Some(arn));
        assert_eq!(config.report_day_time, Some(Duration::ZERO));
    }

    #[test]
    fn the_bucket_is_optional_and_local_endpoints_use_path_style() {
        let config = Config::from_env(&TABLES).unwrap();
        assert_eq!(
            (config.analytics_bucket, config.s3_path_style),
            (None, false)
        );
        let env = [
            TABLES[0],
            TABLES[1],
            ("ANALYTICS_BUCKET", "AnalyticsBucket"),
            ("AWS_ENDPOINT_URL_S3", "https://127.0.0.1:4566"),
        ];
        let config = Config::from_env(&env).unwrap();
        assert_eq!(config.analytics_bucket.as_deref(), Some("AnalyticsBucket"));
        assert!(config.s3_path_style);
    }
}

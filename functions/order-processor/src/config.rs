//! The order processor's settings, read and validated once at cold start.

use shared::config::{ConfigError, Env, number_or, table_name};
use std::num::NonZeroUsize;

/// Default LRU capacity (about 2 MiB; see `cache.rs`).
pub const DEFAULT_CACHE_CAPACITY: u64 = 10_000;
/// Default number of writes in flight per batch.
pub const DEFAULT_WRITE_CONCURRENCY: u64 = 10;
/// Default CloudWatch namespace of the metrics (Powertools' variable).
pub const DEFAULT_NAMESPACE: &str = "OrderSystem";

/// Validated settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// `TABLE_NAME`: the DynamoDB table (required).
    pub table_name: String,
    /// `DEAD_LETTER_QUEUE_URL`: where invalid and conflicting orders go
    /// (required; the URL of the order queue's dead-letter queue).
    pub dead_letter_queue_url: String,
    /// `CACHE_CAPACITY`: orders remembered, 1 to 100,000.
    pub cache_capacity: NonZeroUsize,
    /// `WRITE_CONCURRENCY`: writes in flight per execution environment, shared
    /// by every batch it serves at once (Lambda Managed Instances), 1 to 64.
    pub write_concurrency: usize,
    /// `POWERTOOLS_METRICS_NAMESPACE`: CloudWatch namespace of the EMF metrics.
    pub metrics_namespace: String,
}

impl Config {
    /// Read every setting from `env`.
    pub fn from_env(env: &dyn Env) -> Result<Self, ConfigError> {
        let table_name = table_name(env, "TABLE_NAME", "the DynamoDB table to write orders to")?;
        let dead_letter_queue_url = queue_url(
            env,
            "DEAD_LETTER_QUEUE_URL",
            "the queue invalid and conflicting orders are moved to",
        )?;
        let cache_capacity = number_or(env, "CACHE_CAPACITY", DEFAULT_CACHE_CAPACITY, 1..=100_000)?;
        let write_concurrency =
            number_or(env, "WRITE_CONCURRENCY", DEFAULT_WRITE_CONCURRENCY, 1..=64)?;
        let metrics_namespace = env
            .get("POWERTOOLS_METRICS_NAMESPACE")?
            .unwrap_or_else(|| DEFAULT_NAMESPACE.to_owned());
        if metrics_namespace.is_empty() || metrics_namespace.len() > 255 {
            return Err(ConfigError::new(
                "POWERTOOLS_METRICS_NAMESPACE",
                &metrics_namespace,
                "must be 1 to 255 characters",
            ));
        }
        Ok(Self {
            table_name,
            dead_letter_queue_url,
            // The ranges above start at 1 and fit in usize.
            cache_capacity: NonZeroUsize::new(usize::try_from(cache_capacity).unwrap_or(1))
                .unwrap_or(NonZeroUsize::MIN),
            write_concurrency: usize::try_from(write_concurrency).unwrap_or(1),
            metrics_namespace,
        })
    }
}

/// An SQS queue URL, `http(s)://HOST/ACCOUNT/NAME` (on AWS, `!Ref` of a
/// queue: `https://sqs.REGION.amazonaws.com/ACCOUNT/NAME`), NAME 1 to 80
/// characters of `A-Z a-z 0-9 - _`, with `.fifo` for a FIFO queue.
fn queue_url(env: &dyn Env, setting: &'static str, purpose: &str) -> Result<String, ConfigError> {
    let url = env
        .get(setting)?
        .ok_or_else(|| ConfigError::new(setting, "", format!("is required: {purpose}")))?;
    let parts: Option<Vec<&str>> = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
        .map(|rest| rest.split('/').collect());
    let valid = match parts.as_deref() {
        Some([host, account, name]) => {
            let base = name.strip_suffix(".fifo").unwrap_or(name);
            !host.is_empty()
                && host
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b':'))
                && !account.is_empty()
                && account.bytes().all(|b| b.is_ascii_alphanumeric())
                && !base.is_empty()
                && name.len() <= 80
                && base
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_'))
        }
        _ => false,
    };
    if !valid {
        return Err(ConfigError::new(
            setting,
            &url,
            "must be an SQS queue URL, https://sqs.REGION.amazonaws.com/ACCOUNT/NAME",
        ));
    }
    Ok(url)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DLQ: (&str, &str) = (
        "DEAD_LETTER_QUEUE_URL",
        "https://sqs.eu-west-1.amazonaws.com/123456789012/OrdersDeadLetterQueue",
    );

    #[test]
    fn defaults_need_only_the_table_and_the_dead_letter_queue() {
        let c = Config::from_env(&[("TABLE_NAME", "orders"), DLQ]).expect("valid");
        assert_eq!(c.dead_letter_queue_url, DLQ.1);
        assert_eq!(c.cache_capacity.get(), 10_000);
        assert_eq!(c.write_concurrency, 10);
        assert_eq!(c.metrics_namespace, "OrderSystem");
    }

    #[test]
    fn bad_values_name_their_setting() {
        let cases: [(&[(&'static str, &'static str)], &str); 8] = [
            (&[DLQ], "TABLE_NAME"),
            (&[("TABLE_NAME", "ab"), DLQ], "TABLE_NAME"),
            (&[("TABLE_NAME", "has space"), DLQ], "TABLE_NAME"),
            (&[("TABLE_NAME", "orders")], "DEAD_LETTER_QUEUE_URL"),
            (
                &[("TABLE_NAME", "orders"), DLQ, ("CACHE_CAPACITY", "0")],
                "CACHE_CAPACITY",
            ),
            (
                &[("TABLE_NAME", "orders"), DLQ, ("CACHE_CAPACITY", "100001")],
                "CACHE_CAPACITY",
            ),
            (
                &[("TABLE_NAME", "orders"), DLQ, ("WRITE_CONCURRENCY", "x")],
                "WRITE_CONCURRENCY",
            ),
            (
                &[
                    ("TABLE_NAME", "orders"),
                    DLQ,
                    ("POWERTOOLS_METRICS_NAMESPACE", ""),
                ],
                "POWERTOOLS_METRICS_NAMESPACE",
            ),
        ];
        for (env, setting) in cases {
            let err = Config::from_env(&env).expect_err(setting);
            assert_eq!(err.setting, setting);
        }
    }

    #[test]
    fn the_dead_letter_queue_is_a_queue_url() {
        for good in [
            DLQ.1,
            "https://sqs.us-east-1.amazonaws.com/123456789012/Orders-DLQ_1.fifo",
            "http://127.0.0.1:9324/000000000000/OrdersDeadLetterQueue",
        ] {
            let env = [("TABLE_NAME", "orders"), ("DEAD_LETTER_QUEUE_URL", good)];
            assert!(Config::from_env(&env).is_ok(), "{good}");
        }
        let long: &'static str = format!("https://host/123/{}", "q".repeat(81)).leak();
        for bad in [
            "",
            "OrdersDeadLetterQueue",
            "arn:aws:sqs:us-east-1:123456789012:OrdersDeadLetterQueue",
            "ftp://host/1/q",
            "https:///123/q",
            "https://host/q",
            "https://host/123/q/extra",
            "https://host/123/",
            "https://host/123/.fifo",
            "https://host/123/has space",
            "https://host/12-3/q",
            long,
        ] {
            let env = [("TABLE_NAME", "orders"), ("DEAD_LETTER_QUEUE_URL", bad)];
            let err = Config::from_env(&env).expect_err(bad);
            assert_eq!(err.setting, "DEAD_LETTER_QUEUE_URL", "{bad}");
        }
    }
}

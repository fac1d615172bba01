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
    /// `CACHE_CAPACITY`: orders remembered, 1 to 100,000.
    pub cache_capacity: NonZeroUsize,
    /// `WRITE_CONCURRENCY`: writes in flight per batch, 1 to 64.
    pub write_concurrency: usize,
    /// `POWERTOOLS_METRICS_NAMESPACE`: CloudWatch namespace of the EMF metrics.
    pub metrics_namespace: String,
}

impl Config {
    /// Read every setting from `env`.
    pub fn from_env(env: &dyn Env) -> Result<Self, ConfigError> {
        let table_name = table_name(env, "TABLE_NAME", "the DynamoDB table to write orders to")?;
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
            // The ranges above start at 1 and fit in usize.
            cache_capacity: NonZeroUsize::new(usize::try_from(cache_capacity).unwrap_or(1))
                .unwrap_or(NonZeroUsize::MIN),
            write_concurrency: usize::try_from(write_concurrency).unwrap_or(1),
            metrics_namespace,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_need_only_the_table() {
        let c = Config::from_env(&[("TABLE_NAME", "orders")]).expect("valid");
        assert_eq!(c.cache_capacity.get(), 10_000);
        assert_eq!(c.write_concurrency, 10);
        assert_eq!(c.metrics_namespace, "OrderSystem");
    }

    #[test]
    fn bad_values_name_their_setting() {
        let cases: [(&[(&'static str, &'static str)], &str); 7] = [
            (&[], "TABLE_NAME"),
            (&[("TABLE_NAME", "ab")], "TABLE_NAME"),
            (&[("TABLE_NAME", "has space")], "TABLE_NAME"),
            (
                &[("TABLE_NAME", "orders"), ("CACHE_CAPACITY", "0")],
                "CACHE_CAPACITY",
            ),
            (
                &[("TABLE_NAME", "orders"), ("CACHE_CAPACITY", "100001")],
                "CACHE_CAPACITY",
            ),
            (
                &[("TABLE_NAME", "orders"), ("WRITE_CONCURRENCY", "x")],
                "WRITE_CONCURRENCY",
            ),
            (
                &[
                    ("TABLE_NAME", "orders"),
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
}

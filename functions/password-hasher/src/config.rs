//! The password hasher's settings, read and validated once at cold start.

use shared::config::{ConfigError, Env, number_or};

/// The validated settings: the limits a request must keep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// `BATCH_LIMIT`: most passwords (or pairs) per request, 1 to 10,000 (default 1,000).
    pub batch: usize,
    /// `MIN_COST`: lowest bcrypt cost accepted, 4 to 31 (default 4).
    pub min_cost: u32,
    /// `MAX_COST`: highest bcrypt cost accepted, `MIN_COST` to 31 (default 14), for
    /// hashing and for the hashes given to verify: a request cannot buy unbounded CPU.
    pub max_cost: u32,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            batch: 1_000,
            min_cost: 4,
            max_cost: 14,
        }
    }
}

impl Config {
    /// Read the three settings.
    pub fn from_env(env: &dyn Env) -> Result<Self, ConfigError> {
        let d = Self::default();
        let batch = number_or(env, "BATCH_LIMIT", d.batch as u64, 1..=10_000)?;
        let min_cost = number_or(env, "MIN_COST", u64::from(d.min_cost), 4..=31)?;
        let max_cost = number_or(env, "MAX_COST", u64::from(d.max_cost), min_cost..=31)?;
        // The ranges above make these conversions lossless.
        Ok(Self {
            batch: usize::try_from(batch).unwrap_or(d.batch),
            min_cost: u32::try_from(min_cost).unwrap_or(d.min_cost),
            max_cost: u32::try_from(max_cost).unwrap_or(d.max_cost),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_overrides() {
        assert_eq!(Config::from_env(&[]), Ok(Config::default()));
        let l = Config::from_env(&[("BATCH_LIMIT", "10"), ("MIN_COST", "5"), ("MAX_COST", "5")])
            .expect("valid");
        assert_eq!((l.batch, l.min_cost, l.max_cost), (10, 5, 5));
    }

    #[test]
    fn bad_values_name_their_setting() {
        for (env, setting) in [
            ([("BATCH_LIMIT", "0")], "BATCH_LIMIT"),
            ([("BATCH_LIMIT", "10001")], "BATCH_LIMIT"),
            ([("MIN_COST", "3")], "MIN_COST"),
            ([("MAX_COST", "32")], "MAX_COST"),
            ([("MAX_COST", "x")], "MAX_COST"),
        ] {
            assert_eq!(Config::from_env(&env).expect_err(setting).setting, setting);
        }
        // MAX_COST below MIN_COST.
        let err = Config::from_env(&[("MIN_COST", "10"), ("MAX_COST", "8")]).expect_err("order");
        assert_eq!(err.setting, "MAX_COST");
    }
}

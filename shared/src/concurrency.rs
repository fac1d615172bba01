//! How many invocations one execution environment serves at once.
//!
//! On-demand Lambda sends an environment one invocation at a time. On Lambda
//! Managed Instances (LMI) one environment serves up to the function's
//! `PerExecutionEnvironmentMaxConcurrency` invocations at once, and Lambda
//! tells the runtime by `AWS_LAMBDA_MAX_CONCURRENCY`. [`crate::run`] serves that
//! many concurrently (`lambda_runtime`'s `run_concurrent`, one long poll per
//! slot); without the variable it serves one after another, on the same code
//! path.
//!
//! What an environment holds for its invocations (the order processor's
//! write budget, the hasher's queued work, the Arrow worker's memory budget)
//! is therefore shared by up to [`Concurrency::max`] of them: each function
//! sizes those budgets per environment, never per invocation.

use crate::config::{ConfigError, Env, parse_in_range};

/// The variable Lambda sets on Managed Instances.
pub const MAX_CONCURRENCY_VAR: &str = "AWS_LAMBDA_MAX_CONCURRENCY";
/// Lambda's range for `PerExecutionEnvironmentMaxConcurrency`.
pub const MAX_CONCURRENCY_RANGE: std::ops::RangeInclusive<u64> = 1..=1_600;

/// How this environment is invoked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case", tag = "mode", content = "max")]
pub enum Concurrency {
    /// On-demand Lambda: one invocation at a time.
    OnDemand,
    /// Lambda Managed Instances: up to this many invocations at once.
    ManagedInstances(u32),
}

impl Concurrency {
    /// Read `AWS_LAMBDA_MAX_CONCURRENCY`: unset is on-demand; a value outside
    /// 1 to 1,600 is a [`ConfigError`] (the runtime would silently run one at
    /// a time).
    pub fn from_env(env: &dyn Env) -> Result<Self, ConfigError> {
        Ok(match env.get(MAX_CONCURRENCY_VAR)? {
            None => Self::OnDemand,
            Some(raw) => {
                let max = parse_in_range(MAX_CONCURRENCY_VAR, &raw, MAX_CONCURRENCY_RANGE)?;
                // The range check makes this lossless.
                Self::ManagedInstances(u32::try_from(max).unwrap_or(1))
            }
        })
    }

    /// The most invocations in flight at once in this environment (at least 1).
    pub fn max(self) -> usize {
        match self {
            Self::OnDemand => 1,
            Self::ManagedInstances(n) => usize::try_from(n).unwrap_or(1).max(1),
        }
    }

    /// Whether this is a Lambda Managed Instances environment, whose vCPUs do
    /// not follow its memory size.
    pub fn is_managed_instances(self) -> bool {
        matches!(self, Self::ManagedInstances(_))
    }
}

impl std::fmt::Display for Concurrency {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::OnDemand => f.write_str("on-demand (one invocation at a time)"),
            Self::ManagedInstances(n) => {
                write!(f, "managed instances (up to {n} invocations at once)")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unset_is_on_demand_and_a_value_is_managed_instances() {
        assert_eq!(
            Concurrency::from_env(&[("OTHER", "1")]).unwrap(),
            Concurrency::OnDemand
        );
        assert_eq!(Concurrency::OnDemand.max(), 1);
        let lmi = Concurrency::from_env(&[(MAX_CONCURRENCY_VAR, "64")]).unwrap();
        assert_eq!(lmi, Concurrency::ManagedInstances(64));
        assert_eq!(lmi.max(), 64);
        assert!(lmi.is_managed_instances());
        assert!(!Concurrency::OnDemand.is_managed_instances());
    }

    #[test]
    fn values_lambda_would_refuse_are_errors_naming_the_variable() {
        for bad in ["0", "1601", "-1", "many", ""] {
            let err = Concurrency::from_env(&[(MAX_CONCURRENCY_VAR, bad)]).unwrap_err();
            assert_eq!(err.setting, MAX_CONCURRENCY_VAR, "{bad:?}");
        }
    }
}

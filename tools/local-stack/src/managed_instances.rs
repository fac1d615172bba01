//! Lambda Managed Instances (LMI): a function's `CapacityProviderConfig`, what
//! Lambda refuses in it, and the vCPU rule of an LMI execution environment.
//!
//! On LMI one execution environment serves up to
//! `PerExecutionEnvironmentMaxConcurrency` invocations at once (Lambda tells
//! the runtime in `AWS_LAMBDA_MAX_CONCURRENCY`), and its vCPUs follow the
//! capacity provider's memory per vCPU (`ExecutionEnvironmentMemoryGiBPerVCpu`,
//! 2, 4 or 8 GiB), not the 1,769 MB rule of on-demand Lambda
//! (`shared::vcpus::MB_PER_VCPU`). [`ManagedInstances::mb_per_vcpu`] is that
//! rule, the one place the local stack takes it from (the cgroup's CPU share,
//! `crate::cgroup::Share`, and [`ManagedInstances::vcpus`], what `cargo xtask
//! run` prints).

use std::ops::RangeInclusive;

/// The memory per vCPU Lambda allows, in GiB (SAM: "2, 4 or 8").
pub const MEMORY_GIB_PER_VCPU: [u32; 3] = [2, 4, 8];
/// Lambda's range for `PerExecutionEnvironmentMaxConcurrency`.
pub const MAX_CONCURRENCY: RangeInclusive<u32> = 1..=1_600;
/// The memory an LMI function may have, in MB: at least 2 GB, at most 32 GB
/// ("the minimum supported function size is 2GB and 1 vCPU": so also at least
/// one vCPU's memory, see [`ManagedInstances::checked`]).
pub const MEMORY_MB: RangeInclusive<u32> = 2_048..=32_768;
/// `ExecutionEnvironmentMemoryGiBPerVCpu` when the template leaves it out.
pub const DEFAULT_MEMORY_GIB_PER_VCPU: u32 = 2;
/// `PerExecutionEnvironmentMaxConcurrency` when the template leaves it out:
/// `sam local`'s (Lambda's own default depends on the runtime and is not
/// documented for `provided.al2023`).
pub const DEFAULT_MAX_CONCURRENCY: u32 = 4;

/// The template's parameter that puts the functions on Lambda Managed
/// Instances: the capacity provider's subnets (none: on demand).
pub const SUBNETS_PARAMETER: &str = "ManagedInstancesSubnetIds";
/// The template's parameter for the capacity provider's security groups,
/// required with [`SUBNETS_PARAMETER`].
pub const SECURITY_GROUPS_PARAMETER: &str = "ManagedInstancesSecurityGroupIds";
/// A subnet id for local runs, where no VPC exists (well formed, so that the
/// template's checks pass).
pub const LOCAL_SUBNET: &str = "subnet-00000000000000000";
/// A security group id for local runs, as [`LOCAL_SUBNET`].
pub const LOCAL_SECURITY_GROUP: &str = "sg-00000000000000000";
/// The parameter values that run every function on Lambda Managed Instances
/// locally (`cargo xtask run --managed-instances`, the end-to-end test).
pub const LOCAL_PARAMETERS: [(&str, &str); 2] = [
    (SUBNETS_PARAMETER, LOCAL_SUBNET),
    (SECURITY_GROUPS_PARAMETER, LOCAL_SECURITY_GROUP),
];

/// A function's Lambda Managed Instances settings, checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ManagedInstances {
    /// `PerExecutionEnvironmentMaxConcurrency`: invocations one environment
    /// serves at once.
    pub max_concurrency: u32,
    /// `ExecutionEnvironmentMemoryGiBPerVCpu`: the environment's memory per vCPU.
    pub memory_gib_per_vcpu: u32,
}

impl ManagedInstances {
    /// The settings as written (`None`: left out, the default), checked as
    /// Lambda checks them, with the function's `MemorySize`; `Err` names the
    /// function and says what Lambda refuses.
    pub fn checked(
        function: &str,
        memory_gib_per_vcpu: Option<f64>,
        max_concurrency: Option<f64>,
        memory_mb: u32,
    ) -> Result<Self, String> {
        let refused = |what: String| format!("Lambda refuses {function}: {what}");
        let ratio = memory_gib_per_vcpu.unwrap_or(f64::from(DEFAULT_MEMORY_GIB_PER_VCPU));
        let memory_gib_per_vcpu = MEMORY_GIB_PER_VCPU
            .into_iter()
            .find(|allowed| f64::from(*allowed) == ratio)
            .ok_or_else(|| {
                refused(format!(
                    "CapacityProviderConfig.ExecutionEnvironmentMemoryGiBPerVCpu is {ratio}, not 2, 4 or 8"
                ))
            })?;
        let concurrency = max_concurrency.unwrap_or(f64::from(DEFAULT_MAX_CONCURRENCY));
        let max_concurrency = MAX_CONCURRENCY
            .clone()
            .find(|allowed| f64::from(*allowed) == concurrency)
            .ok_or_else(|| {
                refused(format!(
                    "CapacityProviderConfig.PerExecutionEnvironmentMaxConcurrency is {concurrency}, not a whole number from 1 to 1600"
                ))
            })?;
        if !MEMORY_MB.contains(&memory_mb) {
            return Err(refused(format!(
                "MemorySize is {memory_mb} MB; on Lambda Managed Instances it must be 2048 to 32768 MB"
            )));
        }
        let managed = Self {
            max_concurrency,
            memory_gib_per_vcpu,
        };
        let vcpus = managed.vcpus(memory_mb);
        if vcpus < 1.0 {
            return Err(refused(format!(
                "MemorySize {memory_mb} MB at {memory_gib_per_vcpu} GiB per vCPU is {vcpus} vCPU; the smallest Lambda Managed Instances function has 1 vCPU"
            )));
        }
        Ok(managed)
    }

    /// The memory that buys one vCPU, in MB: the memory per vCPU (2 GiB per
    /// vCPU: 2,048 MB).
    pub fn mb_per_vcpu(self) -> u64 {
        1024 * u64::from(self.memory_gib_per_vcpu.max(1))
    }

    /// The vCPUs of an environment of `memory_mb`: its memory divided by the
    /// memory per vCPU (2,048 MB at 2 GiB per vCPU: 1 vCPU).
    pub fn vcpus(self, memory_mb: u32) -> f64 {
        f64::from(memory_mb) / self.mb_per_vcpu() as f64
    }
}

impl std::fmt::Display for ManagedInstances {
    /// `up to M at once, R GiB per vCPU`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "up to {} at once, {} GiB per vCPU",
            self.max_concurrency, self.memory_gib_per_vcpu
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_vcpus_are_the_memory_divided_by_the_memory_per_vcpu() {
        let at = |ratio| ManagedInstances {
            max_concurrency: 4,
            memory_gib_per_vcpu: ratio,
        };
        assert_eq!(at(2).vcpus(2_048), 1.0);
        assert_eq!(at(4).vcpus(2_048), 0.5);
        assert_eq!(at(2).vcpus(8_192), 4.0);
        assert_eq!(at(8).vcpus(32_768), 4.0);
        assert_eq!(at(2).mb_per_vcpu(), 2_048);
        assert_eq!(at(8).mb_per_vcpu(), 8_192);
        assert_eq!(at(2).to_string(), "up to 4 at once, 2 GiB per vCPU");
    }

    #[test]
    fn lambdas_ranges_are_checked_and_defaults_filled_in() {
        assert_eq!(
            ManagedInstances::checked("F", Some(4.0), Some(16.0), 4_096),
            Ok(ManagedInstances {
                max_concurrency: 16,
                memory_gib_per_vcpu: 4
            })
        );
        assert_eq!(
            ManagedInstances::checked("F", None, None, 2_048),
            Ok(ManagedInstances {
                max_concurrency: DEFAULT_MAX_CONCURRENCY,
                memory_gib_per_vcpu: DEFAULT_MEMORY_GIB_PER_VCPU
            })
        );
        for (ratio, concurrency, memory, refused) in [
            (
                Some(3.0),
                None,
                2_048,
                "ExecutionEnvironmentMemoryGiBPerVCpu is 3, not 2, 4 or 8",
            ),
            (
                Some(2.5),
                None,
                2_048,
                "ExecutionEnvironmentMemoryGiBPerVCpu is 2.5",
            ),
            (
                None,
                Some(0.0),
                2_048,
                "PerExecutionEnvironmentMaxConcurrency is 0",
            ),
            (
                None,
                Some(1_601.0),
                2_048,
                "PerExecutionEnvironmentMaxConcurrency is 1601",
            ),
            (
                None,
                Some(1.5),
                2_048,
                "PerExecutionEnvironmentMaxConcurrency is 1.5",
            ),
            (None, None, 1_769, "MemorySize is 1769 MB"),
            (None, None, 32_769, "MemorySize is 32769 MB"),
            (
                Some(4.0),
                None,
                2_048,
                "2048 MB at 4 GiB per vCPU is 0.5 vCPU",
            ),
        ] {
            let error = ManagedInstances::checked("F", ratio, concurrency, memory)
                .expect_err("Lambda refuses it");
            assert!(error.starts_with("Lambda refuses F: "), "{error}");
            assert!(error.contains(refused), "{error}");
        }
    }
}

//! The global allocator, chosen by cargo feature, and its memory-return policy.
//!
//! | feature    | allocator              | prompt (`MEMORY_RETURN=prompt`)            | keep (`MEMORY_RETURN=keep`)        |
//! |------------|------------------------|--------------------------------------------|------------------------------------|
//! | `mimalloc` | mimalloc v3 (default)  | `purge_delay=0`, `purge_decommits=1`, 64 KiB purges; `allow_thp=0` from start-up | `purge_delay=-1` (never purge) |
//! | `jemalloc` | tikv-jemallocator      | `dirty_decay_ms=0`, `muzzy_decay_ms=0`     | both `-1` (never decay)            |
//! | `snmalloc` | snmalloc-rs            | no knob: snmalloc decides                  | no knob: snmalloc decides          |
//! | `system`   | glibc malloc           | `M_TRIM_THRESHOLD` and `M_MMAP_THRESHOLD` 128 KiB | `M_MMAP_THRESHOLD` 32 MiB, `M_TRIM_THRESHOLD` max |
//!
//! "prompt" gives freed memory back to the OS at once (lowest RSS, a few more
//! system calls); "keep" holds it for reuse (no page faults for memory the
//! function already touched, which the Arrow worker's arena relies on).
//!
//! Exactly one allocator feature must be enabled; see the `compile_error!`s below.

use crate::config::{ConfigError, Env};
use std::fmt;

#[cfg(not(any(
    feature = "mimalloc",
    feature = "jemalloc",
    feature = "snmalloc",
    feature = "system"
)))]
compile_error!(
    "no allocator selected: enable exactly one of the features `mimalloc` (default), `jemalloc`, `snmalloc`, `system`"
);

#[cfg(any(
    all(
        feature = "mimalloc",
        any(feature = "jemalloc", feature = "snmalloc", feature = "system")
    ),
    all(feature = "jemalloc", any(feature = "snmalloc", feature = "system")),
    all(feature = "snmalloc", feature = "system"),
))]
compile_error!(
    "more than one allocator selected: enable exactly one of the features `mimalloc`, `jemalloc`, `snmalloc`, `system` \
     (to pick a non-default one, build with `--no-default-features --features NAME`)"
);

// Only one implementation is compiled even if several features are on, so the
// `compile_error!` above is the only error a user sees.
#[cfg(feature = "mimalloc")]
#[path = "mimalloc.rs"]
mod imp;
#[cfg(all(feature = "jemalloc", not(feature = "mimalloc")))]
#[path = "jemalloc.rs"]
mod imp;
#[cfg(all(
    feature = "snmalloc",
    not(any(feature = "mimalloc", feature = "jemalloc"))
))]
#[path = "snmalloc.rs"]
mod imp;
#[cfg(all(
    feature = "system",
    not(any(feature = "mimalloc", feature = "jemalloc", feature = "snmalloc"))
))]
#[path = "system.rs"]
mod imp;

pub mod glibc;

pub use imp::NAME;
#[cfg(feature = "mimalloc")]
pub use imp::{
    MiOption, options as mimalloc_options, owns, settings as mimalloc_settings,
    start_up_settings as mimalloc_start_up_settings,
};

/// What to do with memory the program frees.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Policy {
    /// Give freed pages back to the OS at once (the default).
    #[default]
    Prompt,
    /// Keep freed pages for reuse: no page faults when they are needed again.
    Keep,
}

impl Policy {
    /// The setting that chooses the policy.
    pub const SETTING: &'static str = "MEMORY_RETURN";

    /// Read `MEMORY_RETURN` (`prompt`, the default, or `keep`).
    pub fn from_env(env: &dyn Env) -> Result<Self, ConfigError> {
        match env.get(Self::SETTING)? {
            None => Ok(Policy::default()),
            Some(value) => Self::parse(&value).ok_or_else(|| {
                ConfigError::new(
                    Self::SETTING,
                    value.trim(),
                    "must be \"prompt\" or \"keep\"",
                )
            }),
        }
    }

    /// A value of `MEMORY_RETURN`, blanks around it ignored. Allocates nothing.
    pub fn parse(value: &str) -> Option<Self> {
        match value.trim() {
            "prompt" => Some(Policy::Prompt),
            "keep" => Some(Policy::Keep),
            _ => None,
        }
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Policy::Prompt => "prompt",
            Policy::Keep => "keep",
        })
    }
}

/// What applying a policy did, in the allocator's own terms (for the init log line).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Applied {
    /// The allocator was configured; the text names the knobs set.
    Configured(String),
    /// The allocator has no such knob; it keeps its own behaviour.
    Unsupported,
}

impl fmt::Display for Applied {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Applied::Configured(knobs) => f.write_str(knobs),
            Applied::Unsupported => f.write_str("allocator has no memory-return knob"),
        }
    }
}

/// The allocator's own view of its memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct AllocatorStats {
    /// Bytes handed out to the program, where the allocator counts them
    /// (jemalloc, glibc); `None` where it does not cheaply (mimalloc, snmalloc).
    pub allocated: Option<u64>,
    /// Bytes the allocator holds from the OS (committed / resident / mapped).
    pub mapped: u64,
}

/// Set the memory-return policy. Call once at cold start, before heavy allocation.
pub fn apply(policy: Policy) -> Result<Applied, String> {
    imp::apply(policy)
}

/// The allocator's own statistics; cheap enough for every invocation.
pub fn stats() -> AllocatorStats {
    imp::stats()
}

/// Give every free page back to the OS now, whatever the policy.
pub fn release_free_memory() {
    imp::release_free_memory()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policy_setting() {
        assert_eq!(Policy::from_env(&[]), Ok(Policy::Prompt));
        assert_eq!(
            Policy::from_env(&[("MEMORY_RETURN", "keep")]),
            Ok(Policy::Keep)
        );
        assert_eq!(
            Policy::from_env(&[("MEMORY_RETURN", "prompt")]),
            Ok(Policy::Prompt)
        );
        let err = Policy::from_env(&[("MEMORY_RETURN", "sometimes")]).unwrap_err();
        assert_eq!(err.setting, "MEMORY_RETURN");
    }

    #[test]
    fn both_policies_apply() {
        // Keep is applied last so the rest of the test binary runs with the
        // allocator's most permissive setting; both must succeed.
        for policy in [Policy::Prompt, Policy::Keep] {
            apply(policy).unwrap_or_else(|e| panic!("{NAME} {policy}: {e}"));
        }
        release_free_memory();
    }
}

//! The allocators a function can pick, each with its memory-return policy and
//! statistics. A binary picks one in its `main.rs`, one line:
//!
//! ```ignore
//! shared::global_allocator!(Mimalloc); // or Jemalloc, Snmalloc, System
//! ```
//!
//! `Mimalloc`, `Jemalloc` and `Snmalloc` need `shared`'s cargo feature of the
//! same name (lower case) in the function's `Cargo.toml`; `System` needs none.
//! The features only make an allocator *available*: they add up freely when
//! cargo unifies them across a workspace, so two functions of one workspace
//! can each have their own allocator. A binary that declares none (a test)
//! runs on Rust's default, the system allocator, and [`active`] says so.
//!
//! | allocator  | crate                  | prompt (`MEMORY_RETURN=prompt`)            | keep (`MEMORY_RETURN=keep`)        |
//! |------------|------------------------|--------------------------------------------|------------------------------------|
//! | `Mimalloc` | mimalloc 2.x (`v2`)    | `purge_delay=0`, `purge_decommits=1` (on 3.x also 64 KiB purges); `allow_thp=0` from start-up | `purge_delay=-1` (never purge) |
//! | `Jemalloc` | tikv-jemallocator      | `dirty_decay_ms=0`, `muzzy_decay_ms=0`     | both `-1` (never decay)            |
//! | `Snmalloc` | snmalloc-rs            | no knob: snmalloc decides                  | no knob: snmalloc decides          |
//! | `System`   | glibc malloc           | `M_TRIM_THRESHOLD` and `M_MMAP_THRESHOLD` 128 KiB | `M_MMAP_THRESHOLD` 32 MiB, `M_TRIM_THRESHOLD` max |
//!
//! "prompt" gives freed memory back to the OS at once (lowest RSS, a few more
//! system calls); "keep" holds it for reuse (no page faults for memory the
//! function already touched, which the Arrow worker's arena relies on).

use crate::config::{ConfigError, Env};
use std::fmt;

use std::sync::OnceLock;

pub mod glibc;
#[cfg(feature = "jemalloc")]
mod jemalloc;
#[cfg(feature = "mimalloc")]
mod mimalloc;
#[cfg(feature = "snmalloc")]
mod snmalloc;
mod system;

#[cfg(feature = "jemalloc")]
pub use jemalloc::Jemalloc;
#[cfg(feature = "mimalloc")]
pub use mimalloc::{
    MiOption, Mimalloc, options as mimalloc_options, owns, settings as mimalloc_settings,
    start_up_settings as mimalloc_start_up_settings, version as mimalloc_version,
};
#[cfg(feature = "snmalloc")]
pub use snmalloc::Snmalloc;
pub use system::System;

/// Declare the global allocator of this binary: `Mimalloc`, `Jemalloc`,
/// `Snmalloc` or `System` (see the [module doc](crate::allocator)). One line in
/// a function's `main.rs`, outside any function:
///
/// ```ignore
/// shared::global_allocator!(Jemalloc);
/// ```
///
/// It declares Rust's `#[global_allocator]` and tells `shared` which one it
/// is before `main` runs (so mimalloc's start-up options are set before its
/// first allocation, and [`active`] names it from the start).
#[macro_export]
macro_rules! global_allocator {
    ($kind:ident) => {
        #[global_allocator]
        static GLOBAL_ALLOCATOR: $crate::allocator::$kind = $crate::allocator::$kind;

        #[cfg(any(target_os = "linux", target_os = "android"))]
        #[used]
        // The priority (00100) runs it before the allocators' own
        // constructors, which have none or a higher one.
        // SAFETY: the loader calls each `.init_array` entry once, before
        // `main`, with no arguments; `declare` is such a function.
        #[unsafe(link_section = ".init_array.00100")]
        static DECLARE_GLOBAL_ALLOCATOR: extern "C" fn() = {
            extern "C" fn declare() {
                $crate::allocator::declare::<$crate::allocator::$kind>()
            }
            declare
        };

        #[cfg(target_os = "macos")]
        #[used]
        // SAFETY: as above, for the Mach-O list of initialisers.
        #[unsafe(link_section = "__DATA,__mod_init_func")]
        static DECLARE_GLOBAL_ALLOCATOR: extern "C" fn() = {
            extern "C" fn declare() {
                $crate::allocator::declare::<$crate::allocator::$kind>()
            }
            declare
        };
    };
}

/// `pub struct $name;` implementing `GlobalAlloc` by forwarding every call to
/// `$inner`, an allocator crate's own `GlobalAlloc`, and [`Allocator`] with
/// `$controls`. Every method is
/// `#[inline]`, so an allocator's code is compiled only into the binaries that
/// declare it.
macro_rules! forward_global_alloc {
    ($(#[$doc:meta])* $name:ident => $inner:expr, $controls:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, Default)]
        pub struct $name;

        impl super::Allocator for $name {
            const CONTROLS: &'static super::Controls = &$controls;
        }

        // SAFETY: every method forwards to `$inner` with the caller's own
        // arguments, so `$inner`'s `GlobalAlloc` contract is this one's.
        unsafe impl std::alloc::GlobalAlloc for $name {
            // SAFETY: the caller's contract is `GlobalAlloc::alloc`'s.
            #[inline]
            unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
                // SAFETY: the caller upholds `alloc`'s contract.
                unsafe { $inner.alloc(layout) }
            }
            // SAFETY: the caller's contract is `GlobalAlloc::alloc_zeroed`'s.
            #[inline]
            unsafe fn alloc_zeroed(&self, layout: std::alloc::Layout) -> *mut u8 {
                // SAFETY: the caller upholds `alloc_zeroed`'s contract.
                unsafe { $inner.alloc_zeroed(layout) }
            }
            // SAFETY: the caller's contract is `GlobalAlloc::dealloc`'s.
            #[inline]
            unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
                // SAFETY: the caller upholds `dealloc`'s contract; `ptr` came
                // from this allocator, so from `$inner`.
                unsafe { $inner.dealloc(ptr, layout) }
            }
            // SAFETY: the caller's contract is `GlobalAlloc::realloc`'s.
            #[inline]
            unsafe fn realloc(
                &self,
                ptr: *mut u8,
                layout: std::alloc::Layout,
                new_size: usize,
            ) -> *mut u8 {
                // SAFETY: the caller upholds `realloc`'s contract; `ptr` came
                // from this allocator, so from `$inner`.
                unsafe { $inner.realloc(ptr, layout, new_size) }
            }
        }
    };
}
use forward_global_alloc;

/// The allocators this crate knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// The system allocator (glibc malloc on Lambda): Rust's default.
    System = 0,
    /// mimalloc (feature `mimalloc`).
    Mimalloc = 1,
    /// jemalloc (feature `jemalloc`).
    Jemalloc = 2,
    /// snmalloc (feature `snmalloc`).
    Snmalloc = 3,
}

impl Kind {
    /// Every kind, in declaration order.
    pub const ALL: [Kind; 4] = [Kind::System, Kind::Mimalloc, Kind::Jemalloc, Kind::Snmalloc];

    /// The allocator's name, as logs, answers and the lab print it.
    pub const fn name(self) -> &'static str {
        match self {
            Kind::System => "system",
            Kind::Mimalloc => "mimalloc",
            Kind::Jemalloc => "jemalloc",
            Kind::Snmalloc => "snmalloc",
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What `shared` does with an allocator: its kind and its memory controls.
/// One `static` per allocator module; [`global_allocator!`] hands the declared
/// one to [`declare`], so a binary references only its own allocator's code.
#[doc(hidden)]
#[derive(Debug)]
pub struct Controls {
    kind: Kind,
    apply: fn(Policy) -> Result<Applied, String>,
    stats: fn() -> AllocatorStats,
    release_free_memory: fn(),
    /// Runs before `main`, before the allocator's first allocation.
    start_up: fn(),
    /// Whether pages freed by one thread are reused by another's next
    /// allocations, which the arena pre-warm relies on (see `arena`).
    keeps_pages_for_reuse: fn() -> bool,
}

/// An allocator type [`global_allocator!`] accepts.
pub trait Allocator: std::alloc::GlobalAlloc + Sync + 'static {
    /// Its controls.
    #[doc(hidden)]
    const CONTROLS: &'static Controls;
}

/// The controls of the allocator the binary declared; unset where it declared
/// none (then the system allocator serves it).
static ACTIVE: OnceLock<&'static Controls> = OnceLock::new();

/// Called by [`global_allocator!`] before `main`; not for other callers.
/// Allocates nothing: an allocation here would start the allocator before its
/// start-up options are set.
#[doc(hidden)]
pub fn declare<A: Allocator>() {
    if ACTIVE.set(A::CONTROLS).is_ok() {
        (A::CONTROLS.start_up)();
    }
}

fn controls() -> &'static Controls {
    ACTIVE
        .get()
        .copied()
        .unwrap_or(<System as Allocator>::CONTROLS)
}

/// The allocator serving this binary: the one its `main.rs` declared with
/// [`global_allocator!`], or the system allocator (Rust's default) in a binary
/// that declared none.
pub fn active() -> Kind {
    controls().kind
}

/// The name of the allocator serving this binary.
pub fn name() -> &'static str {
    active().name()
}

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
    /// Bytes the allocator holds from the OS (committed / resident / mapped),
    /// where it counts them usefully; `None` for mimalloc 2, whose committed
    /// figure includes the 1 GiB arena it reserves (and counts as committed)
    /// at start.
    pub mapped: Option<u64>,
}

/// Set the memory-return policy of the active allocator. Call once at cold
/// start, before heavy allocation.
pub fn apply(policy: Policy) -> Result<Applied, String> {
    (controls().apply)(policy)
}

/// The active allocator's own statistics; cheap enough for every invocation.
pub fn stats() -> AllocatorStats {
    (controls().stats)()
}

/// Whether the active allocator reuses, for one thread's allocations, pages
/// that another thread freed: what the arena pre-warm relies on (measured in
/// `tests/allocator_checks/`). Only mimalloc 3: mimalloc 2 first fills the
/// allocating thread's own segment with fresh pages (up to 32 MiB a thread,
/// more than the Arrow worker's first invocation allocates), jemalloc and
/// glibc keep an arena per thread, and snmalloc returns memory on its own
/// schedule.
pub fn keeps_pages_for_reuse() -> bool {
    (controls().keeps_pages_for_reuse)()
}

/// Give every free page back to the OS now, whatever the policy.
pub fn release_free_memory() {
    (controls().release_free_memory)()
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
    fn a_binary_that_declares_none_runs_on_the_system_allocator() {
        // This test binary declares no allocator: Rust's default serves it.
        assert_eq!(active(), Kind::System);
        assert_eq!(name(), "system");
    }

    #[test]
    fn both_policies_apply() {
        // Keep is applied last so the rest of the test binary runs with the
        // allocator's most permissive setting; both must succeed.
        for policy in [Policy::Prompt, Policy::Keep] {
            apply(policy).unwrap_or_else(|e| panic!("{} {policy}: {e}", name()));
        }
        release_free_memory();
    }
}

//! mimalloc (v3 by default in the `mimalloc` crate).

use super::{AllocatorStats, Applied, Policy, forward_global_alloc};
use libmimalloc_sys as ffi;
use std::ffi::{CStr, c_char, c_long, c_void};

forward_global_alloc!(
    /// mimalloc, for `shared::global_allocator!(Mimalloc)`.
    Mimalloc => mimalloc::MiMalloc,
    super::Controls {
        kind: super::Kind::Mimalloc,
        apply,
        stats,
        release_free_memory,
        start_up: set_start_up_defaults,
    }
);

/// One of mimalloc's options: its index in mimalloc v3's `mi_option_e` (the
/// -sys crate names only some) and mimalloc's own name for it (read from
/// `MIMALLOC_<NAME>` in the environment, printed by `mi_options_print_out`).
/// `shared/tests/mimalloc_options.rs` checks each index against that name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MiOption {
    /// The index mimalloc's functions take.
    pub index: ffi::mi_option_t,
    /// mimalloc's name for the option at that index.
    pub name: &'static str,
}

const PURGE_DECOMMITS: MiOption = MiOption {
    index: 5,
    name: "purge_decommits",
};
const PURGE_DELAY: MiOption = MiOption {
    index: 15,
    name: "purge_delay",
};
/// In KiB.
const MINIMAL_PURGE_SIZE: MiOption = MiOption {
    index: 44,
    name: "minimal_purge_size",
};
const ALLOW_THP: MiOption = MiOption {
    index: 43,
    name: "allow_thp",
};

/// The options each policy sets, with their values.
///
/// Prompt: purge at once, by decommitting (RSS drops now, not under memory
/// pressure as with MADV_FREE), in 64 KiB units (mimalloc picks 2 MiB when
/// transparent huge pages are on, which keeps more). Keep: never purge.
/// See also [`start_up_settings`].
pub fn settings(policy: Policy) -> &'static [(MiOption, c_long)] {
    match policy {
        Policy::Prompt => &[
            (PURGE_DELAY, 0),
            (PURGE_DECOMMITS, 1),
            (MINIMAL_PURGE_SIZE, 64),
        ],
        Policy::Keep => &[(PURGE_DELAY, -1), (PURGE_DECOMMITS, 0)],
    }
}

/// The options each policy sets that mimalloc reads only once, as the process
/// starts (before `main`, so before `apply`). `START_UP` sets them as defaults
/// before that; `MIMALLOC_<NAME>` in the environment still wins.
///
/// Prompt: no transparent huge pages (mimalloc asks for them with
/// MADV_HUGEPAGE). With them, a 2 MiB range of the arena is resident whole
/// from its first touch, and a 64 KiB purge inside it leaves the rest
/// resident: the order processor ends at 11 MiB of RSS instead of 5.
pub fn start_up_settings(policy: Policy) -> &'static [(MiOption, c_long)] {
    match policy {
        Policy::Prompt => &[(ALLOW_THP, 0)],
        Policy::Keep => &[],
    }
}

/// Set `start_up_settings` as mimalloc's defaults for the policy in
/// `MEMORY_RETURN`. Called before `main` by `global_allocator!(Mimalloc)`
/// (through `declare`), before mimalloc's first allocation. Allocates
/// nothing: an allocation would start mimalloc.
fn set_start_up_defaults() {
    // SAFETY: the name is NUL-terminated; before `main` no other thread can
    // change the environment.
    let value = unsafe { libc::getenv(c"MEMORY_RETURN".as_ptr()) };
    let policy = if value.is_null() {
        Some(Policy::default())
    } else {
        // SAFETY: getenv returned a NUL-terminated string that stays valid
        // while the environment is not changed.
        let value = unsafe { CStr::from_ptr(value) };
        value.to_str().ok().and_then(Policy::parse)
    };
    // A bad value is reported by cold start; mimalloc keeps its defaults.
    let Some(policy) = policy else { return };
    for (option, value) in start_up_settings(policy) {
        // SAFETY: mi_option_set_default only stores an integer in mimalloc's
        // option table, and only if the option was not set explicitly.
        unsafe { ffi::mi_option_set_default(option.index, *value) }
    }
}

pub(super) fn apply(policy: Policy) -> Result<Applied, String> {
    let set = settings(policy);
    for (option, value) in set {
        // SAFETY: mi_option_set only stores an integer in mimalloc's option
        // table (it ignores an index out of range); any value is accepted for
        // these options and it is thread-safe.
        unsafe { ffi::mi_option_set(option.index, *value) }
    }
    let mut knobs: Vec<String> = set
        .iter()
        .map(|(option, value)| format!("{}={value}", option.name))
        .collect();
    // As in force: the environment may have overridden the default.
    for (option, _) in start_up_settings(policy) {
        // SAFETY: mi_option_get only reads mimalloc's option table.
        let value = unsafe { ffi::mi_option_get(option.index) };
        knobs.push(format!("{}={value}", option.name));
    }
    Ok(Applied::Configured(knobs.join(" ")))
}

/// mimalloc's `mi_output_fun`: receives one message and the caller's `arg`.
// SAFETY: only a function-pointer type; the one passed is `collect` below.
type Output = unsafe extern "C" fn(msg: *const c_char, arg: *mut c_void);

// SAFETY: the declaration matches mimalloc.h (`void mi_options_print_out(
// mi_output_fun* out, void* arg)`), which the -sys crate compiles but does not
// bind. It calls `out(line, arg)`, one line per option, in index order.
unsafe extern "C" {
    fn mi_options_print_out(out: Option<Output>, arg: *mut c_void);
}

/// Append mimalloc's message `msg` to the `String` behind `arg`.
// SAFETY: called only by mi_options_print_out, with the arguments described
// in `options`; null pointers are ignored.
unsafe extern "C" fn collect(msg: *const c_char, arg: *mut c_void) {
    if msg.is_null() || arg.is_null() {
        return;
    }
    // SAFETY: mimalloc passes a NUL-terminated message, and `arg` is the
    // `&mut String` that `options` lent to mi_options_print_out for this call.
    let (msg, out) = unsafe { (CStr::from_ptr(msg), &mut *arg.cast::<String>()) };
    out.push_str(&msg.to_string_lossy());
}

/// Every mimalloc option, by index: mimalloc's name for it and its value now.
pub fn options() -> Vec<(String, i64)> {
    let mut text = String::new();
    // SAFETY: mi_options_print_out calls `collect` only during this call,
    // with `arg` pointing to `text`, which outlives it; `collect` may allocate:
    // mimalloc holds no lock of its own while it prints options.
    unsafe { mi_options_print_out(Some(collect), (&raw mut text).cast()) };
    text.lines()
        .filter_map(|line| {
            let (name, rest) = line.strip_prefix("option '")?.split_once("': ")?;
            let value = rest.split_whitespace().next()?.parse().ok()?;
            Some((name.to_owned(), value))
        })
        .collect()
}

pub(super) fn stats() -> AllocatorStats {
    let mut commit = 0usize;
    // SAFETY: every out-parameter may be null; the one we pass points to a live usize.
    unsafe {
        ffi::mi_process_info(
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            &mut commit,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        );
    }
    AllocatorStats {
        allocated: None,
        mapped: commit as u64,
    }
}

pub(super) fn release_free_memory() {
    // SAFETY: mi_collect has no preconditions.
    unsafe { ffi::mi_collect(true) }
}

/// Whether `ptr` lies in memory that this allocator manages.
pub fn owns(ptr: *const u8) -> bool {
    // SAFETY: mi_is_in_heap_region only compares the address with mimalloc's
    // region map; it never dereferences `ptr`.
    unsafe { ffi::mi_is_in_heap_region(ptr.cast()) }
}

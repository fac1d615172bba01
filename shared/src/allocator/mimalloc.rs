//! mimalloc: 2.x as the workspace builds it (feature `v2`); 3.x works too.

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
        keeps_pages_for_reuse: is_v3,
    }
);

/// One of mimalloc's options: its index in mimalloc's `mi_option_e` (the
/// -sys crate names only some, and the index of one option differs between
/// mimalloc 2 and 3) and mimalloc's own name for it (read from
/// `MIMALLOC_<NAME>` in the environment, printed by `mi_options_print`).
/// `shared/tests/allocator_mimalloc.rs` checks each index against that name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MiOption {
    /// The index mimalloc's functions take.
    pub index: ffi::mi_option_t,
    /// mimalloc's name for the option at that index.
    pub name: &'static str,
}

/// The version of the mimalloc linked in, as `mi_version` gives it: major,
/// then two digits each of minor and patch (20302 is 2.3.2). The workspace
/// builds 2.x (`Cargo.toml`, feature `v2`): 3.3.x has open crash reports
/// with many threads (microsoft/mimalloc#1287, #1288, #1356).
pub fn version() -> i32 {
    // SAFETY: mi_version only returns a constant; it may be called before
    // mimalloc is initialised.
    unsafe { ffi::mi_version() }
}

/// The options the policies set, at their indices in one major version.
struct Indices {
    purge_decommits: MiOption,
    purge_delay: MiOption,
    allow_thp: MiOption,
}

/// mimalloc 2.x (`v2/include/mimalloc.h`).
const V2: Indices = Indices {
    purge_decommits: MiOption {
        index: 5,
        name: "purge_decommits",
    },
    purge_delay: MiOption {
        index: 15,
        name: "purge_delay",
    },
    allow_thp: MiOption {
        index: 37,
        name: "allow_thp",
    },
};

/// mimalloc 3.x (`v3/include/mimalloc.h`), which also has
/// `minimal_purge_size` ([`MINIMAL_PURGE_SIZE_V3`]).
const V3: Indices = Indices {
    purge_decommits: V2.purge_decommits,
    purge_delay: V2.purge_delay,
    allow_thp: MiOption {
        index: 43,
        name: "allow_thp",
    },
};

/// mimalloc 3 only, in KiB: the smallest purge (3 picks 2 MiB when
/// transparent huge pages are on; 2 purges whole 64 KiB pages).
const MINIMAL_PURGE_SIZE_V3: MiOption = MiOption {
    index: 44,
    name: "minimal_purge_size",
};

fn is_v3() -> bool {
    version() >= 30000
}

/// The options each policy sets, with their values, for the mimalloc linked in.
///
/// Prompt: purge at once, by decommitting (RSS drops now, not under memory
/// pressure as with MADV_FREE); on mimalloc 3 in 64 KiB units (it picks 2 MiB
/// when transparent huge pages are on, which keeps more). Keep: never purge.
/// See also [`start_up_settings`].
pub fn settings(policy: Policy) -> &'static [(MiOption, c_long)] {
    const V2_PROMPT: [(MiOption, c_long); 2] = [(V2.purge_delay, 0), (V2.purge_decommits, 1)];
    const V3_PROMPT: [(MiOption, c_long); 3] = [
        (V3.purge_delay, 0),
        (V3.purge_decommits, 1),
        (MINIMAL_PURGE_SIZE_V3, 64),
    ];
    // The two options keep their indices from 2 to 3.
    const KEEP: [(MiOption, c_long); 2] = [(V2.purge_delay, -1), (V2.purge_decommits, 0)];
    match (policy, is_v3()) {
        (Policy::Prompt, false) => &V2_PROMPT,
        (Policy::Prompt, true) => &V3_PROMPT,
        (Policy::Keep, _) => &KEEP,
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
    const V2_PROMPT: [(MiOption, c_long); 1] = [(V2.allow_thp, 0)];
    const V3_PROMPT: [(MiOption, c_long); 1] = [(V3.allow_thp, 0)];
    match (policy, is_v3()) {
        (Policy::Prompt, false) => &V2_PROMPT,
        (Policy::Prompt, true) => &V3_PROMPT,
        (Policy::Keep, _) => &[],
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

// `mi_options_print` writes the version, then one line per option in index
// order, to the output registered with `mi_register_output`.
// SAFETY: the declaration matches mimalloc.h in 2.x and 3.x (`void
// mi_options_print(void)`), compiled but not bound by the -sys crate.
unsafe extern "C" {
    fn mi_options_print();
}

/// Append mimalloc's message `msg` to the `String` behind `arg`.
// SAFETY: called only by mimalloc while `options` has it registered, with the
// arguments described there; null pointers are ignored.
unsafe extern "C" fn collect(msg: *const c_char, arg: *mut c_void) {
    if msg.is_null() || arg.is_null() {
        return;
    }
    // SAFETY: mimalloc passes a NUL-terminated message, and `arg` is the
    // `&mut String` that `options` registered for this call.
    let (msg, out) = unsafe { (CStr::from_ptr(msg), &mut *arg.cast::<String>()) };
    out.push_str(&msg.to_string_lossy());
}

/// Every mimalloc option, by index: mimalloc's name for it and its value now.
/// For tests and the lab: while it runs, mimalloc's messages from any thread
/// come here (callers of this function take turns).
pub fn options() -> Vec<(String, i64)> {
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _turn = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let mut text = String::new();
    // The registration is undone (back to mimalloc's default output) before
    // `text` is read; `collect` may allocate: mimalloc holds no lock of its
    // own while it prints.
    // SAFETY: mimalloc calls `collect` with `arg` pointing to `text`, which
    // outlives the registration.
    unsafe {
        ffi::mi_register_output(Some(collect), (&raw mut text).cast());
        mi_options_print();
        ffi::mi_register_output(None, std::ptr::null_mut());
    }
    // Lines look like `mimalloc: option 'purge_delay': 0 ` (2.x prefixes
    // `mimalloc: `, 3.x nothing).
    text.lines()
        .filter_map(|line| {
            let (_, option) = line.split_once("option '")?;
            let (name, rest) = option.split_once("': ")?;
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
        mapped: is_v3().then_some(commit as u64),
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

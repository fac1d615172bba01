//! jemalloc (tikv-jemallocator, symbols prefixed `_rjem_`).

use super::{AllocatorStats, Applied, Policy, forward_global_alloc};
use tikv_jemalloc_ctl::{epoch, raw, stats as je_stats};

forward_global_alloc!(
    /// Jemalloc, for `shared::global_allocator!(Jemalloc)`.
    Jemalloc => tikv_jemallocator::Jemalloc,
    super::Controls {
        kind: super::Kind::Jemalloc,
        apply,
        stats,
        release_free_memory,
        start_up: || {},
        keeps_pages_for_reuse: || false,
    }
);

pub(super) fn apply(policy: Policy) -> Result<Applied, String> {
    let ms: isize = match policy {
        Policy::Prompt => 0,
        Policy::Keep => -1,
    };
    // SAFETY: `arenas.*_decay_ms` and `arena.N.*_decay_ms` take a `ssize_t`
    // (`isize`), the type passed here, and every name is NUL-terminated.
    let set = |name: &[u8]| unsafe { raw::write(name, ms) }.map_err(|e| format!("{e}"));
    // Defaults for arenas created from now on…
    set(b"arenas.dirty_decay_ms\0")?;
    set(b"arenas.muzzy_decay_ms\0")?;
    // …and the arenas that already exist (uninitialised ones answer EFAULT).
    // SAFETY: `arenas.narenas` reads an `unsigned` (`u32`); the name is NUL-terminated.
    let narenas: u32 = unsafe { raw::read(b"arenas.narenas\0") }.map_err(|e| format!("{e}"))?;
    for i in 0..narenas {
        for kind in ["dirty", "muzzy"] {
            let name = format!("arena.{i}.{kind}_decay_ms\0");
            let _ = set(name.as_bytes());
        }
    }
    Ok(Applied::Configured(format!(
        "dirty_decay_ms={ms} muzzy_decay_ms={ms}"
    )))
}

pub(super) fn stats() -> AllocatorStats {
    // jemalloc's statistics are snapshots refreshed by advancing the epoch.
    let _ = epoch::advance();
    AllocatorStats {
        allocated: je_stats::allocated::read().ok().map(|b| b as u64),
        mapped: Some(je_stats::resident::read().map_or(0, |b| b as u64)),
    }
}

pub(super) fn release_free_memory() {
    // 4096 is MALLCTL_ARENAS_ALL: purge every arena.
    // SAFETY: "arena.<i>.purge" takes no value; writing `()` passes none.
    let _ = unsafe { raw::write(b"arena.4096.purge\0", ()) };
}

//! The checks every allocator passes, run once per allocator: each
//! `tests/allocator_<name>.rs` is a binary of its own that declares one
//! allocator with `shared::global_allocator!` and calls [`tests!`].

pub mod stress;

use shared::allocator::{self, Kind, Policy, glibc};
use shared::arena;
use std::process::Command;
use std::time::Duration;

/// The tests of this module for the allocator `$kind` the binary declared.
macro_rules! tests {
    ($kind:ident) => {
        #[test]
        fn the_declared_allocator_is_active_and_serves_allocations() {
            allocator_checks::serves_allocations(shared::allocator::Kind::$kind);
        }

        #[test]
        fn prefault_removes_most_faults_or_is_refused() {
            allocator_checks::prefault_removes_most_faults_or_is_refused();
        }

        #[test]
        fn threads_come_and_go_while_memory_crosses_them() {
            allocator_checks::stress::threads_come_and_go_while_memory_crosses_them();
        }

        #[test]
        fn child_variant() {
            allocator_checks::child_variant();
            allocator_checks::stress::child();
        }
    };
}
pub(crate) use tests;

const SIZE: usize = 64 << 20;
/// The statistics are process-wide: the test harness's other threads allocate and free
/// while this test runs (a CI run saw `allocated` grow by 18 KiB less than the buffer).
const OTHER_THREADS_SLACK: u64 = 1 << 20;

/// `kind` is the active allocator, and Rust's allocations reach it (its own
/// statistics grow by an allocation), not glibc unless it is the system one.
pub fn serves_allocations(kind: Kind) {
    assert_eq!(allocator::active(), kind);
    assert_eq!(allocator::name(), kind.name());
    let glibc_before = glibc::info();
    let before = allocator::stats();
    let buffer = vec![7u8; SIZE];
    let after = allocator::stats();
    let glibc_after = glibc::info();
    std::hint::black_box(&buffer);

    // The selected allocator's own statistics grew by the allocation…
    if let (Some(a), Some(b)) = (before.mapped, after.mapped) {
        assert!(b >= a + SIZE as u64 / 2, "{kind}: mapped {a} -> {b}");
    }
    if let (Some(a), Some(b)) = (before.allocated, after.allocated) {
        assert!(
            b + OTHER_THREADS_SLACK >= a + SIZE as u64,
            "{kind}: allocated {a} -> {b}"
        );
    }
    // …and glibc served it only if glibc is the selected allocator.
    let glibc_grew = glibc_after.in_use + OTHER_THREADS_SLACK >= glibc_before.in_use + SIZE as u64;
    assert_eq!(glibc_grew, kind == Kind::System, "{kind}");
    for policy in [Policy::Prompt, Policy::Keep] {
        allocator::apply(policy).unwrap_or_else(|e| panic!("{kind} {policy}: {e}"));
    }
    allocator::release_free_memory();
}

const WORKLOAD: usize = 64 << 20;

/// Allocate `WORKLOAD` in 1 MiB blocks and touch every page, as an Arrow
/// aggregation would; return the minor faults it cost.
fn workload_faults() -> u64 {
    let before = shared::memory::minor_faults();
    let blocks: Vec<Vec<u8>> = (0..WORKLOAD / arena::BLOCK)
        .map(|_| vec![1u8; arena::BLOCK])
        .collect();
    std::hint::black_box(&blocks);
    shared::memory::minor_faults() - before
}

/// Pre-warming really pre-faults: a workload that allocates and touches 64 MiB
/// takes a small fraction of the minor page faults after pre-warming that it
/// takes without. Each variant runs in a fresh child process (this same test
/// binary, re-run with `ARENA_CHILD` set), so neither inherits the other's heap.
/// An allocator that would not keep the pages is refused, not silently useless.
pub fn prefault_removes_most_faults_or_is_refused() {
    if !arena::supported() {
        let refused = arena::start(WORKLOAD, Policy::Keep).expect_err("unsupported");
        assert_eq!(refused, arena::NotStarted::Unsupported(allocator::name()));
        return;
    }
    let cold = run_child("cold");
    let warm = run_child("prewarm");
    eprintln!(
        "{}: workload of 64 MiB: {cold} minor faults cold, {warm} after pre-warming",
        allocator::name()
    );
    // 64 MiB is 16,384 pages: cold pays roughly one fault per page.
    assert!(cold >= 4_000, "the cold workload should fault: {cold}");
    assert!(
        warm * 5 <= cold,
        "pre-warming should remove most faults: {warm} vs {cold}"
    );
}

/// The child of [`prefault_removes_most_faults_or_is_refused`]; does nothing
/// in a normal run.
pub fn child_variant() {
    let Ok(variant) = std::env::var("ARENA_CHILD") else {
        return;
    };
    allocator::apply(Policy::Keep).expect("policy");
    if variant == "prewarm" {
        let prewarm = arena::start(WORKLOAD * 2, Policy::Keep).expect("start");
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("runtime");
        runtime
            .block_on(prewarm.wait(Duration::from_secs(60)))
            .expect("pre-warm finished");
    }
    println!("FAULTS={}", workload_faults());
}

/// This test binary run again for `child_variant` alone, with `env`: a fresh
/// process, whose crash fails only the test that started it.
pub fn child_output(env: &[(&str, &str)]) -> std::process::Output {
    Command::new(std::env::current_exe().expect("test binary"))
        .args([
            "--exact",
            "child_variant",
            "--nocapture",
            "--test-threads=1",
        ])
        .envs(env.iter().copied())
        .output()
        .expect("child")
}

fn run_child(variant: &str) -> u64 {
    let output = child_output(&[
        ("ARENA_CHILD", variant),
        // Count 4 KiB faults: with transparent huge pages (which mimalloc asks
        // for at start-up) a 2 MiB region faults once, whatever pre-warming does.
        ("MIMALLOC_ALLOW_THP", "0"),
    ]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
        .split("FAULTS=")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no FAULTS line in: {stdout}"))
}

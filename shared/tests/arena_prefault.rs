//! Pre-warming really pre-faults: a workload that allocates and touches 64 MiB
//! takes a small fraction of the minor page faults after pre-warming that it
//! takes without. Each variant runs in a fresh child process (this same test
//! binary, re-run with `ARENA_CHILD` set), so neither inherits the other's heap.

use shared::allocator::{self, Policy};
use shared::arena;
use std::process::Command;
use std::time::Duration;

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

#[test]
fn child_variant() {
    let Ok(variant) = std::env::var("ARENA_CHILD") else {
        return; // Only meaningful when run by `prefault_removes_most_faults`.
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

fn run_child(variant: &str) -> u64 {
    let output = Command::new(std::env::current_exe().expect("test binary"))
        .args([
            "--exact",
            "child_variant",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("ARENA_CHILD", variant)
        // Count 4 KiB faults: with transparent huge pages (which mimalloc asks
        // for at start-up) a 2 MiB region faults once, whatever pre-warming does.
        .env("MIMALLOC_ALLOW_THP", "0")
        .output()
        .expect("child");
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

#[test]
fn prefault_removes_most_faults() {
    if !arena::SUPPORTED {
        // snmalloc, jemalloc and glibc: refused, not silently useless.
        let refused = arena::start(WORKLOAD, Policy::Keep).expect_err("unsupported");
        assert_eq!(refused, arena::NotStarted::Unsupported(allocator::NAME));
        return;
    }
    let cold = run_child("cold");
    let warm = run_child("prewarm");
    eprintln!(
        "{}: workload of 64 MiB: {cold} minor faults cold, {warm} after pre-warming",
        allocator::NAME
    );
    // 64 MiB is 16,384 pages: cold pays roughly one fault per page.
    assert!(cold >= 4_000, "the cold workload should fault: {cold}");
    assert!(
        warm * 5 <= cold,
        "pre-warming should remove most faults: {warm} vs {cold}"
    );
}

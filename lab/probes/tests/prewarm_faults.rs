//! The pre-warm really pre-faults: the first invocation after a pre-warmed cold
//! start takes a small fraction of the minor page faults it takes without one.
//! Each variant runs in a fresh child process (this test binary, re-run with
//! `TRIAL_CHILD` set), so neither inherits the other's heap.

use lab_probes::trial::ArenaPrewarm;
use std::process::Command;

const ROWS: usize = 100_000;
const ARENA: usize = 128 << 20;

#[tokio::test]
async fn child_variant() {
    let Ok(variant) = std::env::var("TRIAL_CHILD") else {
        return; // Only meaningful when run by `prewarm_removes_most_first_invocation_faults`.
    };
    let prewarm = variant == "prewarm";
    let arena = if prewarm {
        ArenaPrewarm::Shipped(ARENA)
    } else {
        ArenaPrewarm::Off
    };
    let trial = lab_probes::trial::run(ROWS, arena, prewarm, 2)
        .await
        .expect("trial");
    let faults: Vec<String> = trial
        .rounds
        .iter()
        .map(|r| r.minor_faults.to_string())
        .collect();
    println!("FAULTS={}", faults.join(","));
}

fn run_child(variant: &str) -> Vec<u64> {
    let output = Command::new(std::env::current_exe().expect("test binary"))
        .args([
            "--exact",
            "child_variant",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("TRIAL_CHILD", variant)
        // Count 4 KiB faults: with transparent huge pages a 2 MiB region
        // faults once, whatever pre-warming does.
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
        .map(|list| list.split(',').filter_map(|n| n.parse().ok()).collect())
        .unwrap_or_else(|| panic!("no FAULTS line in: {stdout}"))
}

#[test]
fn prewarm_removes_most_first_invocation_faults() {
    if !shared::arena::SUPPORTED {
        return; // Refused with other allocators: see shared/tests/arena_prefault.rs.
    }
    let cold = run_child("cold");
    let warm = run_child("prewarm");
    eprintln!(
        "first invocation over {ROWS} orders: {} minor faults cold, {} after pre-warming; second: {} and {}",
        cold[0], warm[0], cold[1], warm[1]
    );
    assert!(
        cold[0] >= 2_000,
        "the cold first invocation should fault: {cold:?}"
    );
    assert!(
        warm[0] * 5 <= cold[0],
        "pre-warming should remove most first-invocation faults: {warm:?} vs {cold:?}"
    );
}

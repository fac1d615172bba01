//! Threads that start and end while memory crosses them: what a function's
//! process does (tokio's blocking pool growing and shrinking, Rayon pools,
//! the Managed Instances runtime's many invocations as tasks), packed into a
//! few seconds. The shapes of the upstream crash reports are in it too:
//! mimalloc#1287 (an aligned 16 KiB block allocated and freed on a thread
//! that then ends), #1304 (a fresh thread whose first call is `realloc` of a
//! block from another thread), #1288 (a thread-local destructor that frees
//! and allocates after the thread's own work is done).
//!
//! It runs in a child process (this test binary again, with
//! `ALLOCATOR_STRESS_CHILD` set), so a crash is the test's failure with the
//! signal named, not the end of the test run. Every block carries a pattern
//! derived from its number, checked where it is freed: memory handed out
//! twice or overwritten fails the check. `ALLOCATOR_STRESS_SECONDS` sets how
//! long (default 3; the suite's bound).

use std::cell::RefCell;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

const CHILD: &str = "ALLOCATOR_STRESS_CHILD";
const SECONDS: &str = "ALLOCATOR_STRESS_SECONDS";
const DEFAULT_SECONDS: u64 = 3;
/// Tasks per round, each on a thread of the blocking pool.
const TASKS: usize = 32;
/// Blocks each task allocates.
const BLOCKS: usize = 24;

/// A block of `len` bytes filled from its number.
struct Block {
    id: u64,
    bytes: Vec<u8>,
}

impl Block {
    fn new(id: u64) -> Self {
        // 16 B to 64 KiB, over mimalloc's small and medium size classes; one
        // block in 16 of 1 MiB (large).
        let len = if id % 16 == 15 {
            1 << 20
        } else {
            16usize << (id % 13)
        };
        Self {
            id,
            bytes: vec![pattern(id); len],
        }
    }

    /// Every 512th byte and the last: cheap enough for a debug build, and a
    /// block handed out twice is overwritten whole by its second owner.
    fn check(&self) {
        let last = self.bytes.len() - 1;
        for i in (0..self.bytes.len()).step_by(512).chain([last]) {
            assert_eq!(
                self.bytes[i],
                pattern(self.id),
                "block {} of {} bytes: byte {i} overwritten",
                self.id,
                self.bytes.len()
            );
        }
    }
}

fn pattern(id: u64) -> u8 {
    (id % 251) as u8
}

/// 64 bytes, aligned to 64: 256 of them are mimalloc#1287's block.
#[derive(Clone, Copy)]
#[repr(align(64))]
struct Line([u8; 64]);

/// mimalloc#1287's shape: a 16 KiB block aligned to 64 bytes, allocated and
/// freed by a thread.
fn aligned_round_trip(id: u64) {
    let block = vec![Line([pattern(id); 64]); 256];
    assert_eq!(block.as_ptr().align_offset(64), 0, "an aligned block");
    assert!(block.iter().all(|line| line.0[63] == pattern(id)));
}

thread_local! {
    /// mimalloc#1288's shape: freed (and a little allocated) by the thread's
    /// destructors, after its work.
    static ON_EXIT: RefCell<Option<Guard>> = const { RefCell::new(None) };
}

struct Guard(Vec<Block>);

impl Drop for Guard {
    fn drop(&mut self) {
        for block in &self.0 {
            block.check();
        }
        let last = Block::new(self.0.len() as u64);
        last.check();
    }
}

/// The child's whole run: rounds until the time is up; each round's figures
/// add to the totals printed at the end.
pub fn child() {
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    let seconds = std::env::var(SECONDS)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(DEFAULT_SECONDS);
    let deadline = Instant::now() + Duration::from_secs(seconds);
    // A long-lived thread frees what the others allocated.
    let (to_freer, freed) = mpsc::sync_channel::<Vec<Block>>(TASKS);
    let freer = thread::spawn(move || {
        let mut count = 0u64;
        for blocks in freed {
            for block in &blocks {
                block.check();
            }
            count += blocks.len() as u64;
        }
        count
    });
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .max_blocking_threads(TASKS * 2)
        // Idle blocking threads end quickly, so the pool shrinks and grows
        // again every round.
        .thread_keep_alive(Duration::from_millis(5))
        .enable_time()
        .build()
        .expect("a tokio runtime");
    let mut rounds = 0u64;
    let mut next_id = 0u64;
    while Instant::now() < deadline {
        rounds += 1;
        next_id = blocking_pool_round(&runtime, &to_freer, next_id);
        next_id = rayon_round(next_id);
        next_id = fresh_threads_round(next_id);
        // Longer than the keep-alive: the blocking threads end.
        thread::sleep(Duration::from_millis(8));
    }
    drop(runtime);
    drop(to_freer);
    let freed = freer.join().expect("the freeing thread");
    println!("STRESS rounds={rounds} blocks={next_id} freed_elsewhere={freed}");
}

/// Many invocations at once as tasks, each with work on the blocking pool;
/// the blocks go to the long-lived freeing thread.
fn blocking_pool_round(
    runtime: &tokio::runtime::Runtime,
    to_freer: &mpsc::SyncSender<Vec<Block>>,
    first: u64,
) -> u64 {
    runtime.block_on(async {
        let tasks: Vec<_> = (0..TASKS as u64)
            .map(|task| {
                let start = first + task * BLOCKS as u64;
                tokio::spawn(async move {
                    tokio::task::spawn_blocking(move || {
                        aligned_round_trip(start);
                        ON_EXIT.with(|on_exit| {
                            on_exit
                                .borrow_mut()
                                .get_or_insert_with(|| Guard(Vec::new()))
                                .0
                                .push(Block::new(start));
                        });
                        (start..start + BLOCKS as u64)
                            .map(Block::new)
                            .collect::<Vec<_>>()
                    })
                    .await
                    .expect("a blocking task")
                })
            })
            .collect();
        for task in tasks {
            let blocks = task.await.expect("a task");
            to_freer.send(blocks).expect("the freeing thread");
        }
    });
    first + (TASKS * BLOCKS) as u64
}

/// A Rayon pool started and ended: its threads allocate, this one frees.
fn rayon_round(first: u64) -> u64 {
    use rayon::prelude::*;
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(3)
        .build()
        .expect("a Rayon pool");
    let count = (TASKS * 4) as u64;
    let blocks: Vec<Block> = pool.install(|| {
        (first..first + count)
            .into_par_iter()
            .map(Block::new)
            .collect()
    });
    drop(pool);
    for block in &blocks {
        block.check();
    }
    first + count
}

/// Short-lived threads whose first allocator call is a `realloc` of a block
/// from this thread, and which hand blocks back as they end.
fn fresh_threads_round(first: u64) -> u64 {
    let threads: Vec<_> = (0..8u64)
        .map(|n| {
            let id = first + n;
            let mut block = Block::new(id);
            block.bytes.reserve_exact(64);
            thread::spawn(move || {
                // Shrinks in place: `realloc` before any other allocation.
                block.bytes.shrink_to_fit();
                block.check();
                aligned_round_trip(id);
                block
            })
        })
        .collect();
    for thread in threads {
        thread.join().expect("a short-lived thread").check();
    }
    first + 8
}

/// Run [`child`] in a child process and require that it ended well.
pub fn threads_come_and_go_while_memory_crosses_them() {
    let output = super::child_output(&[(CHILD, "1")]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the stress run ended with {} under {}:\n{stdout}{stderr}",
        output.status,
        shared::allocator::name()
    );
    let line = stdout
        .lines()
        .find_map(|line| line.find("STRESS ").map(|at| &line[at..]))
        .unwrap_or_else(|| panic!("no STRESS line in: {stdout}"));
    eprintln!("{}: {line}", shared::allocator::name());
    let rounds: u64 = line
        .split("rounds=")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .expect("a round count");
    assert!(rounds > 0, "{line}");
}

//! With `WORKER_COUNT=3`, a batch really runs on three pool threads, none of
//! them a tokio thread. (Its own test binary: the Rayon pool is per process.)

use password_hasher::hashing::{map_batch, on_pool};

#[tokio::test]
async fn worker_count_override_sets_the_threads_that_hash() {
    let init = shared::init_with(&[("WORKER_COUNT", "3")]).expect("init");
    assert_eq!(init.vcpus.workers, 3);
    let names = on_pool(|| {
        let items: Vec<u32> = (0..24).collect();
        // Each item does a real hash (milliseconds) and reports its thread:
        // no shared state, no lock.
        map_batch(&items, |i| {
            let _ = bcrypt::hash_with_salt(i.to_le_bytes(), 6, [7u8; 16]);
            std::thread::current().name().unwrap_or_default().to_owned()
        })
    })
    .await
    .expect("pool");
    let mut distinct = names.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct, ["worker-0", "worker-1", "worker-2"], "{names:?}");
}

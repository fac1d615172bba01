//! Shared by the pool-sizing tests (each its own binary: one Rayon pool per process).

use password_hasher::hashing::{map_batch, on_pool};

/// Hash `items` passwords through the function's batch path and return the name
/// of the thread each ran on. Each item does a real hash (milliseconds) and
/// reports its own thread: no shared state, no lock.
pub async fn thread_names(items: u32) -> Vec<String> {
    on_pool(move || {
        let items: Vec<u32> = (0..items).collect();
        map_batch(&items, |i| {
            let _ = bcrypt::hash_with_salt(i.to_le_bytes(), 6, [7u8; 16]);
            std::thread::current().name().unwrap_or_default().to_owned()
        })
    })
    .await
    .expect("pool")
}

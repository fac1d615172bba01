//! Shared by the pool-sizing tests (each its own binary: one Rayon pool per process).

use password_hasher::eksblowfish::{Input, hash_many};
use password_hasher::hashing::{map_batch, on_pool};

/// Hash `items` passwords through the function's batch path and return the name
/// of the thread each ran on. Each group does real hashes (milliseconds) and
/// reports its own thread: no shared state, no lock.
pub async fn thread_names(items: u32) -> Vec<String> {
    on_pool(move || {
        let items: Vec<[u8; 4]> = (0..items).map(u32::to_le_bytes).collect();
        map_batch(&items, |group| {
            let inputs: Vec<Input<'_>> = group
                .iter()
                .map(|password| Input {
                    password,
                    salt: [7; 16],
                })
                .collect();
            let _ = hash_many(&inputs, 6);
            let name = std::thread::current().name().unwrap_or_default().to_owned();
            vec![name; group.len()]
        })
    })
    .await
    .expect("pool")
}

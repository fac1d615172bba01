//! With a simulated 1,769 MB function (one vCPU's worth), a batch runs on one
//! pool thread, even on a machine with more cores. (Its own test binary.)

use password_hasher::hashing::{map_batch, on_pool};

#[tokio::test]
async fn memory_size_sets_the_threads_that_hash() {
    let init = shared::init_with(&[("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "1769")]).expect("init");
    assert_eq!(init.vcpus.workers, 1);
    assert_eq!(init.vcpus.decided_by, shared::vcpus::Source::LambdaMemory);
    let names = on_pool(|| {
        let items: Vec<u32> = (0..8).collect();
        map_batch(&items, |i| {
            let _ = bcrypt::hash_with_salt(i.to_le_bytes(), 6, [7u8; 16]);
            std::thread::current().name().unwrap_or_default().to_owned()
        })
    })
    .await
    .expect("pool");
    assert!(names.iter().all(|n| n == "worker-0"), "{names:?}");
}

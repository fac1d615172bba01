//! With `WORKER_COUNT=3`, a batch really runs on three pool threads, none of
//! them a tokio thread.

mod common;

use password_hasher::config::Config;

#[tokio::test]
async fn worker_count_override_sets_the_threads_that_hash() {
    let (init, _config) = shared::start(&[("WORKER_COUNT", "3")], Config::from_env).expect("start");
    assert_eq!(init.vcpus.workers, 3);
    let names = common::thread_names(24).await;
    let mut distinct = names.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct, ["worker-0", "worker-1", "worker-2"], "{names:?}");
}

//! With a simulated 1,769 MB function (one vCPU's worth), a batch runs on one
//! pool thread, even on a machine with more cores.

mod common;

use password_hasher::config::Config;

#[tokio::test]
async fn memory_size_sets_the_threads_that_hash() {
    let (init, _config) = shared::start(
        &[("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "1769")],
        Config::from_env,
    )
    .expect("start");
    assert_eq!(init.vcpus.workers, 1);
    assert_eq!(init.vcpus.decided_by, shared::vcpus::Source::LambdaMemory);
    let names = common::thread_names(8).await;
    assert!(names.iter().all(|n| n == "worker-0"), "{names:?}");
}

//! Cold-start work happens once: a second attempt is an error value, never a panic.
//! (Its own test binary: it installs process-wide state.)

use shared::config::{ConfigError, Env};
use shared::{InitError, allocator::Policy, logging, pool, vcpus::Source};

/// A function without settings of its own.
fn no_settings(_: &dyn Env) -> Result<(), ConfigError> {
    Ok(())
}

#[test]
fn init_once_then_errors_without_panicking() {
    let (init, ()) = shared::start(
        &[
            ("WORKER_COUNT", "3"),
            ("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "1769"),
            ("MEMORY_RETURN", "keep"),
        ],
        no_settings,
    )
    .expect("first init");
    assert_eq!(
        (init.vcpus.workers, init.vcpus.decided_by),
        (3, Source::Override)
    );
    assert_eq!(init.policy, Policy::Keep);
    // The Rayon global pool really has the detected size and named threads.
    assert_eq!(rayon::current_num_threads(), 3);
    let mut names = rayon::broadcast(|_| std::thread::current().name().map(str::to_owned));
    names.sort();
    let expected: Vec<_> = (0..3).map(|i| Some(format!("worker-{i}"))).collect();
    assert_eq!(names, expected);

    // A second init fails on logging, the first global it installs.
    assert!(matches!(
        shared::start(&[], no_settings),
        Err(InitError::Logging(_))
    ));
    // Each global on its own: an error value, not a panic.
    let settings = logging::Settings::from_env(&[]).expect("settings");
    assert!(logging::init(&settings, None).is_err());
    let err = pool::build_global(2).expect_err("second pool");
    assert!(err.to_string().contains("2 threads"), "{err}");
}

#[test]
fn bad_setting_fails_before_changing_anything() {
    let err = shared::start(&[("WORKER_COUNT", "0")], no_settings).expect_err("invalid");
    assert_eq!(
        err.to_string(),
        "invalid WORKER_COUNT=\"0\": must be a whole number from 1 to 256"
    );
}

//! [`shared::start`] validates the function's own settings with the shared ones,
//! before anything global is installed; [`shared::start_or_exit`] reports a bad
//! setting on one line and exits with status 1.
//! (Its own test binary: it installs process-wide state.)

use shared::InitError;
use shared::config::{ConfigError, Env, number_or, table_name};
use std::cell::Cell;
use std::process::Command;

/// A function's own settings, read the way the functions' `Config::from_env` do.
#[derive(Debug, PartialEq)]
struct Config {
    table_name: String,
    batch: u64,
}

impl Config {
    fn from_env(env: &dyn Env) -> Result<Self, ConfigError> {
        Ok(Self {
            table_name: table_name(env, "TABLE_NAME", "where orders go")?,
            batch: number_or(env, "BATCH", 10, 1..=100)?,
        })
    }
}

/// No dispatcher has been installed: the global default is the no-op one.
fn logging_installed() -> bool {
    !tracing::dispatcher::get_default(|d| d.is::<tracing::subscriber::NoSubscriber>())
}

#[test]
fn function_settings_are_checked_before_anything_is_installed() {
    // A bad function setting: its error, and nothing installed.
    let err = shared::start(
        &[("WORKER_COUNT", "3"), ("TABLE_NAME", "x")],
        Config::from_env,
    )
    .expect_err("bad TABLE_NAME");
    assert!(matches!(err, InitError::Function(_)), "{err:?}");
    assert_eq!(
        err.to_string(),
        "invalid TABLE_NAME=\"x\": must be 3 to 255 characters of A-Z a-z 0-9 _ - ."
    );
    assert!(!logging_installed());

    // A message of several lines still makes one line.
    let err = shared::start(&[], |_| Err::<(), _>("first\nsecond")).expect_err("error");
    assert_eq!(err.to_string(), "first second");
    assert!(!logging_installed());

    // A bad shared setting comes first; the function's reader is not called.
    let called = Cell::new(false);
    let err = shared::start(&[("WORKER_COUNT", "0"), ("TABLE_NAME", "x")], |env| {
        called.set(true);
        Config::from_env(env)
    })
    .expect_err("bad WORKER_COUNT");
    assert!(matches!(err, InitError::Config(ref e) if e.setting == "WORKER_COUNT"));
    assert!(!called.get());
    assert!(!logging_installed());

    // So a later start with good settings still installs everything: logging
    // and the pool were not taken by the failed attempts.
    let (init, config) = shared::start(
        &[
            ("WORKER_COUNT", "3"),
            ("TABLE_NAME", "orders"),
            ("BATCH", "7"),
        ],
        Config::from_env,
    )
    .expect("good settings");
    assert_eq!(
        config,
        Config {
            table_name: "orders".to_owned(),
            batch: 7
        }
    );
    assert_eq!(init.vcpus.workers, 3);
    assert_eq!(rayon::current_num_threads(), 3);
    assert!(logging_installed());
}

/// Set in the environment of the child process that
/// [`a_bad_setting_prints_one_line_and_exits_1`] starts.
const CHILD: &str = "SHARED_START_OR_EXIT_CHILD";

/// The child's part: a cold start with the process environment. Does nothing
/// unless run as that child.
#[test]
fn start_or_exit_child() {
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    let _ = shared::start_or_exit(Config::from_env);
    println!("start_or_exit returned");
}

#[test]
fn a_bad_setting_prints_one_line_and_exits_1() {
    let mut child = Command::new(std::env::current_exe().expect("test binary"));
    child
        .args([
            "--exact",
            "start_or_exit_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, "1")
        .env("TABLE_NAME", "x");
    for setting in shared::SETTINGS.iter().chain(&["BATCH"]) {
        child.env_remove(setting);
    }
    let output = child.output().expect("run the child");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "stderr: {stderr}");
    assert_eq!(
        stderr,
        "cold start failed: invalid TABLE_NAME=\"x\": must be 3 to 255 characters of A-Z a-z 0-9 _ - .\n"
    );
    assert!(!String::from_utf8_lossy(&output.stdout).contains("returned"));
}

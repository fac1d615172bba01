//! The end-to-end suite's library: the generic harness (`testkit`,
//! re-exported) and the local stack's test function (`src/bin`), on which
//! the stack's own behaviours are tested, so that they hold whatever
//! functions a project keeps. Each sample's own flows are in its folder
//! (`functions/*/tests/`).

pub use testkit::*;

/// The local stack's test function (`src/bin/fixture_function.rs`) as a
/// template would declare it: `memory_mb`, a 30 s timeout, JSON logs.
pub fn fixture(memory_mb: u32) -> local_stack::template::Function {
    local_stack::template::Function {
        logical_id: "FixtureFunction".into(),
        binary: "fixture_function".into(),
        memory_mb,
        timeout_s: 30,
        env: vec![("AWS_LAMBDA_LOG_FORMAT".into(), "JSON".into())],
        reserved_concurrency: None,
    }
}

/// The test function of [`fixture`] started under the emulator, with `env`.
pub fn start_fixture(memory_mb: u32, env: &[(&str, &str)]) -> local_stack::emulator::Emulator {
    let rie = local_stack::tools::emulator().unwrap_or_else(|e| panic!("{e}"));
    local_stack::emulator::Emulator::start(
        &rie,
        &binary("fixture_function"),
        &fixture(memory_mb),
        env,
        &scratch("fixture-function").with_extension("log"),
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

/// A pool of `size` environments of the test function of [`fixture`] (256
/// MB), with `env`.
pub fn fixture_pool(
    env: &[(&str, &str)],
    size: local_stack::pool::Size,
) -> local_stack::pool::Pool {
    let rie = local_stack::tools::emulator().unwrap_or_else(|e| panic!("{e}"));
    let limits = local_stack::cgroup::Limits::from_env().unwrap_or_else(|e| panic!("{e}"));
    local_stack::pool::Pool::of_emulators(
        &rie,
        &binary("fixture_function"),
        &fixture(256),
        env,
        &scratch("fixture-pool").with_extension("log"),
        size,
        limits,
    )
}

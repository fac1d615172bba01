//! Password hasher: bcrypt hash and verify batches on the Rayon pool.

use password_hasher::{calibration::Estimates, config::Config, handler::Handler};

// This binary's allocator: `Mimalloc`, `Jemalloc`, `Snmalloc` or `System`
// (with the same feature of `shared` in Cargo.toml; `System` needs none).
shared::global_allocator!(Mimalloc);

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    let (init, config) = shared::start_or_exit(Config::from_env);
    // The yardstick for refusing work that cannot finish before an
    // invocation's deadline: a cautious prior, calibrated on the pool only
    // when the prior would refuse a request (calibration.rs).
    // One handler per environment, shared by every invocation in flight
    // (several at once on Lambda Managed Instances): `shared::share`.
    let handler = Handler::new(init.clone(), config, Estimates::on_demand());
    shared::run(
        &init,
        shared::share(handler, |h, event| async move { h.handle(event).await }),
    )
    .await
}

//! Password hasher: bcrypt hash and verify batches on the Rayon pool.

use lambda_runtime::service_fn;
use password_hasher::{calibration::Estimates, config::Limits, handler::Handler};

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    let (init, limits) = shared::start_or_exit(Limits::from_env);
    // Time a few small hashes on the pool, the yardstick for refusing work
    // that cannot finish before an invocation's deadline: in the background,
    // so the cold start does not wait for it (a cautious prior until then).
    let handler = Handler::new(init.clone(), limits, Estimates::calibrate_in_background());
    shared::run(&init, service_fn(|event| handler.handle(event))).await
}

//! Password hasher: bcrypt hash and verify batches on the Rayon pool.

use lambda_runtime::service_fn;
use password_hasher::{config::Limits, handler::Handler, hashing::Estimator};

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    let (init, limits) = shared::start_or_exit(Limits::from_env);
    // Time a few small hashes on the pool: the yardstick for refusing work
    // that cannot finish before an invocation's deadline.
    let estimator = shared::or_exit(Estimator::calibrate().await);
    let handler = Handler::new(init.clone(), limits, estimator);
    shared::run(&init, service_fn(|event| handler.handle(event))).await
}

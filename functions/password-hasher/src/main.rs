//! Password hasher: bcrypt hash and verify batches on the Rayon pool.

use lambda_runtime::{Error, service_fn};
use password_hasher::{config::Limits, handler::Hasher, hashing};
use shared::config::ProcessEnv;

#[tokio::main]
async fn main() -> Result<(), Error> {
    let init = shared::init_or_exit();
    let limits = shared::or_exit(Limits::from_env(&ProcessEnv));
    // Time one small hash on the pool: the yardstick for refusing work that
    // cannot finish before an invocation's deadline.
    let estimator = shared::or_exit(hashing::on_pool(hashing::Estimator::calibrate).await);
    let hasher = Hasher::new(init.clone(), limits, estimator);
    shared::run(&init, service_fn(|event| hasher.handle(event))).await
}

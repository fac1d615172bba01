//! Password hasher: bcrypt hash and verify batches on the Rayon pool.

mod handler;

use lambda_runtime::{Error, service_fn};

#[tokio::main]
async fn main() -> Result<(), Error> {
    let init = shared::init_or_exit();
    let init = &init;
    shared::run(init, service_fn(move |event| handler::handle(init, event))).await
}

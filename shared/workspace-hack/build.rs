//! Empty: it only makes the `[build-dependencies]` of `Cargo.toml` part of
//! every function's build.
fn main() {}

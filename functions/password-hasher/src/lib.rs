//! Password hasher: bcrypt hash and verify batches on the Rayon pool sized to
//! the function's vCPUs. `main.rs` wires these modules.

pub mod backlog;
pub mod calibration;
pub mod config;
pub mod eksblowfish;
pub mod error;
pub mod handler;
pub mod hash_text;
pub mod hashing;
pub mod request;
pub mod secret;

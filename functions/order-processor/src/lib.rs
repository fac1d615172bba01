//! Order processor: SQS batches of orders in, DynamoDB items and partial batch
//! failures out. `main.rs` wires these modules; everything is testable here.

pub mod cache;
pub mod config;
pub mod dead_letter;
pub mod dynamodb;
pub mod error;
pub mod handler;
pub mod order;
pub mod retry;
pub mod sqs;
pub mod store;

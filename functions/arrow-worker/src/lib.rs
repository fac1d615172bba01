//! Arrow worker: columnar analytics over the orders table.
//!
//! A request names a grouping (customer, day, currency) and an optional time
//! window; the worker scans the table (one segment per worker, or the one
//! segment a fan-out gives it), builds Arrow batches, aggregates them with Arrow
//! kernels on the Rayon pool, and answers per group the order count, the sum,
//! min, max and mean of the order totals per currency, and the same of the
//! units ordered. Partial answers of a fan-out are combined by `merge`.
//!
//! Layers, each importing only those listed before it: `query` (the
//! vocabulary) · `answer` · `partial` · `request` · `columns` · `store` ·
//! `dynamodb` · `s3` · `step_functions` · `aws` · `scan` · `aggregate` · `merge` · `warm_up` ·
//! `config` · `error` · `report` · `handler`.

pub mod aggregate;
pub mod answer;
pub mod aws;
pub mod budget;
pub mod columns;
pub mod config;
pub mod dynamodb;
pub mod error;
pub mod handler;
pub mod merge;
pub mod partial;
pub mod query;
pub mod report;
pub mod request;
pub mod s3;
pub mod scan;
pub mod step_functions;
pub mod store;
pub mod warm_up;

//! The Docker-free local AWS the end-to-end suite, `cargo xtask run` and the
//! lab run the application on: `template.yaml` read as AWS would read it, the
//! functions under the Lambda runtime interface emulator (on demand, or on
//! Lambda Managed Instances), DynamoDB Local, ElasticMQ, moto (Step Functions
//! and S3), the SQS event source mapping, the pinned tools that provide them,
//! and the process groups and loopback ports they run on.

pub use pinned_tools as tools;
pub use pinned_tools::{cargo, target_dir, without_cargo_run_variables, workspace_root};

pub mod async_invoke;
pub mod cgroup;
pub mod checkov;
pub mod dynamodb_local;
pub mod elasticmq;
pub mod emulator;
pub mod event_source;
pub mod events;
pub mod expectations;
#[cfg(test)]
mod fixtures;
pub mod function_url;
pub mod jvm;
pub mod lambda_api;
pub mod lambda_rules;
pub mod least_privilege;
pub mod local_aws;
pub mod managed_instances;
pub mod moto;
pub mod pool;
pub mod process;
pub mod runner;
pub mod runtime_api_proxy;
pub mod sam;
pub mod sam_local;
pub mod schedule;
pub mod step_functions;
mod stored;
pub mod task_root;
pub mod template;
pub mod tls_front;
pub mod xray_daemon;
pub mod zipkin;

//! What every local stand-in for AWS shares: the region, the credentials, and
//! SDK settings that point a client at a loopback endpoint.

use aws_config::retry::RetryConfig;
use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_sdk_dynamodb::config::{Credentials, SharedCredentialsProvider};

/// The region of the local stack (local servers accept any).
pub const REGION: &str = "us-east-1";
/// The account of the local stack's ARNs (moto's default account).
pub const ACCOUNT_ID: &str = "123456789012";
/// The stack name `AWS::StackName` stands for locally.
pub const STACK_NAME: &str = "local";

/// The local value of a CloudFormation pseudo parameter (`AWS::Region`, ...).
pub fn pseudo_parameter(name: &str) -> Option<&'static str> {
    match name {
        "AWS::Region" => Some(REGION),
        "AWS::AccountId" => Some(ACCOUNT_ID),
        "AWS::Partition" => Some("aws"),
        "AWS::StackName" => Some(STACK_NAME),
        "AWS::URLSuffix" => Some("amazonaws.com"),
        _ => None,
    }
}
/// Access key and secret for local servers (alphanumeric, as DynamoDB Local requires).
pub const ACCESS_KEY: &str = "local";
/// An endpoint where nothing listens (the discard port of loopback): a local
/// function's AWS calls that no local server takes go here and fail at once.
pub const NO_SERVER: &str = "http://127.0.0.1:9";
/// The X-Ray daemon address of a function started without a local daemon
/// (the same discard port): its spans are sent nowhere, as a function's
/// would be sent and dropped.
pub const NO_DAEMON: &str = "127.0.0.1:9";

/// The environment that points a function's SDK at local servers: each
/// `(AWS_ENDPOINT_URL_<SERVICE>, url)` of `endpoints`, then the local credentials.
pub fn function_env<'a>(endpoints: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    let mut env = endpoints.to_vec();
    env.extend([
        ("AWS_ACCESS_KEY_ID", ACCESS_KEY),
        ("AWS_SECRET_ACCESS_KEY", ACCESS_KEY),
    ]);
    env
}

/// SDK settings for a local server at `endpoint`: static local credentials, no
/// SDK retries (a test sees every failure). Any service's client takes them
/// (`Client::new(&sdk_config(endpoint))`).
pub fn sdk_config(endpoint: &str) -> SdkConfig {
    SdkConfig::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new(REGION))
        .endpoint_url(endpoint)
        .credentials_provider(SharedCredentialsProvider::new(Credentials::new(
            ACCESS_KEY, ACCESS_KEY, None, None, "local",
        )))
        .retry_config(RetryConfig::disabled())
        .build()
}

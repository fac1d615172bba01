//! The template's functions on the local stack, announced: a pool of
//! emulators for each (its AWS endpoints and queue URLs the local servers'),
//! and a Function URL for each that declares one.

use super::Options;
use super::stack::Servers;
use crate::cgroup::{self, Limits};
use crate::elasticmq;
use crate::function_url::FunctionUrl;
use crate::local_aws::function_env;
use crate::managed_instances::ManagedInstances;
use crate::pool::{Pool, Size};
use crate::template::{Function, Template};
use crate::tls_front::CA_FILE_VARIABLE;
use std::path::Path;
use std::sync::Arc;

/// A pool of emulators for each function of the template, its AWS endpoints
/// and queue URLs those of `servers`, announced: (logical id, binary, pool).
pub(super) fn start_functions(
    template: &Template,
    options: Options,
    build_dir: &Path,
    logs: &Path,
    rie: &Path,
    servers: &Servers,
) -> Result<Vec<(String, String, Arc<Pool>)>, String> {
    let (dynamodb_url, sqs_url, s3_url) = (
        servers.fronts[0].endpoint(),
        servers.fronts[1].endpoint(),
        servers.fronts[2].endpoint(),
    );
    let ca_path = servers.ca_file.to_string_lossy().into_owned();
    let daemon = servers.daemon.address().to_string();
    let env = function_env(&[
        ("AWS_XRAY_DAEMON_ADDRESS", daemon.as_str()),
        ("AWS_ENDPOINT_URL_DYNAMODB", dynamodb_url.as_str()),
        ("AWS_ENDPOINT_URL_SQS", sqs_url.as_str()),
        ("AWS_ENDPOINT_URL_S3", s3_url.as_str()),
        // moto serves Step Functions on the same port as S3.
        ("AWS_ENDPOINT_URL_SFN", s3_url.as_str()),
        (CA_FILE_VARIABLE, ca_path.as_str()),
    ]);
    let specs: Vec<_> = servers.queues.iter().map(|q| q.spec.clone()).collect();
    let limited = announce_limits(options.limits).is_ok();
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let mut functions = Vec::new();
    for (mut function, managed) in template.functions_with_capacity()? {
        function.env = elasticmq::with_queue_urls(&function.env, &specs, &sqs_url);
        let bootstrap = build_dir.join(&function.logical_id).join("bootstrap");
        let log = logs.join(format!("{}.log", function.binary));
        let pool = match managed {
            None => Pool::of_emulators(
                rie,
                &bootstrap,
                &function,
                &env,
                &log,
                Size::of(&function, options.concurrency),
                options.limits,
            ),
            Some(managed) => {
                let pool = Pool::of_managed_instances(
                    rie,
                    &bootstrap,
                    &function,
                    managed,
                    &env,
                    &log,
                    options.limits,
                );
                // Started now, as Lambda starts them when it publishes the
                // version: no cold start on an invocation's path.
                pool.provision()
                    .map_err(|e| format!("{}: {e}", function.logical_id))?;
                pool
            }
        };
        println!(
            "    {}",
            describe_function(&function, managed, pool.size(), limited, cores)
        );
        functions.push((function.logical_id, function.binary, Arc::new(pool)));
    }
    Ok(functions)
}

/// A Function URL for each function of `template` that has one (`FunctionUrlConfig`),
/// served by its pool, announced: (binary, URL).
pub(super) fn start_function_urls(
    template: &Template,
    functions: &[(String, String, Arc<Pool>)],
) -> Result<Vec<(String, FunctionUrl)>, String> {
    let mut urls = Vec::new();
    for function in template.functions()? {
        let Some(config) = template.function_url(&function)? else {
            continue;
        };
        let Some((_, _, pool)) = functions.iter().find(|(id, ..)| *id == function.logical_id)
        else {
            continue;
        };
        let url = FunctionUrl::start(&function, &config, Arc::clone(pool))?;
        let auth = match config.auth_type {
            crate::template::AuthType::AwsIam => format!(
                "AWS_IAM: sign with SigV4, service lambda, region {}, access key {} and secret {}",
                crate::local_aws::REGION,
                crate::function_url::ACCESS_KEY_ID,
                crate::function_url::SECRET_ACCESS_KEY
            ),
            crate::template::AuthType::None => "NONE: anyone on this machine".to_owned(),
        };
        println!(
            "  Function URL       {}  ({}, {auth})",
            url.url(),
            function.logical_id
        );
        urls.push((function.binary, url));
    }
    Ok(urls)
}

/// Whether functions run under Lambda's CPU share and memory limit (`Err`:
/// why not), announced.
fn announce_limits(limits: Limits) -> Result<(), String> {
    let limits = match limits {
        Limits::Off => Err("turned off (--no-limits)".to_owned()),
        Limits::Enforced => cgroup::enforced_with(Limits::Enforced),
    };
    println!(
        "  Functions under the runtime interface emulator, on demand one process per invocation in flight, on Managed Instances one process serving several{}:",
        match &limits {
            Ok(()) => ", each in a cgroup with Lambda's CPU share and memory limit",
            Err(_) => "",
        }
    );
    if let Err(why) = &limits {
        println!("  CPU and memory limits are not enforced: {why}");
    }
    limits
}

/// One line about a function of `size` environments, on Lambda Managed
/// Instances (`managed`) or on demand: its memory, timeout, mode, limits (if
/// `limited`, on a machine of `cores` cores) and concurrency.
fn describe_function(
    function: &Function,
    managed: Option<ManagedInstances>,
    size: Size,
    limited: bool,
    cores: usize,
) -> String {
    let mode = match managed {
        None => "on-demand".to_owned(),
        Some(managed) => format!(
            "managed instances: {managed}, {} vCPUs",
            managed.vcpus(function.memory_mb)
        ),
    };
    let enforced = if limited {
        let quota = cgroup::function_quota(function.memory_mb, managed, cores);
        format!(
            "CPU {:.3} vCPU{}, memory limit {} MB",
            quota.quota_us as f64 / cgroup::PERIOD_US as f64,
            if quota.capped {
                format!(" (capped at this machine's {cores} cores)")
            } else {
                String::new()
            },
            function.memory_mb
        )
    } else {
        "no CPU or memory limit".to_owned()
    };
    let concurrency = match managed {
        Some(managed) => format!(
            "one environment, {} invocations at once, then invocations wait",
            managed.max_concurrency
        ),
        None => format!(
            "up to {} environment(s){}",
            size.environments,
            match size.overflow {
                crate::pool::Overflow::Wait => ", then invocations wait",
                crate::pool::Overflow::Throttle => ", then throttled (reserved concurrency)",
            }
        ),
    };
    format!(
        "{} ({} MB, {} s), {mode}: {enforced}; {concurrency}",
        function.logical_id, function.memory_mb, function.timeout_s,
    )
}

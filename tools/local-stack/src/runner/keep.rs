//! `--keep`: everything stays up, every SQS event source's queue polled,
//! until Ctrl-C; what to try is printed from the template and the samples.

use super::plan::Plan;
use super::relative;
use super::stack::Stack;
use crate::event_source::EventSource;
use crate::local_aws::REGION;
use std::time::Duration;

/// Keep everything up, the queues of the SQS event sources polled, until
/// Ctrl-C (which stops the process, see [`crate::process::stop_all_on_interrupt`]).
pub(super) fn keep_running(
    stack: &Stack,
    plan: &Plan,
    runtime: &tokio::runtime::Runtime,
) -> Result<(), String> {
    if plan.queues.is_empty() {
        println!("\nEverything keeps running. Try:");
    } else {
        println!(
            "\nEverything keeps running; the queues of the SQS event sources are polled. Try:"
        );
    }
    print_invocations(stack, plan);
    print_queues_and_tables(stack, plan);
    print_state_machines(stack, plan);
    println!("(any access key works locally) Press Ctrl-C to stop everything.");
    let sqs = stack.elasticmq.client();
    let mut mappings = Vec::new();
    for queued in &plan.queues {
        let queue = stack.queue(&queued.source.queue)?;
        let pool = stack.function(&queued.source.function)?;
        mappings.push((queue, pool, EventSource::new(&sqs, queue, &queued.source)));
    }
    if mappings.is_empty() {
        loop {
            std::thread::sleep(Duration::from_secs(3600));
        }
    }
    // One long poll at a time: five seconds shared by the queues.
    let wait = Duration::from_secs(5 / mappings.len().min(5) as u64);
    loop {
        for (queue, pool, mapping) in &mappings {
            let delivery =
                runtime.block_on(mapping.poll_once(wait, &|event| pool.invoke(event)))?;
            if delivery.received > 0 {
                println!(
                    "  {}: {} received, {} deleted, {} left for retry",
                    queue.spec.name(),
                    delivery.received,
                    delivery.deleted,
                    delivery.returned
                );
            }
        }
    }
}

/// A `curl` per function with samples of its own (its first, through the
/// Invoke API), and one per Function URL (its URL sample's body).
fn print_invocations(stack: &Stack, plan: &Plan) {
    for (function, samples) in &plan.invoked {
        if let Some(sample) = samples.first() {
            println!(
                "  curl -s -d @{} {}",
                relative(&sample.path),
                stack.lambda.invoke_url(&function.binary)
            );
        }
        let body = samples
            .iter()
            .find_map(|sample| sample.event["body"].as_str().map(str::to_owned));
        if let Some((url, body)) = stack.function_url(&function.binary).zip(body) {
            println!("  {}", url.curl_command(&body));
        }
    }
}

/// A message for each queue an SQS event source reads, a look into every
/// other queue (dead-letter queues) and a scan of every table.
fn print_queues_and_tables(stack: &Stack, plan: &Plan) {
    let sqs = stack.elasticmq.endpoint();
    for queue in &stack.queues {
        let fed = plan
            .queues
            .iter()
            .any(|q| q.source.queue == queue.spec.logical_id);
        if fed {
            println!(
                "  aws --endpoint-url {sqs} sqs send-message --queue-url {} --message-body file://message.json",
                queue.url
            );
        } else {
            println!(
                "  aws --endpoint-url {sqs} sqs receive-message --queue-url {} --attribute-names All --message-attribute-names All",
                queue.url
            );
        }
    }
    let dynamodb = stack.dynamodb.endpoint();
    for table in &stack.tables {
        println!("  aws --endpoint-url {dynamodb} dynamodb scan --table-name {table}");
    }
}

/// An execution of each state machine (its sample input if one names it,
/// else `{}`), through the AWS CLI and through curl, and every bucket.
fn print_state_machines(stack: &Stack, plan: &Plan) {
    let moto = stack.moto.endpoint();
    for machine in &stack.state_machines {
        let sample = plan
            .executions
            .iter()
            .map(|(_, sample)| sample)
            .find(|s| s.state_machine() == Some(machine.logical_id.as_str()));
        let (cli_input, input) = match sample {
            Some(sample) => (
                format!("file://{}", relative(&sample.path)),
                sample.event.to_string(),
            ),
            None => ("'{}'".to_owned(), "{}".to_owned()),
        };
        println!(
            "  aws --endpoint-url {moto} stepfunctions start-execution --state-machine-arn {} --input {cli_input}",
            machine.arn
        );
        let request = serde_json::json!({"stateMachineArn": machine.arn, "input": input});
        println!(
            "  curl -s --aws-sigv4 aws:amz:{REGION}:states --user local:local -H 'X-Amz-Target: AWSStepFunctions.StartExecution' -H 'Content-Type: application/x-amz-json-1.0' -d '{request}' {moto}",
        );
    }
    if !stack.state_machines.is_empty() {
        println!(
            "  aws --endpoint-url {moto} stepfunctions describe-execution --execution-arn ARN  (the executionArn started above)"
        );
    }
    for bucket in &stack.buckets {
        println!("  aws --endpoint-url {moto} s3 ls s3://{bucket} --recursive");
    }
}

//! ElasticMQ, a real SQS-compatible server, on a free 127.0.0.1 port, its
//! queues created from `template.yaml` (redrive policies included), stopped on
//! drop; and a function's queue references pointed at those queues
//! ([`with_queue_urls`]).

use crate::jvm::{self, Compiler};
use crate::local_aws::{NO_SERVER, REGION};
use crate::process::{Guard, free_port, wait_for_port};
use crate::template::{Function, Queue, Template};
use crate::tools;
use aws_sdk_sqs::Client;
use aws_sdk_sqs::types::{
    Message, MessageSystemAttributeName, QueueAttributeName, SendMessageBatchRequestEntry,
};
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

/// The account id ElasticMQ puts in queue ARNs and URLs.
pub const ACCOUNT_ID: &str = "000000000000";

/// A running ElasticMQ.
#[derive(Debug)]
pub struct ElasticMq {
    guard: Guard,
    port: u16,
}

impl ElasticMq {
    /// Start ElasticMQ on a free port; its output goes to `log`, its
    /// configuration next to it.
    pub fn start(log: &Path, compiler: Compiler) -> Result<Self, String> {
        tools::require(&tools::elasticmq_lib(), "ElasticMQ")?;
        let port = free_port().map_err(|e| e.to_string())?;
        // Bound to loopback only; queue URLs name the same address; no
        // statistics server (it would open a second port).
        let config = format!(
            r#"include classpath("application.conf")
node-address {{ protocol = "http", host = "127.0.0.1", port = {port}, context-path = "" }}
rest-sqs {{ enabled = true, bind-port = {port}, bind-hostname = "127.0.0.1", sqs-limits = strict }}
rest-stats {{ enabled = false }}
aws {{ region = "{REGION}", accountId = "{ACCOUNT_ID}" }}
"#
        );
        let config_path = log.with_extension("conf");
        std::fs::write(&config_path, config)
            .map_err(|e| format!("{}: {e}", config_path.display()))?;
        let out = std::fs::File::create(log).map_err(|e| format!("{}: {e}", log.display()))?;
        let err = out.try_clone().map_err(|e| e.to_string())?;
        let mut command = jvm::command("256m", compiler);
        command
            .arg(format!("-Dconfig.file={}", config_path.display()))
            .arg("-cp")
            .arg(format!("{}/*", tools::elasticmq_lib().display()))
            .arg("org.elasticmq.server.Main")
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err);
        let guard = Guard::spawn("ElasticMQ", &mut command)?;
        wait_for_port(port, Duration::from_secs(60))
            .map_err(|e| format!("ElasticMQ: {e}; see {}", log.display()))?;
        Ok(Self { guard, port })
    }

    /// `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The server's port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.guard.pid()
    }

    /// A client for this server: static local credentials, no SDK retries.
    pub fn client(&self) -> Client {
        client(&self.endpoint())
    }
}

/// An SQS client for a local endpoint.
pub fn client(endpoint: &str) -> Client {
    Client::new(&crate::local_aws::sdk_config(endpoint))
}

/// The URL of `queue` on the ElasticMQ at `endpoint` (`http://127.0.0.1:PORT`):
/// ElasticMQ names a queue `ENDPOINT/ACCOUNT_ID/NAME` ([`create_queues`]
/// checks that it does).
pub fn queue_url(endpoint: &str, queue: &Queue) -> String {
    format!("{endpoint}/{ACCOUNT_ID}/{}", queue.name())
}

/// A function's environment `env` with its queue references resolved. On
/// AWS, `!Ref` of a queue is the queue's URL; locally the template reader
/// resolves it to the queue's logical id. Each variable whose value is the
/// logical id of one of `queues` gets that queue's URL on the ElasticMQ at
/// `endpoint` instead; the others are kept as they are.
pub fn with_queue_urls(
    env: &[(String, String)],
    queues: &[Queue],
    endpoint: &str,
) -> Vec<(String, String)> {
    env.iter()
        .map(|(key, value)| {
            let value = queues
                .iter()
                .find(|q| q.logical_id == *value)
                .map_or_else(|| value.clone(), |q| queue_url(endpoint, q));
            (key.clone(), value)
        })
        .collect()
}

/// The template's functions with no ElasticMQ to send to: a queue each names
/// is a URL where nothing listens ([`NO_SERVER`]), so a function that sends
/// there fails at once (the lab runs functions so, and no request it sends
/// makes them send).
pub fn functions_without_queues(template: &Template) -> Result<Vec<Function>, String> {
    let queues = template.queues()?;
    Ok(template
        .functions()?
        .into_iter()
        .map(|mut function| {
            function.env = with_queue_urls(&function.env, &queues, NO_SERVER);
            function
        })
        .collect())
}

/// A queue of the local stack.
#[derive(Debug, Clone)]
pub struct LocalQueue {
    /// What the template declares (the visibility timeout after overrides).
    pub spec: Queue,
    /// Its URL.
    pub url: String,
    /// Its ARN.
    pub arn: String,
}

/// Create every `AWS::SQS::Queue` of the template, dead-letter queues first.
/// `visibility_timeout_s`, if given, replaces every queue's visibility timeout:
/// local runs use a short one so that failed messages come back (and reach the
/// dead-letter queue) in seconds rather than minutes.
pub async fn create_queues(
    template: &Template,
    client: &Client,
    visibility_timeout_s: Option<u32>,
) -> Result<Vec<LocalQueue>, String> {
    let mut created: Vec<LocalQueue> = Vec::new();
    for mut spec in template.queues()? {
        if let Some(seconds) = visibility_timeout_s {
            spec.visibility_timeout_s = seconds;
        }
        let mut request = client.create_queue().queue_name(spec.name()).attributes(
            QueueAttributeName::VisibilityTimeout,
            spec.visibility_timeout_s.to_string(),
        );
        if spec.fifo {
            request = request.attributes(QueueAttributeName::FifoQueue, "true");
        }
        if spec.content_based_deduplication {
            request = request.attributes(QueueAttributeName::ContentBasedDeduplication, "true");
        }
        if let Some(redrive) = &spec.redrive {
            let target = created
                .iter()
                .find(|q| q.spec.logical_id == redrive.dead_letter_queue)
                .ok_or_else(|| {
                    format!(
                        "{}: dead-letter queue {} is not an SQS queue of the template",
                        spec.logical_id, redrive.dead_letter_queue
                    )
                })?;
            let policy = serde_json::json!({
                "deadLetterTargetArn": target.arn,
                "maxReceiveCount": redrive.max_receive_count.to_string(),
            });
            request = request.attributes(QueueAttributeName::RedrivePolicy, policy.to_string());
        }
        let url = request
            .send()
            .await
            .map_err(|e| format!("create queue {}: {}", spec.name(), error_text(&e)))?
            .queue_url
            .ok_or_else(|| format!("create queue {}: no URL", spec.name()))?;
        let expected = queue_url("", &spec);
        if !url.ends_with(&expected) {
            return Err(format!(
                "create queue {}: ElasticMQ answered the URL {url}, not ENDPOINT{expected}",
                spec.name()
            ));
        }
        let arn = client
            .get_queue_attributes()
            .queue_url(&url)
            .attribute_names(QueueAttributeName::QueueArn)
            .send()
            .await
            .map_err(|e| format!("queue {} ARN: {}", spec.name(), error_text(&e)))?
            .attributes
            .and_then(|mut a| a.remove(&QueueAttributeName::QueueArn))
            .ok_or_else(|| format!("queue {}: no ARN", spec.name()))?;
        created.push(LocalQueue { spec, url, arn });
    }
    Ok(created)
}

/// Messages in a queue: visible, in flight (received, not deleted), delayed.
pub async fn depth(client: &Client, url: &str) -> Result<u64, String> {
    let attributes = client
        .get_queue_attributes()
        .queue_url(url)
        .attribute_names(QueueAttributeName::ApproximateNumberOfMessages)
        .attribute_names(QueueAttributeName::ApproximateNumberOfMessagesNotVisible)
        .attribute_names(QueueAttributeName::ApproximateNumberOfMessagesDelayed)
        .send()
        .await
        .map_err(|e| format!("queue depth of {url}: {}", error_text(&e)))?
        .attributes
        .unwrap_or_default();
    Ok(attributes
        .values()
        .filter_map(|v| v.parse::<u64>().ok())
        .sum())
}

/// Send `bodies` to the queue at `url`, ten per call. A FIFO queue gets each
/// message in group `group` (deduplication by content, as the template sets).
pub async fn send(
    client: &Client,
    queue: &LocalQueue,
    bodies: &[String],
    group: &str,
) -> Result<(), String> {
    for (chunk_index, chunk) in bodies.chunks(10).enumerate() {
        let entries = chunk
            .iter()
            .enumerate()
            .map(|(i, body)| {
                let mut entry = SendMessageBatchRequestEntry::builder()
                    .id(format!("m{chunk_index}-{i}"))
                    .message_body(body);
                if queue.spec.fifo {
                    entry = entry.message_group_id(group);
                }
                entry.build().map_err(|e| e.to_string())
            })
            .collect::<Result<Vec<_>, _>>()?;
        let output = client
            .send_message_batch()
            .queue_url(&queue.url)
            .set_entries(Some(entries))
            .send()
            .await
            .map_err(|e| format!("send to {}: {}", queue.url, error_text(&e)))?;
        if !output.failed.is_empty() {
            return Err(format!("send to {}: {:?}", queue.url, output.failed));
        }
    }
    Ok(())
}

/// Receive and delete every message now in the queue at `url`, with its
/// message attributes and system attributes (`MessageGroupId`, …).
pub async fn take_all(client: &Client, url: &str) -> Result<Vec<Message>, String> {
    let mut taken = Vec::new();
    loop {
        let messages = client
            .receive_message()
            .queue_url(url)
            .max_number_of_messages(10)
            .message_attribute_names("All")
            .message_system_attribute_names(MessageSystemAttributeName::All)
            .send()
            .await
            .map_err(|e| format!("receive from {url}: {}", error_text(&e)))?
            .messages
            .unwrap_or_default();
        if messages.is_empty() {
            return Ok(taken);
        }
        for message in messages {
            if let Some(handle) = message.receipt_handle() {
                client
                    .delete_message()
                    .queue_url(url)
                    .receipt_handle(handle)
                    .send()
                    .await
                    .map_err(|e| format!("delete from {url}: {}", error_text(&e)))?;
            }
            taken.push(message);
        }
    }
}

/// An SDK error with its sources, for messages.
pub fn error_text(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queue(logical_id: &str, fifo: bool) -> Queue {
        Queue {
            logical_id: logical_id.into(),
            fifo,
            content_based_deduplication: false,
            visibility_timeout_s: 30,
            message_retention_s: 345_600,
            redrive: None,
        }
    }

    #[test]
    fn queue_references_in_an_environment_become_local_queue_urls() {
        let queues = [
            queue("OrdersQueue", false),
            queue("OrdersDeadLetterQueue", true),
        ];
        let env: Vec<(String, String)> = [
            ("TABLE_NAME", "OrdersTable"),
            ("DEAD_LETTER_QUEUE_URL", "OrdersDeadLetterQueue"),
            ("SOURCE", "OrdersQueue"),
            ("NOTE", "OrdersQueueX"),
        ]
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
        let resolved = with_queue_urls(&env, &queues, "http://127.0.0.1:9324");
        let value = |key: &str| {
            resolved
                .iter()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.as_str())
        };
        assert_eq!(value("TABLE_NAME"), Some("OrdersTable"));
        assert_eq!(
            value("DEAD_LETTER_QUEUE_URL"),
            Some("http://127.0.0.1:9324/000000000000/OrdersDeadLetterQueue.fifo")
        );
        assert_eq!(
            value("SOURCE"),
            Some("http://127.0.0.1:9324/000000000000/OrdersQueue")
        );
        assert_eq!(value("NOTE"), Some("OrdersQueueX"));
        assert_eq!(resolved.len(), env.len());
    }
}

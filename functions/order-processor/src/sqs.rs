//! The SQS implementation of [`DeadLetters`]: one `SendMessage` per dead
//! letter to the queue at `DEAD_LETTER_QUEUE_URL`, and nothing else (the
//! role allows `sqs:SendMessage` on that queue only).

use crate::dead_letter::{DeadLetter, DeadLetters};
use crate::store::StoreError;
use aws_lambda_events::sqs::SqsMessageAttribute;
use aws_sdk_sqs::Client;
use aws_sdk_sqs::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_sqs::operation::send_message::SendMessageError;
use aws_sdk_sqs::primitives::Blob;
use aws_sdk_sqs::types::MessageAttributeValue;
use shared::ErrorChain;

/// The dead-letter queue of the order queue.
#[derive(Debug)]
pub struct SqsDeadLetters {
    client: Client,
    queue_url: String,
}

impl SqsDeadLetters {
    /// Dead letters to the queue at `queue_url` through `client` (built once,
    /// at cold start).
    pub fn new(client: Client, queue_url: impl Into<String>) -> Self {
        Self {
            client,
            queue_url: queue_url.into(),
        }
    }
}

impl DeadLetters for SqsDeadLetters {
    async fn send(&self, letter: &DeadLetter) -> Result<(), StoreError> {
        let mut request = self
            .client
            .send_message()
            .queue_url(&self.queue_url)
            .message_body(&letter.body);
        for (name, value) in &letter.attributes {
            request = request.message_attributes(name, attribute(name, value)?);
        }
        if let Some(fifo) = &letter.fifo {
            request = request
                .message_group_id(&fifo.group_id)
                .message_deduplication_id(&fifo.deduplication_id);
        }
        request.send().await.map(|_| ()).map_err(classify)
    }
}

/// A message attribute of the Lambda event as SQS takes it back: a binary
/// value for the `Binary` types, a string value for the others.
fn attribute(name: &str, value: &SqsMessageAttribute) -> Result<MessageAttributeValue, StoreError> {
    let data_type = value.data_type.as_deref().unwrap_or("String");
    let builder = MessageAttributeValue::builder().data_type(data_type);
    let builder = if data_type.starts_with("Binary") {
        builder.set_binary_value(value.binary_value.as_ref().map(|b| Blob::new(b.0.clone())))
    } else {
        builder.set_string_value(value.string_value.clone())
    };
    builder
        .build()
        .map_err(|e| StoreError::permanent(format!("message attribute {name}: {e}")))
}

/// Turn a failed `SendMessage` into a retryable or permanent error.
fn classify(
    err: SdkError<SendMessageError, aws_sdk_sqs::config::http::HttpResponse>,
) -> StoreError {
    match err {
        SdkError::ServiceError(service) => {
            let server_side = service.raw().status().is_server_error();
            let error = service.into_err();
            let message = format!(
                "{}: {}",
                error.code().unwrap_or("SQS error"),
                error.message().unwrap_or("no message")
            );
            let throttled = matches!(
                error,
                SendMessageError::RequestThrottled(_) | SendMessageError::KmsThrottled(_)
            );
            StoreError {
                retryable: throttled || server_side,
                message,
            }
        }
        // The request may not have arrived; a repeat is deduplicated (FIFO)
        // or at worst a second copy of a dead letter, with the same
        // SourceMessageId (standard).
        SdkError::TimeoutError(_) | SdkError::DispatchFailure(_) | SdkError::ResponseError(_) => {
            StoreError::transient(format!("SQS unreachable: {}", ErrorChain(&err)))
        }
        other => StoreError::permanent(format!("request not built: {}", ErrorChain(&other))),
    }
}

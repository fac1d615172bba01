//! The analytics bucket on S3: partial answers of a fan-out and answers too
//! large for a Lambda response, written and read whole.

use crate::store::{ObjectError, ObjectFault, PutMode};
use aws_sdk_s3::Client;
use aws_sdk_s3::config::http::HttpResponse;
use aws_sdk_s3::error::SdkError;
use aws_sdk_s3::primitives::ByteStream;
use shared::ErrorChain;

/// One bucket, through a client built once at cold start.
#[derive(Debug, Clone)]
pub struct S3Objects {
    client: Client,
    bucket: String,
}

impl S3Objects {
    /// Objects of `bucket`, through `client`.
    pub fn new(client: Client, bucket: impl Into<String>) -> Self {
        Self {
            client,
            bucket: bucket.into(),
        }
    }

    /// Ask S3 about a key that is never written (the partials' prefix itself):
    /// opens a connection during init (`shared::connections`). `true` if S3
    /// answered (404, or 403 without a list permission).
    pub async fn answers(&self) -> bool {
        let answer = self
            .client
            .head_object()
            .bucket(&self.bucket)
            .key("partials/")
            .send()
            .await;
        answer.map_or_else(|e| e.raw_response().is_some(), |_| true)
    }

    /// Write `bytes` as `key`; with [`PutMode::CreateOnly`], only if the key
    /// holds nothing (`If-None-Match: *`; S3 answers 412 otherwise).
    pub async fn put(&self, key: &str, bytes: Vec<u8>, mode: PutMode) -> Result<(), ObjectError> {
        let mut request = self
            .client
            .put_object()
            .bucket(&self.bucket)
            .key(key)
            .body(ByteStream::from(bytes));
        if mode == PutMode::CreateOnly {
            request = request.if_none_match("*");
        }
        request.send().await.map_err(|e| {
            let fault = match status(&e) {
                Some(412) => ObjectFault::Exists,
                _ => ObjectFault::Failed,
            };
            ObjectError::new(
                fault,
                format!("PutObject {key} into {}: {}", self.bucket, ErrorChain(&e)),
            )
        })?;
        Ok(())
    }

    /// The bytes of `key`, refused past `max_bytes` before they are read.
    pub async fn get(&self, key: &str, max_bytes: usize) -> Result<Vec<u8>, ObjectError> {
        let failed = |fault, e: &dyn std::error::Error| {
            ObjectError::new(
                fault,
                format!("GetObject {key} from {}: {}", self.bucket, ErrorChain(e)),
            )
        };
        let output = self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await
            .map_err(|e| {
                let fault = match status(&e) {
                    Some(404) => ObjectFault::Missing,
                    _ => ObjectFault::Failed,
                };
                failed(fault, &e)
            })?;
        let length = output.content_length.unwrap_or(0);
        if usize::try_from(length).map_or(true, |n| n > max_bytes) {
            return Err(ObjectError::new(
                ObjectFault::TooLarge,
                format!(
                    "{key} in {} is {length} bytes, more than this function reads ({max_bytes})",
                    self.bucket
                ),
            ));
        }
        // One buffer of the announced size, filled as the body arrives: the
        // object is held once, never in chunks and then again whole.
        let mut bytes = Vec::with_capacity(usize::try_from(length).unwrap_or(0));
        let mut body = output.body;
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(|e| failed(ObjectFault::Failed, &e))?;
            if bytes.len() + chunk.len() > max_bytes {
                return Err(ObjectError::new(
                    ObjectFault::TooLarge,
                    format!("{key} in {} is longer than announced", self.bucket),
                ));
            }
            bytes.extend_from_slice(&chunk);
        }
        Ok(bytes)
    }
}

/// The HTTP status S3 answered with, if it answered.
fn status<E>(error: &SdkError<E, HttpResponse>) -> Option<u16> {
    error.raw_response().map(|r| r.status().as_u16())
}

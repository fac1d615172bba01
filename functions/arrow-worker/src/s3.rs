//! The analytics bucket on S3: partial answers of a fan-out and answers too
//! large for a Lambda response, written and read whole.

use crate::store::ObjectError;
use aws_sdk_s3::Client;
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

    /// Write `bytes` as `key`.
    pub async fn put(&self, key: &str, bytes: Vec<u8>) -> Result<(), ObjectError> {
        self.client
            .put_object()
            .bucket(&self.bucket)
            .key(key)
            .body(ByteStream::from(bytes))
            .send()
            .await
            .map_err(|e| {
                ObjectError(format!(
                    "PutObject {key} into {}: {}",
                    self.bucket,
                    ErrorChain(&e)
                ))
            })?;
        Ok(())
    }

    /// The bytes of `key`, refused past `max_bytes` before they are read.
    pub async fn get(&self, key: &str, max_bytes: usize) -> Result<Vec<u8>, ObjectError> {
        let failed = |e: &dyn std::error::Error| {
            ObjectError(format!(
                "GetObject {key} from {}: {}",
                self.bucket,
                ErrorChain(e)
            ))
        };
        let output = self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await
            .map_err(|e| failed(&e))?;
        let length = output.content_length.unwrap_or(0);
        if usize::try_from(length).map_or(true, |n| n > max_bytes) {
            return Err(ObjectError(format!(
                "{key} in {} is {length} bytes, more than this function reads ({max_bytes})",
                self.bucket
            )));
        }
        let body = output.body.collect().await.map_err(|e| failed(&e))?;
        Ok(body.into_bytes().to_vec())
    }
}

//! The [`Store`] on AWS: the DynamoDB tables, and the analytics bucket when
//! one is configured (`ANALYTICS_BUCKET`).

use crate::columns::Item;
use crate::dynamodb::DynamoTables;
use crate::s3::S3Objects;
use crate::store::{ObjectError, ObjectFault, Page, PutMode, Report, Source, Store, StoreError};

/// Orders and reports in DynamoDB, answers in S3.
#[derive(Debug, Clone)]
pub struct AwsStore {
    tables: DynamoTables,
    objects: Option<S3Objects>,
}

impl AwsStore {
    /// The store of `tables` and, if configured, `objects`.
    pub fn new(tables: DynamoTables, objects: Option<S3Objects>) -> Self {
        Self { tables, objects }
    }

    /// Open `dynamodb` connections to DynamoDB and one to S3 (if a bucket is
    /// configured) at the same time, during init (`shared::connections`).
    pub async fn open_connections(&self, dynamodb: usize) {
        let tables = shared::connections::open("DynamoDB", dynamodb, || self.tables.answers());
        let objects = async {
            if let Some(objects) = &self.objects {
                shared::connections::open("S3", 1, || objects.answers()).await;
            }
        };
        futures::join!(tables, objects);
    }

    fn objects(&self) -> Result<&S3Objects, ObjectError> {
        self.objects.as_ref().ok_or_else(|| {
            ObjectError::new(
                ObjectFault::Failed,
                "no analytics bucket: set ANALYTICS_BUCKET (template.yaml sets it to AnalyticsBucket)",
            )
        })
    }
}

impl Store for AwsStore {
    async fn read_page(&self, source: &Source, start: Option<Item>) -> Result<Page, StoreError> {
        self.tables.read_page(source, start).await
    }

    async fn save_report(&self, report: &Report) -> Result<(), StoreError> {
        self.tables.save_report(report).await
    }

    async fn put_object(
        &self,
        key: &str,
        bytes: Vec<u8>,
        mode: PutMode,
    ) -> Result<(), ObjectError> {
        self.objects()?.put(key, bytes, mode).await
    }

    async fn get_object(&self, key: &str, max_bytes: usize) -> Result<Vec<u8>, ObjectError> {
        self.objects()?.get(key, max_bytes).await
    }
}

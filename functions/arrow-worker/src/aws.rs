//! The [`Store`] on AWS: the DynamoDB tables, the analytics bucket when one
//! is configured (`ANALYTICS_BUCKET`), and the report state machine when one
//! is (`REPORT_STATE_MACHINE_ARN`).

use crate::columns::Item;
use crate::dynamodb::DynamoTables;
use crate::s3::S3Objects;
use crate::step_functions::FanOuts;
use crate::store::{
    FanOutError, ObjectError, ObjectFault, Page, PutMode, Report, Saved, Source, Store, StoreError,
};

/// Orders and reports in DynamoDB, answers in S3, fan-outs on Step Functions.
#[derive(Debug, Clone)]
pub struct AwsStore {
    tables: DynamoTables,
    objects: Option<S3Objects>,
    fan_outs: Option<FanOuts>,
}

impl AwsStore {
    /// The store of `tables` and, if configured, `objects` and `fan_outs`.
    pub fn new(
        tables: DynamoTables,
        objects: Option<S3Objects>,
        fan_outs: Option<FanOuts>,
    ) -> Self {
        Self {
            tables,
            objects,
            fan_outs,
        }
    }

    /// Open `dynamodb` connections to DynamoDB and one to S3 (if a bucket is
    /// configured), each with a spare, at the same time, during init
    /// (`shared::connections`).
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

    async fn save_report(&self, report: &Report) -> Result<Saved, StoreError> {
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

    async fn start_fan_out(&self, name: &str, input: String) -> Result<(), FanOutError> {
        let fan_outs = self.fan_outs.as_ref().ok_or_else(|| {
            FanOutError(
                "no report state machine: set REPORT_STATE_MACHINE_ARN (template.yaml sets it)"
                    .into(),
            )
        })?;
        fan_outs.start(name, input).await
    }
}

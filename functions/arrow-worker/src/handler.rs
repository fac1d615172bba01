//! Requests in, answers out: validate, wait for the pre-warm (bounded), scan,
//! aggregate on the Rayon pool, merge, save reports.

use crate::aggregate::{AggregateError, aggregate};
use crate::answer::{Answer, Run};
use crate::config::Config;
use crate::merge::merge;
use crate::request::{self, BadRequest, Query, Request, Segment};
use crate::scan::{ScanError, scan};
use crate::store::{Store, StoreError};
use lambda_runtime::{Diagnostic, LambdaEvent};
use serde_json::Value;
use shared::arena::Prewarm;
use std::time::{Duration, Instant};

/// Largest report item body: DynamoDB items hold at most 400 KB.
pub const MAX_REPORT_BYTES: usize = 350_000;
/// Largest answer: Lambda's limit on a synchronous response (6 MB).
pub const MAX_ANSWER_BYTES: usize = 6 * 1024 * 1024;

/// Why a request failed; the variant is the error type the caller sees.
#[derive(Debug, thiserror::Error)]
pub enum Failure {
    /// The request cannot be answered as sent.
    #[error(transparent)]
    InvalidRequest(#[from] BadRequest),
    /// The scan stopped (DynamoDB error or too many rows).
    #[error(transparent)]
    Scan(#[from] ScanError),
    /// A report could not be saved.
    #[error("report not saved: {0}")]
    Report(#[from] StoreError),
    /// The aggregation failed.
    #[error(transparent)]
    Aggregate(#[from] AggregateError),
    /// The Rayon job did not return.
    #[error(transparent)]
    Pool(#[from] shared::pool::JobError),
    /// The answer, as JSON, is larger than Lambda can return.
    #[error(
        "the answer is {0} bytes, more than Lambda's response limit ({MAX_ANSWER_BYTES}): set a lower query.limit, a coarser group_by or more segments"
    )]
    AnswerTooLarge(usize),
}

impl Failure {
    fn error_type(&self) -> &'static str {
        match self {
            Failure::InvalidRequest(_) => "InvalidRequest",
            Failure::Scan(ScanError::TooManyRows(_)) => "TooManyRows",
            Failure::Scan(ScanError::Store(_)) | Failure::Report(_) => "DynamoDBError",
            Failure::Aggregate(_) | Failure::Pool(_) => "AggregationFailed",
            Failure::AnswerTooLarge(_) => "AnswerTooLarge",
        }
    }
}

impl From<Failure> for Diagnostic {
    fn from(failure: Failure) -> Self {
        Diagnostic {
            error_type: failure.error_type().into(),
            error_message: failure.to_string(),
        }
    }
}

/// The worker: built once at cold start, shared by every invocation.
#[derive(Debug)]
pub struct Worker<S> {
    store: S,
    config: Config,
    workers: u32,
    prewarm: Option<Prewarm>,
}

impl<S: Store> Worker<S> {
    /// A worker scanning with one segment per worker thread.
    pub fn new(store: S, config: Config, workers: usize, prewarm: Option<Prewarm>) -> Self {
        Self {
            store,
            config,
            workers: u32::try_from(workers).unwrap_or(1).max(1),
            prewarm,
        }
    }

    /// The store (for tests).
    pub fn store(&self) -> &S {
        &self.store
    }

    /// Handle one invocation.
    pub async fn handle(&self, event: LambdaEvent<Value>) -> Result<Value, Diagnostic> {
        let started = Instant::now();
        let faults = shared::memory::minor_faults();
        let (prewarmed, waited) = self.wait_for_prewarm();
        let (mut answer, report_id) = self.answer(event.payload).await.inspect_err(|e| {
            tracing::warn!(error_type = e.error_type(), error = %e, "request failed");
        })?;
        answer.run = Run {
            cold_start: shared::invocation::is_cold_start(),
            duration_ms: started.elapsed().as_secs_f64() * 1e3,
            minor_faults: shared::memory::minor_faults().saturating_sub(faults),
            prewarm_wait_ms: waited.as_secs_f64() * 1e3,
            prewarmed,
            ..answer.run
        };
        tracing::info!(
            groups = answer.groups_total,
            scanned = answer.rows.scanned,
            matched = answer.rows.matched,
            skipped = answer.rows.skipped.total(),
            pages = answer.run.pages,
            duration_ms = answer.run.duration_ms,
            minor_faults = answer.run.minor_faults,
            prewarmed,
            "answered"
        );
        let mut body = serde_json::to_value(&answer).map_err(|e| Diagnostic {
            error_type: "Internal".into(),
            error_message: format!("answer not serialisable: {e}"),
        })?;
        if let (Some(id), Some(fields)) = (report_id, body.as_object_mut()) {
            fields.insert("report_id".into(), Value::String(id));
        }
        // Group keys and numbers vary in length (a merge's come from the
        // caller): measure, rather than let Lambda refuse the response.
        let bytes = serde_json::to_vec(&body).map_or(usize::MAX, |text| text.len());
        if bytes > MAX_ANSWER_BYTES {
            let failure = Failure::AnswerTooLarge(bytes);
            tracing::warn!(error_type = failure.error_type(), error = %failure, "request failed");
            return Err(failure.into());
        }
        Ok(body)
    }

    /// Wait (bounded) for the pre-warm: whether it is done, and how long this waited.
    fn wait_for_prewarm(&self) -> (bool, Duration) {
        let started = Instant::now();
        let done = self
            .prewarm
            .as_ref()
            .is_some_and(|p| p.wait(self.config.arena_wait).is_some());
        (done, started.elapsed())
    }

    async fn answer(&self, payload: Value) -> Result<(Answer, Option<String>), Failure> {
        match request::parse(payload)? {
            Request::Aggregate {
                query,
                segment,
                total_segments,
            } => {
                let segment = request::segment(segment, total_segments)?;
                Ok((self.aggregate(query, segment).await?, None))
            }
            Request::Merge { partials } => Ok((merge(partials)?, None)),
            Request::DailyReport { day } => {
                let now = time::OffsetDateTime::now_utc();
                let (date, query) = request::day_window(day.as_deref(), now)?;
                let answer = self.aggregate(query, None).await?;
                let id = format!("daily/{date}");
                let body = serde_json::to_string(&answer)
                    .map_err(|e| BadRequest(format!("report not serialisable: {e}")))?;
                if body.len() > MAX_REPORT_BYTES {
                    return Err(BadRequest(format!(
                        "report of {} bytes exceeds {MAX_REPORT_BYTES}",
                        body.len()
                    ))
                    .into());
                }
                self.store.save_report(&id, body).await?;
                Ok((answer, Some(id)))
            }
        }
    }

    /// Scan the named segment (or all, one per worker) and aggregate.
    pub async fn aggregate(
        &self,
        query: Query,
        segment: Option<Segment>,
    ) -> Result<Answer, Failure> {
        let window = query.validate()?;
        let (segments, total) = match segment {
            Some(s) => (s.segment..s.segment + 1, s.total_segments),
            None => (0..self.workers, self.workers),
        };
        let scanned = scan(
            &self.store,
            segments,
            total,
            query.group_by,
            self.config.max_rows,
        )
        .await?;
        let mut rows = scanned.rows;
        let batches = scanned.batches;
        let (groups, matched) =
            shared::pool::run("aggregation", move || aggregate(batches, window)).await??;
        rows.matched = matched;
        let mut answer = Answer::new(query, segment, groups, rows)?;
        answer.run.pages = scanned.pages;
        Ok(answer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample;
    use crate::store::MemoryStore;
    use serde_json::json;

    fn worker(items: Vec<crate::columns::Item>) -> Worker<MemoryStore> {
        let env = [("TABLE_NAME", "orders"), ("REPORTS_TABLE", "reports")];
        let config = Config::from_env(&env).expect("config");
        Worker::new(MemoryStore::new(items, 16), config, 2, None)
    }

    async fn call(worker: &Worker<MemoryStore>, payload: Value) -> Result<Value, Diagnostic> {
        worker
            .handle(LambdaEvent::new(
                payload,
                lambda_runtime::Context::default(),
            ))
            .await
    }

    #[tokio::test]
    async fn segments_then_merge_equal_one_full_scan() {
        let w = worker(sample::items(500, 40, 9));
        let query = json!({"group_by": "customer", "from": "2026-11-05T00:00:00Z"});
        let full = call(&w, json!({"operation": "aggregate", "query": query}))
            .await
            .unwrap();
        let mut partials = Vec::new();
        for segment in (0..3).rev() {
            let p = json!({"operation": "aggregate", "query": query, "segment": segment, "total_segments": 3});
            partials.push(call(&w, p).await.unwrap());
        }
        let merged = call(&w, json!({"operation": "merge", "partials": partials}))
            .await
            .unwrap();
        assert_eq!(merged["groups"], full["groups"]);
        assert_eq!(merged["rows"], full["rows"]);
        assert_eq!(full["rows"]["scanned"], 500);
        assert!(full["rows"]["matched"].as_u64().unwrap() < 500);
    }

    #[tokio::test]
    async fn bad_requests_get_a_clear_error_type() {
        let w = worker(Vec::new());
        for payload in [
            json!({"operation": "report"}),
            json!({"operation": "aggregate", "query": {"group_by": "day", "limit": 0}}),
            json!({"operation": "aggregate", "query": {"group_by": "day"}, "segment": 1}),
            json!({"operation": "merge", "partials": []}),
            json!({"operation": "daily_report", "day": "yesterday"}),
        ] {
            let err = call(&w, payload.clone()).await.unwrap_err();
            assert_eq!(
                err.error_type, "InvalidRequest",
                "{payload}: {}",
                err.error_message
            );
        }
    }

    #[tokio::test]
    async fn an_empty_table_gives_an_empty_answer() {
        let w = worker(Vec::new());
        let body = call(
            &w,
            json!({"operation": "aggregate", "query": {"group_by": "day"}}),
        )
        .await
        .unwrap();
        assert_eq!(body["groups"], json!([]));
        assert_eq!(body["rows"]["scanned"], 0);
        assert_eq!(body["truncated"], false);
    }

    #[tokio::test]
    async fn high_cardinality_is_truncated_to_the_limit_and_says_so() {
        let w = worker(sample::items(3_000, 1_000_000, 4));
        let body = call(
            &w,
            json!({"operation": "aggregate", "query": {"group_by": "customer", "limit": 100}}),
        )
        .await
        .unwrap();
        assert_eq!(body["groups"].as_array().unwrap().len(), 100);
        assert_eq!(body["truncated"], true);
        assert!(body["groups_total"].as_u64().unwrap() > 2_900);
    }

    #[tokio::test]
    async fn the_daily_report_is_saved_by_day() {
        let w = worker(sample::items(200, 10, 5));
        let body = call(
            &w,
            json!({"operation": "daily_report", "day": "2026-11-03"}),
        )
        .await
        .unwrap();
        assert_eq!(body["report_id"], "daily/2026-11-03");
        let reports = w.store().reports();
        assert_eq!(reports.len(), 1);
        let saved: Value = serde_json::from_str(&reports[0].1).unwrap();
        assert_eq!(saved["groups"], body["groups"]);
        assert!(body["rows"]["matched"].as_u64().unwrap() > 0);
    }
}

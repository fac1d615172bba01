//! Requests in, answers out: validate, wait for the pre-warm (bounded), scan,
//! aggregate, merge, save reports.
//!
//! Where the CPU work runs: the aggregation (concatenate, filter, sort, one
//! kernel per group) on the Rayon pool through [`shared::pool::run`], never on
//! a tokio thread. Turning each scanned page into a record batch runs on the
//! scan's task as the page arrives (see `scan.rs`: linear in a page of at
//! most 1 MB, small next to the network wait and the aggregation). A merge and
//! the answer's JSON run on the invocation's task: both are linear in what the
//! caller sent or will receive, which Lambda bounds at 6 MB.

use crate::aggregate::aggregate;
use crate::answer::{Answer, Run};
use crate::config::Config;
use crate::error::Error;
use crate::merge::merge;
use crate::query::{BadRequest, Query, Segment};
use crate::request::{self, Request};
use crate::scan::scan;
use crate::store::Store;
use lambda_runtime::{Diagnostic, LambdaEvent};
use serde_json::Value;
use shared::arena::Prewarm;
use std::time::{Duration, Instant};

/// Largest report item body: DynamoDB items hold at most 400 KB.
pub const MAX_REPORT_BYTES: usize = 350_000;

/// Serves invocations: built once at cold start, shared by every invocation.
#[derive(Debug)]
pub struct Handler<S> {
    store: S,
    config: Config,
    workers: u32,
    prewarm: Option<Prewarm>,
}

impl<S: Store> Handler<S> {
    /// A handler reading and writing `store`, scanning with one segment per
    /// worker thread (`workers`) unless a request names its segment, and
    /// waiting (at most `config.arena_wait`) for `prewarm` on its first request.
    pub fn new(store: S, config: Config, workers: usize, prewarm: Option<Prewarm>) -> Self {
        Self {
            store,
            config,
            workers: u32::try_from(workers).unwrap_or(1).max(1),
            prewarm,
        }
    }

    /// Handle one invocation.
    pub async fn handle(&self, event: LambdaEvent<Value>) -> Result<Value, Diagnostic> {
        self.respond(event.payload).await.map_err(|e| {
            tracing::warn!(error_type = e.error_type(), error = %e, "request failed");
            Diagnostic::from(e)
        })
    }

    /// The response to `payload`, measured and counted.
    async fn respond(&self, payload: Value) -> Result<Value, Error> {
        let started = Instant::now();
        let faults = shared::memory::minor_faults();
        let (prewarmed, waited) = self.wait_for_prewarm().await;
        let (mut answer, report_id) = self.answer(payload).await?;
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
        Ok(answer.to_response(report_id)?)
    }

    /// Wait (bounded, without blocking the thread) for the pre-warm: whether
    /// it is done, and how long this waited.
    async fn wait_for_prewarm(&self) -> (bool, Duration) {
        let Some(prewarm) = &self.prewarm else {
            return (false, Duration::ZERO);
        };
        let started = Instant::now();
        let done = prewarm.wait(self.config.arena_wait).await.is_some();
        (done, started.elapsed())
    }

    async fn answer(&self, payload: Value) -> Result<(Answer, Option<String>), Error> {
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

    /// Scan the named segment (or all, one per worker) and aggregate on the
    /// Rayon pool.
    pub async fn aggregate(&self, query: Query, segment: Option<Segment>) -> Result<Answer, Error> {
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

//! Requests in, answers out: validate, wait for the pre-warm (bounded), scan,
//! aggregate, merge, save reports.
//!
//! Where the CPU work runs: the aggregation (concatenate, filter, sort, one
//! kernel per group) on the Rayon pool through [`shared::pool::run`], never on
//! a tokio thread. Turning each scanned page into a record batch runs on the
//! scan's task as the page arrives (see `scan.rs`: linear in a page of at
//! most 1 MB, small next to the network wait and the aggregation), and so
//! does the daily report's adding up of each page (`report.rs`: a page's
//! sort and a handful of groups). A merge runs on the invocation's task, one
//! partial at a time (each at most an eighth of the memory), and so does the
//! answer's JSON: linear in what Lambda bounds at 6 MB.
//!
//! Every invocation works to its [`Deadline`] (the shared rule): a scan stops
//! paging there (`scan.rs`) and a merge of stored partials stops reading
//! them, and the invocation fails with `DeadlineTooShort` while it can still
//! answer. The steps after a scan (the aggregation, bounded by `MAX_ROWS`;
//! storing a partial or a report) are short and are not cut off: the
//! deadline's margin is their time.

use crate::aggregate::aggregate;
use crate::answer::{Answer, Group, MAX_ANSWER_BYTES, Rows, Run, Unanswerable};
use crate::budget::RowBudget;
use crate::config::Config;
use crate::error::Error;
use crate::merge::{Merger, merge};
use crate::partial::{self, ANSWERS_PREFIX, StoredPartial};
use crate::query::{BadRequest, Query, Segment};
use crate::report::{self, DayTotals, Plan};
use crate::request::{self, Request};
use crate::scan::{ScanError, Scanned, scan};
use crate::store::{ObjectFault, PutMode, Report, Saved, Source, Store};
use futures::StreamExt;
use lambda_runtime::{Diagnostic, LambdaEvent};
use serde_json::Value;
use shared::arena::Prewarm;
use shared::invocation::Deadline;
use shared::orders::DAY_SHARDS;
use std::time::{Duration, Instant};
use time::{Date, OffsetDateTime};
use tokio::sync::Semaphore;
use tracing::Instrument;
use tracing::field::Empty;

/// Largest report item body: DynamoDB items hold at most 400 KB.
pub const MAX_REPORT_BYTES: usize = 350_000;
/// Stored partials a merge reads at once (each is held until merged, and all
/// together within the byte budget `merge_read_bytes`).
pub const MERGE_READS_IN_FLIGHT: usize = 8;
/// Largest answer of `merge_stored` returned inline: Step Functions holds at
/// most 256 KiB in a state (with room for the Task's wrapping); larger
/// answers go to the bucket.
pub const MAX_STATE_BYTES: usize = 200 * 1024;

/// Serves invocations: built once at cold start, shared by every invocation.
#[derive(Debug)]
pub struct Handler<S> {
    store: S,
    config: Config,
    workers: u32,
    prewarm: Option<Prewarm>,
    /// `MAX_ROWS`: the rows every scan in flight holds at once (see `budget.rs`).
    rows: RowBudget,
    /// The bytes of stored partials every merge in flight holds at once
    /// (`merge_read_bytes`), in KiB.
    merge_reads: Semaphore,
}

impl<S: Store> Handler<S> {
    /// A handler reading and writing `store`, scanning with one segment per
    /// worker thread (`workers`) unless a request names its segment, and
    /// waiting (at most `config.arena_wait`) for `prewarm` on its first request.
    pub fn new(store: S, config: Config, workers: usize, prewarm: Option<Prewarm>) -> Self {
        Self {
            store,
            workers: u32::try_from(workers).unwrap_or(1).max(1),
            prewarm,
            rows: RowBudget::new(config.max_rows),
            merge_reads: Semaphore::new(kib(config.merge_read_bytes as u64) as usize),
            config,
        }
    }

    /// Handle one invocation.
    pub async fn handle(&self, event: LambdaEvent<Value>) -> Result<Value, Diagnostic> {
        let request_id = event.context.request_id.clone();
        let deadline = Deadline::from_context(&event.context);
        let respond = self.respond(event.payload, &request_id, deadline);
        respond.await.map_err(|e| {
            tracing::warn!(error_type = e.error_type(), error = %e, "request failed");
            Diagnostic::from(e)
        })
    }

    /// The response to `payload` (invocation `request_id`, work due by
    /// `deadline`), measured and counted.
    pub async fn respond(
        &self,
        payload: Value,
        request_id: &str,
        deadline: Deadline,
    ) -> Result<Value, Error> {
        let started = Instant::now();
        let faults = shared::memory::minor_faults();
        let cpu = shared::memory::cpu_time();
        let (prewarmed, waited) = self.wait_for_prewarm().await;
        let (mut answer, reply) = match self.answer(payload, deadline).await? {
            Outcome::Answered(answer, reply) => (*answer, reply),
            // The reported day was handed to the state machine: no answer yet.
            Outcome::Started(summary) => return Ok(summary),
        };
        answer.run = Run {
            cold_start: shared::invocation::is_cold_start(),
            duration_ms: started.elapsed().as_secs_f64() * 1e3,
            minor_faults: shared::memory::minor_faults().saturating_sub(faults),
            cpu_ms: shared::memory::cpu_time().saturating_sub(cpu).as_secs_f64() * 1e3,
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
        let none = serde_json::Map::new();
        match reply {
            Reply::Answer => {
                self.deliver(&answer, none, request_id, MAX_ANSWER_BYTES)
                    .await
            }
            // The fan-out's last state: its answer must fit in a state.
            Reply::Merged(fields) => {
                self.deliver(&answer, fields, request_id, MAX_STATE_BYTES)
                    .await
            }
            Reply::Report(fields) => {
                self.deliver(&answer, fields, request_id, MAX_ANSWER_BYTES)
                    .await
            }
            Reply::Stored(stored) => serde_json::to_value(stored)
                .map_err(|e| Error::Answer(Unanswerable::NotSerialisable(e))),
        }
    }

    /// `answer` with `extra` fields as the response, or, past `inline_max`
    /// bytes (at most Lambda's response limit) and with a bucket, stored as
    /// `answers/<request id>.json` and answered by its key.
    async fn deliver(
        &self,
        answer: &Answer,
        extra: serde_json::Map<String, Value>,
        request_id: &str,
        inline_max: usize,
    ) -> Result<Value, Error> {
        let bytes = match answer.to_response(extra.clone()) {
            Ok(body) => match serde_json::to_vec(&body).map(|text| text.len()) {
                Ok(bytes) if bytes > inline_max && self.config.analytics_bucket.is_some() => bytes,
                _ => return Ok(body),
            },
            Err(Unanswerable::TooLarge(bytes)) if self.config.analytics_bucket.is_some() => bytes,
            Err(e) => return Err(e.into()),
        };
        let key = format!("{ANSWERS_PREFIX}{}.json", partial::key_part(request_id));
        let body = serde_json::to_vec(answer).map_err(Unanswerable::from)?;
        // Replace: Lambda's retries of an invocation keep its request id.
        self.store.put_object(&key, body, PutMode::Replace).await?;
        tracing::info!(key, bytes, "answer stored in the analytics bucket");
        let mut summary = serde_json::to_value(answer).map_err(Unanswerable::from)?;
        if let Some(fields) = summary.as_object_mut() {
            fields.extend(extra);
            fields.remove("groups");
            fields.insert("answer_key".into(), Value::String(key));
            fields.insert("answer_bytes".into(), Value::from(bytes));
        }
        Ok(summary)
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

    async fn answer(&self, payload: Value, deadline: Deadline) -> Result<Outcome, Error> {
        let answered = |answer, reply| Ok(Outcome::Answered(Box::new(answer), reply));
        match request::parse(payload)? {
            Request::Aggregate {
                query,
                segment,
                total_segments,
                run_id,
                day,
            } => {
                let segment = request::segment(segment, total_segments)?;
                let day = day.as_deref().map(report::parse_day).transpose()?;
                let query = match day {
                    Some(day) => report::within_day(query, day)?,
                    None => query,
                };
                let sources = match (day, segment) {
                    (Some(day), Some(segment)) => vec![report::segment_source(day, segment)?],
                    (Some(day), None) => report::day_sources(day)?,
                    (None, segment) => self.sources(segment),
                };
                match (run_id, segment) {
                    (None, segment) => {
                        let answer = self.read_and_aggregate(query, sources, segment, deadline);
                        answered(answer.await?, Reply::Answer)
                    }
                    (Some(run_id), Some(segment)) => {
                        let (answer, stored) = self
                            .store_partial(query, segment, sources, run_id, deadline)
                            .await?;
                        answered(answer, Reply::Stored(stored))
                    }
                    (Some(_), None) => Err(BadRequest(
                        "run_id goes with segment and total_segments: it names a fan-out".into(),
                    )
                    .into()),
                }
            }
            Request::Merge { partials } => answered(merge(partials)?, Reply::Answer),
            Request::MergeStored {
                run_id,
                partials,
                report,
            } => {
                let merged = self.merge_stored(&run_id, partials, deadline).await?;
                let Some(report) = report else {
                    return answered(merged, Reply::Merged(serde_json::Map::new()));
                };
                // A day's report fanned out: saved as the run that started it
                // would have saved it.
                let day = report::parse_day(&report.day)?;
                let late_days = self.config.report_late_days;
                let plan = report::fanned_out(day, &report.as_of, late_days)?;
                if merged.query != report::query(day)? {
                    return Err(BadRequest(format!(
                        "the partials answer another question than the report of {day}"
                    ))
                    .into());
                }
                self.save_report(day, &merged, &plan).await?;
                answered(merged, Reply::Merged(report_fields(day, &plan)))
            }
            Request::DailyReport {
                day,
                scheduled_time,
            } => {
                let now = OffsetDateTime::now_utc();
                let late_days = self.config.report_late_days;
                let plan = report::plan(day.as_deref(), scheduled_time.as_deref(), now, late_days)?;
                self.daily_report(&plan, deadline).await
            }
        }
    }

    /// Report every day of `plan` (the reported one first), each saved as
    /// its report item or handed to the state machine: the reported day's
    /// answer, with where it was saved and what was handed on.
    async fn daily_report(&self, plan: &Plan, deadline: Deadline) -> Result<Outcome, Error> {
        // An invocation of this function has this long: a segment's time.
        let segment_time = deadline.remaining();
        let mut reported = None;
        let (mut recomputed, mut fanned_out) = (Vec::new(), Vec::new());
        for (done, &day) in plan.days.iter().enumerate() {
            let days_left = u32::try_from(plan.days.len() - done).unwrap_or(1);
            match self.report_day(day, plan, deadline, days_left).await? {
                DayReport::Saved(answer) if done == 0 => reported = Some(answer),
                DayReport::Saved(_) => recomputed.push(report::report_id(day)),
                DayReport::TooLarge { covered, spent } => {
                    let slices = report::slices_for(covered, spent, segment_time);
                    let total_segments = slices * DAY_SHARDS;
                    let name = report::execution_name(day, plan);
                    let input = report::fan_out_input(day, plan, total_segments);
                    self.store.start_fan_out(&name, input).await?;
                    tracing::info!(
                        report = report::report_id(day),
                        execution = name,
                        total_segments,
                        "day handed to the report state machine"
                    );
                    fanned_out.push(serde_json::json!({
                        "report_id": report::report_id(day),
                        "execution": name,
                        "total_segments": total_segments,
                    }));
                }
            }
        }
        let day = plan
            .days
            .first()
            .copied()
            .ok_or_else(|| BadRequest("no day to report".into()))?;
        let mut fields = report_fields(day, plan);
        fields.insert("recomputed".into(), Value::from(recomputed));
        fields.insert("fanned_out".into(), Value::from(fanned_out));
        Ok(match reported {
            Some(answer) => Outcome::Answered(Box::new(answer), Reply::Report(fields)),
            None => Outcome::Started(Value::Object(fields)),
        })
    }

    /// Read `day` from the day index page by page (memory follows its
    /// groups) and save it as its report item; or, when a state machine can
    /// take it and the day is not read within this day's share of the time
    /// (one of `days_left`), say how far the reading got.
    async fn report_day(
        &self,
        day: Date,
        plan: &Plan,
        deadline: Deadline,
        days_left: u32,
    ) -> Result<DayReport, Error> {
        let query = report::query(day)?;
        let window = query.validate()?;
        let max_groups = usize::try_from(self.config.max_rows).unwrap_or(usize::MAX);
        let progress = report::Progress::default();
        let totals = || DayTotals::new(window, max_groups, &progress);
        let hand_on = self.config.report_state_machine.is_some();
        let share = match self.config.report_day_time {
            Some(time) => time,
            None => deadline.remaining() / days_left.max(1),
        };
        let read_by = match hand_on {
            true => deadline.min(Deadline::at(Instant::now() + share)),
            false => deadline,
        };
        let started = Instant::now();
        let sources = report::day_sources(day)?;
        let scanned = scan(&self.store, sources, query.group_by, None, read_by, totals).await;
        let scanned = match scanned {
            Err(Error::Scan(ScanError::Deadline { .. })) if hand_on => {
                let (from_ms, to_ms) = report::bounds(day)?;
                return Ok(DayReport::TooLarge {
                    covered: progress.covered(from_ms, to_ms),
                    spent: started.elapsed(),
                });
            }
            scanned => scanned?,
        };
        let (groups, matched) = scanned.collected.finish();
        let mut rows = scanned.rows;
        rows.matched = matched;
        let mut answer = Answer::new(query, None, groups, rows)?;
        answer.run.pages = scanned.pages;
        self.save_report(day, &answer, plan).await?;
        Ok(DayReport::Saved(answer))
    }

    /// Save `answer` as `day`'s report item in the run `plan`.
    async fn save_report(&self, day: Date, answer: &Answer, plan: &Plan) -> Result<(), Error> {
        let body = serde_json::to_string(answer)
            .map_err(|e| Error::Answer(Unanswerable::NotSerialisable(e)))?;
        if body.len() > MAX_REPORT_BYTES {
            return Err(BadRequest(format!(
                "report of {} bytes exceeds {MAX_REPORT_BYTES}",
                body.len()
            ))
            .into());
        }
        let report = Report {
            id: report::report_id(day),
            body,
            as_of: plan.as_of_text(),
            as_of_ms: plan.as_of_ms(),
            is_final: plan.is_final(day),
        };
        match self.store.save_report(&report).await? {
            Saved::Written => tracing::info!(
                report = report.id,
                is_final = report.is_final,
                orders = answer.rows.matched,
                "report saved"
            ),
            // A replayed dead letter or a late merge: the later report stands.
            Saved::Kept => tracing::warn!(
                report = report.id,
                as_of = report.as_of,
                "report not saved: the stored one stands for a later time or is final"
            ),
        }
        Ok(())
    }

    /// Aggregate `segment` (read from `sources`) and store every group of
    /// it in the bucket: the answer, and the reference to it.
    async fn store_partial(
        &self,
        query: Query,
        segment: Segment,
        sources: Vec<Source>,
        run_id: String,
        deadline: Deadline,
    ) -> Result<(Answer, StoredPartial), Error> {
        partial::check_run_id(&run_id)?;
        let (groups, rows, pages) = self.read(&query, sources, deadline).await?;
        let mut answer = Answer::stored_partial(query, segment, groups, rows);
        answer.run.pages = pages;
        let bytes = partial::encode(&answer).map_err(Error::Encode)?;
        let stored = StoredPartial {
            segment: segment.segment,
            total_segments: segment.total_segments,
            attempt: partial::new_attempt(),
            groups: answer.groups_total,
            bytes: bytes.len() as u64,
            sha256: partial::sha256(&bytes),
        };
        let key = stored.key(&run_id);
        self.create_once(&key, bytes, &stored.sha256).await?;
        Ok((answer, stored))
    }

    /// Write `bytes` as `key`, never replacing an object there; but an object
    /// already there with the same SHA-256 (`sha256`) is this write's own: its
    /// first attempt landed and its answer was lost, so the SDK's retry met
    /// S3's 412. Anything else there is refused.
    async fn create_once(&self, key: &str, bytes: Vec<u8>, sha256: &str) -> Result<(), Error> {
        let len = bytes.len();
        match self.store.put_object(key, bytes, PutMode::CreateOnly).await {
            Err(e) if e.fault == ObjectFault::Exists => {
                let there = self.store.get_object(key, len).await;
                match there {
                    Ok(there) if partial::sha256(&there) == sha256 => Ok(()),
                    _ => Err(e.into()),
                }
            }
            other => Ok(other?),
        }
    }

    /// Read every stored partial of run `run_id` (a few at a time, at most
    /// `merge_read_bytes` of them held at once) and merge them one by one,
    /// stopping at `deadline`.
    async fn merge_stored(
        &self,
        run_id: &str,
        partials: Vec<StoredPartial>,
        deadline: Deadline,
    ) -> Result<Answer, Error> {
        let span = tracing::info_span!("merge", partials = partials.len());
        self.merge_stored_in(run_id, partials, deadline)
            .instrument(span)
            .await
    }

    /// [`Self::merge_stored`], in its span.
    async fn merge_stored_in(
        &self,
        run_id: &str,
        partials: Vec<StoredPartial>,
        deadline: Deadline,
    ) -> Result<Answer, Error> {
        partial::check_run_id(run_id)?;
        let first = partials.first().ok_or_else(|| {
            BadRequest("merge_stored needs the references of every segment; none given".into())
        })?;
        let total = first.total_segments;
        if partials.len() != total as usize {
            return Err(BadRequest(format!(
                "{} partials given for {total} segments",
                partials.len()
            ))
            .into());
        }
        // One object larger than the budget could never be read: say so
        // before reading anything.
        let budget = self.config.merge_read_bytes;
        if let Some(large) = partials.iter().find(|p| p.bytes > budget as u64) {
            return Err(Error::PartialTooLarge {
                key: large.key(run_id),
                bytes: large.bytes,
                budget,
            });
        }
        // Shared with every merge in flight: together they hold at most
        // `merge_read_bytes` of partials.
        let held = &self.merge_reads;
        let to_merge = partials.len();
        let mut reads = futures::stream::iter(partials)
            .map(|stored| async move {
                // Closed never: the semaphore lives as long as the stream.
                let permit = held.acquire_many(kib(stored.bytes)).await;
                let permit = permit.map_err(|e| Error::Encode(e.to_string()))?;
                let key = stored.key(run_id);
                let bytes = match self.store.get_object(&key, budget).await {
                    Err(e) if e.fault == ObjectFault::Missing => {
                        return Err(Error::PartialMissing { key });
                    }
                    read => read?,
                };
                Ok::<_, Error>((stored, key, bytes, permit))
            })
            .buffer_unordered(MERGE_READS_IN_FLIGHT);
        let mut merger: Option<Merger> = None;
        let max_groups = usize::try_from(self.config.max_rows).unwrap_or(usize::MAX);
        let finish_by = tokio::time::Instant::from_std(deadline.instant());
        let mut merged = 0;
        loop {
            // Checked before each read too: reads that answer at once never
            // let the timeout see the deadline.
            let next = if deadline.is_past() {
                None
            } else {
                tokio::time::timeout_at(finish_by, reads.next()).await.ok()
            };
            let read = match next {
                Some(Some(read)) => read,
                Some(None) => break,
                None => {
                    return Err(Error::MergeDeadline {
                        merged,
                        total: to_merge,
                    });
                }
            };
            let (stored, key, bytes, permit) = read?;
            let answer = partial::open(run_id, &stored, &bytes)?;
            drop(bytes);
            let merger = match &mut merger {
                Some(merger) => merger,
                None => merger.insert(Merger::new(answer.query.clone(), total, max_groups)?),
            };
            merger.add(&key, answer)?;
            drop(permit);
            merged += 1;
        }
        let merger = merger.ok_or_else(|| BadRequest("no partial was read".into()))?;
        Ok(merger.finish()?)
    }

    /// Scan the named segment (or all, one per worker) and aggregate on the
    /// Rayon pool, outside an invocation (tests, tools): the deadline is
    /// unknown, so the shared rule's [`Deadline::UNKNOWN_BUDGET`] applies.
    pub async fn aggregate(&self, query: Query, segment: Option<Segment>) -> Result<Answer, Error> {
        let sources = self.sources(segment);
        let unknown = Deadline::from_epoch_ms(0);
        self.read_and_aggregate(query, sources, segment, unknown)
            .await
    }

    /// The named segment, or every segment of a scan with one per worker.
    fn sources(&self, segment: Option<Segment>) -> Vec<Source> {
        match segment {
            Some(s) => vec![Source::of(s)],
            None => Source::segments(self.workers).collect(),
        }
    }

    /// Read `sources` and aggregate them on the Rayon pool into an answer
    /// covering `segment` (or the whole question).
    async fn read_and_aggregate(
        &self,
        query: Query,
        sources: impl IntoIterator<Item = Source>,
        segment: Option<Segment>,
        deadline: Deadline,
    ) -> Result<Answer, Error> {
        let (groups, rows, pages) = self.read(&query, sources, deadline).await?;
        let mut answer = Answer::new(query, segment, groups, rows)?;
        answer.run.pages = pages;
        Ok(answer)
    }

    /// Validate `query`, read `sources` (stopping at `deadline`) and
    /// aggregate them on the Rayon pool: the groups, the rows counted
    /// (`matched` included) and the pages read.
    async fn read(
        &self,
        query: &Query,
        sources: impl IntoIterator<Item = Source>,
        deadline: Deadline,
    ) -> Result<(Vec<Group>, Rows, u64), Error> {
        let window = query.validate()?;
        // The trace's view of the work: the pages read (each page's DynamoDB
        // call is a span of its own inside), then the aggregation.
        let read = tracing::info_span!("scan", pages = Empty, rows = Empty);
        let Scanned {
            collected: batches,
            mut rows,
            pages,
            held,
        } = scan(
            &self.store,
            sources,
            query.group_by,
            Some(&self.rows),
            deadline,
            Vec::new,
        )
        .instrument(read.clone())
        .await?;
        read.record("pages", pages);
        read.record("rows", rows.scanned);
        let batch_count = batches.len();
        let (groups, matched) =
            shared::pool::run("aggregation", move || aggregate(batches, window))
                .instrument(tracing::info_span!("aggregation", batches = batch_count))
                .await??;
        // The scanned rows are gone: give their share of the budget back.
        drop(held);
        rows.matched = matched;
        Ok((groups, rows, pages))
    }
}

/// What an invocation answers.
#[derive(Debug)]
enum Outcome {
    /// An answer, and how to reply with it.
    Answered(Box<Answer>, Reply),
    /// No answer: the work was handed to the state machine; what was started.
    Started(Value),
}

/// How a daily report's day ended.
#[derive(Debug)]
enum DayReport {
    /// Read and saved.
    Saved(Answer),
    /// Not read within its share of the time: the fraction of the day its
    /// slowest shard got through (`None`: no page came), in `spent`.
    TooLarge {
        covered: Option<f64>,
        spent: Duration,
    },
}

/// What a report's answer says besides its groups: where it was saved, the
/// time it stands for, whether it is final.
fn report_fields(day: Date, plan: &Plan) -> serde_json::Map<String, Value> {
    let mut fields = serde_json::Map::new();
    fields.insert("report_id".into(), Value::from(report::report_id(day)));
    fields.insert("final".into(), Value::from(plan.is_final(day)));
    fields.insert("as_of".into(), Value::from(plan.as_of_text()));
    fields
}

/// What an invocation answers besides its [`Answer`].
#[derive(Debug)]
enum Reply {
    /// The answer itself.
    Answer,
    /// The answer of a stored fan-out's merge, kept within a state's limit,
    /// with these fields added (a day's report: where it was saved).
    Merged(serde_json::Map<String, Value>),
    /// The answer of a daily report, with these fields added (where it was
    /// saved, whether it is final, which earlier days were computed again).
    Report(serde_json::Map<String, Value>),
    /// A reference to the partial answer stored in the bucket.
    Stored(StoredPartial),
}

/// `bytes` in KiB, rounded up: the unit of the merge's read budget.
fn kib(bytes: u64) -> u32 {
    u32::try_from(bytes.div_ceil(1024)).unwrap_or(u32::MAX)
}

//! The daily report: which days a run reports, and each day's orders added up
//! page by page.
//!
//! **Which days.** A scheduled run reports the UTC day before the time it was
//! scheduled for (`scheduled_time`: EventBridge Scheduler's, the same in every
//! retry and in a dead letter replayed later, so a late, retried or replayed
//! run reports the day it was meant to), then computes again the
//! `late_days` days before that one (`REPORT_LATE_DAYS`). A run asked for by
//! hand names its `day`, or takes yesterday by the clock.
//!
//! **What it guarantees.** An order stored before midnight UTC `late_days`
//! days after its own day ended is counted in its day's report: the run
//! scheduled that night computes the day for the last time and marks the
//! report `final`. An order stored later (a dead letter redriven days after)
//! is counted when its day is asked for again by hand. Reports are computed
//! from the table each time, never patched, so running one again is safe.
//!
//! **Memory.** Each page of the day index is aggregated as it arrives (on the
//! scan's task: a page is at most 1 MB, a handful of currency groups) and
//! added to the day's totals: memory follows the groups, not the rows, so a
//! day of any size fits; only time bounds it (the invocation's deadline).

//! **A day too large for one invocation.** A run reads each day for at most
//! its share of the invocation's time (`REPORT_DAY_SECONDS`, or the time left
//! shared evenly among the days still to read). A day not read by then is
//! handed to the report state machine: the day is cut into slices of time,
//! each segment of the fan-out reads one shard of one slice, and the merge
//! saves the report item (see [`slices_for`] for how many). The execution is
//! named after the day and the run ([`execution_name`]), so a retried run
//! starts no second one. No day is then too large: only the state machine's
//! 1,000 segments bound it.

use crate::aggregate::aggregate;
use crate::columns::CREATED_AT_MS;
use crate::error::Error;
use crate::merge::Totals;
use crate::query::{BadRequest, GroupBy, Query, Segment, Window, bad, quoted};
use crate::scan::Collect;
use crate::store::Source;
use arrow_array::{Array, Int64Array, RecordBatch};
use shared::orders::{DAY_SHARDS, day_shard_key};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use time::format_description::well_known::Rfc3339;
use time::{Date, Duration, OffsetDateTime};

/// Most slices a day is cut into: the state machine's 1,000 segments.
pub const MAX_SLICES: u32 = 1_000 / DAY_SHARDS;

/// The days one run reports, and the time it stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The time the run stands for: the schedule's, or the clock's.
    pub as_of: OffsetDateTime,
    /// The days to report, the reported day first, then the earlier ones.
    pub days: Vec<Date>,
    /// Days after its own a day is computed again.
    pub late_days: u32,
}

/// `text` as an RFC 3339 time, or why not (naming `field`).
fn time(field: &str, text: &str) -> Result<OffsetDateTime, BadRequest> {
    OffsetDateTime::parse(text, &Rfc3339).map_err(|e| {
        bad(format!(
            "{field} {} is not an RFC 3339 time like 2026-11-22T00:15:00Z: {e}",
            quoted(text)
        ))
    })
}

/// `text` as a day (`2026-11-21`), or why not.
pub fn parse_day(text: &str) -> Result<Date, BadRequest> {
    let format = time::macros::format_description!("[year]-[month]-[day]");
    Date::parse(text, &format).map_err(|e| {
        bad(format!(
            "day {} is not a date like 2026-11-21: {e}",
            quoted(text)
        ))
    })
}

/// The UTC day `days` before `date`.
fn before(date: Date, days: u32) -> Result<Date, BadRequest> {
    date.checked_sub(Duration::days(i64::from(days)))
        .ok_or_else(|| bad(format!("no day {days} days before {date}")))
}

/// What a `daily_report` request reports: `day` alone (by hand), or the day
/// before `scheduled_time` (or before `now`, by hand) and the `late_days`
/// before it when scheduled.
pub fn plan(
    day: Option<&str>,
    scheduled_time: Option<&str>,
    now: OffsetDateTime,
    late_days: u32,
) -> Result<Plan, BadRequest> {
    let plan = |as_of, days| Plan {
        as_of,
        days,
        late_days,
    };
    match (day, scheduled_time) {
        (Some(_), Some(_)) => Err(bad(
            "give day (one day, by hand) or scheduled_time (the schedule's), not both",
        )),
        (Some(text), None) => Ok(plan(now, vec![parse_day(text)?])),
        (None, Some(text)) => {
            let as_of = time("scheduled_time", text)?.to_offset(time::UtcOffset::UTC);
            let reported = before(as_of.date(), 1)?;
            let days = (0..=late_days)
                .map(|n| before(reported, n))
                .collect::<Result<_, _>>()?;
            Ok(plan(as_of, days))
        }
        (None, None) => Ok(plan(now, vec![before(now.date(), 1)?])),
    }
}

/// The plan a fanned-out day is saved in: `day` alone, for the time
/// `as_of` (RFC 3339) of the run that handed it on.
pub fn fanned_out(day: Date, as_of: &str, late_days: u32) -> Result<Plan, BadRequest> {
    Ok(Plan {
        as_of: time("as_of", as_of)?.to_offset(time::UtcOffset::UTC),
        days: vec![day],
        late_days,
    })
}

impl Plan {
    /// Whether no later scheduled run computes `day` again: `late_days` days
    /// after it have ended by the time this run stands for.
    pub fn is_final(&self, day: Date) -> bool {
        let last = day.checked_add(Duration::days(i64::from(self.late_days) + 1));
        last.is_some_and(|last| self.as_of >= last.midnight().assume_utc())
    }

    /// The time this run stands for, in milliseconds since the Unix epoch.
    pub fn as_of_ms(&self) -> i64 {
        i64::try_from(self.as_of.unix_timestamp_nanos().div_euclid(1_000_000)).unwrap_or(i64::MAX)
    }

    /// [`Plan::as_of`] as RFC 3339 text.
    pub fn as_of_text(&self) -> String {
        self.as_of
            .format(&Rfc3339)
            .unwrap_or_else(|_| self.as_of.to_string())
    }
}

/// The id of `day`'s report item: `daily/2026-11-21`.
pub fn report_id(day: Date) -> String {
    format!("daily/{day}")
}

/// The question a day's report answers: its orders by currency.
pub fn query(day: Date) -> Result<Query, BadRequest> {
    let next = day
        .next_day()
        .ok_or_else(|| bad("no day after the latest date"))?;
    let at = |d: Date| {
        d.midnight()
            .assume_utc()
            .format(&Rfc3339)
            .map_err(|e| bad(format!("cannot format {d}: {e}")))
    };
    Ok(Query {
        group_by: GroupBy::Currency,
        from: Some(at(day)?),
        to: Some(at(next)?),
        limit: None,
    })
}

/// `day` in milliseconds since the epoch: its first, and the next day's first.
pub fn bounds(day: Date) -> Result<(i64, i64), BadRequest> {
    let next = day
        .next_day()
        .ok_or_else(|| bad("no day after the latest date"))?;
    let ms = |d: Date| d.midnight().assume_utc().unix_timestamp() * 1_000;
    Ok((ms(day), ms(next)))
}

/// Every shard of `day` in the day index, the whole day each.
pub fn day_sources(day: Date) -> Result<Vec<Source>, BadRequest> {
    let (from_ms, to_ms) = bounds(day)?;
    let name = day.to_string();
    Ok((0..DAY_SHARDS)
        .map(|shard| Source::DayShard {
            key: day_shard_key(&name, shard),
            from_ms,
            to_ms,
        })
        .collect())
}

/// What segment `segment` of a day's fan-out reads: the day is cut into
/// `total_segments / DAY_SHARDS` slices of time, and segment `s` reads shard
/// `s % DAY_SHARDS` of slice `s / DAY_SHARDS`.
pub fn segment_source(day: Date, segment: Segment) -> Result<Source, BadRequest> {
    let Segment {
        segment,
        total_segments,
    } = segment;
    if total_segments % DAY_SHARDS != 0 || total_segments / DAY_SHARDS > MAX_SLICES {
        return Err(bad(format!(
            "a day is read in total_segments = {DAY_SHARDS} (its shards) times 1 to {MAX_SLICES} slices, not {total_segments}"
        )));
    }
    let (from_ms, to_ms) = bounds(day)?;
    let slices = i64::from(total_segments / DAY_SHARDS);
    let slice = i64::from(segment / DAY_SHARDS);
    let at = |n: i64| from_ms + (to_ms - from_ms) * n / slices;
    Ok(Source::DayShard {
        key: day_shard_key(&day.to_string(), segment % DAY_SHARDS),
        from_ms: at(slice),
        to_ms: at(slice + 1),
    })
}

/// `query` over `day`: its window, where it names none, is the day.
pub fn within_day(mut query: Query, day: Date) -> Result<Query, BadRequest> {
    let whole = self::query(day)?;
    query.from = query.from.or(whole.from);
    query.to = query.to.or(whole.to);
    Ok(query)
}

/// How many slices a day is cut into for its fan-out, from what a run read
/// of it: in `spent`, the slowest shard got through the fraction `covered`
/// of the day (pages come in creation order). Each segment reads one shard
/// of one slice, and must do it in half of `segment_time` (an invocation's
/// time): at the rate seen, that takes `spent / (covered * slices)`. Without
/// a page read, one slice (a segment per shard). At most [`MAX_SLICES`].
pub fn slices_for(
    covered: Option<f64>,
    spent: std::time::Duration,
    segment_time: std::time::Duration,
) -> u32 {
    let Some(covered) = covered.filter(|c| *c > 0.0) else {
        return 1;
    };
    let needed = 2.0 * spent.as_secs_f64() / (covered.min(1.0) * segment_time.as_secs_f64());
    if !needed.is_finite() {
        return MAX_SLICES;
    }
    // In range after the clamp: the cast cannot truncate.
    needed.ceil().clamp(1.0, f64::from(MAX_SLICES)) as u32
}

/// The name of `day`'s fan-out in the run `plan`: the same in each retry of
/// the run, another for another run (`daily-2026-11-21-20261122T001500Z`).
pub fn execution_name(day: Date, plan: &Plan) -> String {
    let run: String = plan
        .as_of_text()
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .collect();
    format!("daily-{day}-{run}")
}

/// The report state machine's input for `day` in `total_segments`.
pub fn fan_out_input(day: Date, plan: &Plan, total_segments: u32) -> String {
    serde_json::json!({
        "report": {"day": day.to_string(), "as_of": plan.as_of_text()},
        "total_segments": total_segments,
    })
    .to_string()
}

/// How far each shard's reading got: the latest creation time read, per
/// collector (see [`DayTotals`]).
#[derive(Debug, Default)]
pub struct Progress {
    reached: Mutex<Vec<Arc<AtomicI64>>>,
}

impl Progress {
    /// A new collector's slot.
    fn slot(&self) -> Arc<AtomicI64> {
        let slot = Arc::new(AtomicI64::new(i64::MIN));
        if let Ok(mut reached) = self.reached.lock() {
            reached.push(Arc::clone(&slot));
        }
        slot
    }

    /// The fraction of `from_ms..to_ms` the slowest shard that read anything
    /// got through; `None` if none read anything.
    pub fn covered(&self, from_ms: i64, to_ms: i64) -> Option<f64> {
        let reached = self.reached.lock().ok()?;
        let span = (to_ms - from_ms).max(1) as f64;
        reached
            .iter()
            .map(|r| r.load(Ordering::Relaxed))
            .filter(|&at| at > from_ms)
            .map(|at| (at - from_ms) as f64 / span)
            .reduce(f64::min)
    }
}

/// A day's orders added up page by page (see the module doc).
#[derive(Debug)]
pub struct DayTotals {
    window: Window,
    totals: Totals,
    matched: u64,
    reached: Arc<AtomicI64>,
}

impl DayTotals {
    /// No orders yet; rows outside `window` are left out; at most
    /// `max_groups`; how far its pages got is kept in `progress`.
    pub fn new(window: Window, max_groups: usize, progress: &Progress) -> Self {
        Self {
            window,
            totals: Totals::new(max_groups),
            matched: 0,
            reached: progress.slot(),
        }
    }

    /// The groups in key order, and the rows that matched the window.
    pub fn finish(self) -> (Vec<crate::answer::Group>, u64) {
        (self.totals.into_groups(), self.matched)
    }
}

impl Collect for DayTotals {
    type Error = Error;

    fn page(&mut self, batch: RecordBatch) -> Result<(), Error> {
        let created = batch.column(CREATED_AT_MS).as_any();
        if let Some(latest) = created
            .downcast_ref::<Int64Array>()
            .and_then(arrow_arith::aggregate::max)
        {
            self.reached.fetch_max(latest, Ordering::Relaxed);
        }
        let (groups, matched) = aggregate(vec![batch], self.window)?;
        self.matched = self.matched.saturating_add(matched);
        groups.into_iter().try_for_each(|g| self.totals.add(g))?;
        Ok(())
    }

    fn join(&mut self, other: Self) -> Result<(), Error> {
        self.matched = self.matched.saturating_add(other.matched);
        Ok(self.totals.join(other.totals)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> OffsetDateTime {
        OffsetDateTime::parse(text, &Rfc3339).unwrap()
    }

    fn days(plan: &Plan) -> Vec<String> {
        plan.days.iter().map(Date::to_string).collect()
    }

    #[test]
    fn the_day_comes_from_the_schedule_not_the_clock() {
        // A run scheduled for Nov 22 00:15 that runs (or is replayed) days later.
        let late_clock = at("2026-11-30T09:00:00Z");
        let plan = plan(None, Some("2026-11-22T00:15:00Z"), late_clock, 2).unwrap();
        assert_eq!(days(&plan), ["2026-11-21", "2026-11-20", "2026-11-19"]);
        assert_eq!(plan.as_of, at("2026-11-22T00:15:00Z"));
        // Another offset is the same instant.
        let plan = super::plan(None, Some("2026-11-22T01:15:00+01:00"), late_clock, 0).unwrap();
        assert_eq!(days(&plan), ["2026-11-21"]);
    }

    #[test]
    fn by_hand_one_day_or_yesterday_by_the_clock() {
        let now = at("2025-11-22T10:00:00Z");
        let plan = plan(Some("2024-02-29"), None, now, 2).unwrap();
        assert_eq!(days(&plan), ["2024-02-29"]);
        let plan = super::plan(None, None, now, 2).unwrap();
        assert_eq!(days(&plan), ["2025-11-21"]);
        for (day, scheduled) in [
            (Some("2025-13-01"), None),
            (Some("yesterday"), None),
            (None, Some("2026-11-22")),
            (Some("2026-11-21"), Some("2026-11-22T00:15:00Z")),
        ] {
            assert!(
                super::plan(day, scheduled, now, 2).is_err(),
                "{day:?} {scheduled:?}"
            );
        }
        let long = "x".repeat(1 << 20);
        let e = super::plan(Some(&long), None, now, 2).unwrap_err();
        assert!(e.0.len() < 400, "{} bytes", e.0.len());
    }

    #[test]
    fn a_day_is_final_once_its_late_days_have_ended() {
        let scheduled = |t| plan(None, Some(t), at(t), 2).unwrap();
        let first = scheduled("2026-11-22T00:15:00Z");
        let day = first.days[0];
        assert!(!first.is_final(day));
        assert!(!scheduled("2026-11-23T00:15:00Z").is_final(day));
        let last = scheduled("2026-11-24T00:15:00Z");
        assert_eq!(last.days[2], day, "the third run computes it again");
        assert!(last.is_final(day));
        assert!(
            plan(
                None,
                Some("2026-11-22T00:15:00Z"),
                at("2026-11-22T00:15:00Z"),
                0
            )
            .unwrap()
            .is_final(day)
        );
    }

    #[test]
    fn a_report_covers_one_utc_day() {
        let day = Date::from_calendar_date(2025, time::Month::November, 21).unwrap();
        let query = query(day).unwrap();
        assert_eq!(query.from.as_deref(), Some("2025-11-21T00:00:00Z"));
        assert_eq!(query.to.as_deref(), Some("2025-11-22T00:00:00Z"));
        assert_eq!(query.group_by, GroupBy::Currency);
        assert_eq!(report_id(day), "daily/2025-11-21");
    }

    #[test]
    fn a_fan_out_cuts_the_day_into_enough_slices_for_each_segment() {
        let secs = std::time::Duration::from_secs;
        // Nothing read: a segment per shard.
        assert_eq!(slices_for(None, secs(40), secs(120)), 1);
        assert_eq!(slices_for(Some(0.0), secs(40), secs(120)), 1);
        // A third of the day in 40 s: a segment reading a third of it would
        // take 40 s, within half of 120 s.
        assert_eq!(slices_for(Some(1.0 / 3.0), secs(40), secs(120)), 2);
        // A hundredth of it in 40 s: 67 slices of 60 s each at most.
        assert_eq!(slices_for(Some(0.01), secs(40), secs(120)), 67);
        // Never more than the state machine's 1,000 segments.
        assert_eq!(slices_for(Some(1e-9), secs(40), secs(120)), MAX_SLICES);
        assert_eq!(slices_for(Some(0.5), secs(40), secs(0)), MAX_SLICES);
    }

    #[test]
    fn the_segments_of_a_day_cover_each_shard_once_without_overlap() {
        let day = Date::from_calendar_date(2026, time::Month::November, 21).unwrap();
        let (from, to) = bounds(day).unwrap();
        assert_eq!(to - from, 86_400_000);
        for slices in [1, 3, 7, MAX_SLICES] {
            let total_segments = slices * DAY_SHARDS;
            let mut covered = std::collections::BTreeMap::<String, Vec<(i64, i64)>>::new();
            for segment in 0..total_segments {
                let source = segment_source(
                    day,
                    Segment {
                        segment,
                        total_segments,
                    },
                )
                .unwrap();
                let Source::DayShard {
                    key,
                    from_ms,
                    to_ms,
                } = source
                else {
                    panic!("{source:?}");
                };
                covered.entry(key).or_default().push((from_ms, to_ms));
            }
            assert_eq!(covered.len(), DAY_SHARDS as usize);
            for (key, mut ranges) in covered {
                ranges.sort_unstable();
                assert_eq!(ranges.first().map(|r| r.0), Some(from), "{key}");
                assert_eq!(ranges.last().map(|r| r.1), Some(to), "{key}");
                assert!(ranges.windows(2).all(|w| w[0].1 == w[1].0), "{key}");
            }
        }
        for total_segments in [3, 6, (MAX_SLICES + 1) * DAY_SHARDS] {
            let segment = Segment {
                segment: 0,
                total_segments,
            };
            assert!(segment_source(day, segment).is_err(), "{total_segments}");
        }
    }

    #[test]
    fn progress_is_the_slowest_shard_that_read_anything() {
        let progress = Progress::default();
        let (a, b, _idle) = (progress.slot(), progress.slot(), progress.slot());
        assert_eq!(progress.covered(0, 100), None);
        a.store(50, Ordering::Relaxed);
        b.store(25, Ordering::Relaxed);
        assert_eq!(progress.covered(0, 100), Some(0.25));
    }
}

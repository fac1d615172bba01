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

use crate::aggregate::aggregate;
use crate::error::Error;
use crate::merge::Totals;
use crate::query::{BadRequest, GroupBy, Query, Window, bad, quoted};
use crate::scan::Collect;
use arrow_array::RecordBatch;
use time::format_description::well_known::Rfc3339;
use time::{Date, Duration, OffsetDateTime};

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
        (Some(text), None) => {
            let format = time::macros::format_description!("[year]-[month]-[day]");
            let date = Date::parse(text, &format).map_err(|e| {
                bad(format!(
                    "day {} is not a date like 2026-11-21: {e}",
                    quoted(text)
                ))
            })?;
            Ok(plan(now, vec![date]))
        }
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

impl Plan {
    /// Whether no later scheduled run computes `day` again: `late_days` days
    /// after it have ended by the time this run stands for.
    pub fn is_final(&self, day: Date) -> bool {
        let last = day.checked_add(Duration::days(i64::from(self.late_days) + 1));
        last.is_some_and(|last| self.as_of >= last.midnight().assume_utc())
    }

    /// The time this run stands for, as RFC 3339.
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

/// A day's orders added up page by page (see the module doc).
#[derive(Debug)]
pub struct DayTotals {
    window: Window,
    totals: Totals,
    matched: u64,
}

impl DayTotals {
    /// No orders yet; rows outside `window` are left out; at most `max_groups`.
    pub fn new(window: Window, max_groups: usize) -> Self {
        Self {
            window,
            totals: Totals::new(max_groups),
            matched: 0,
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
}

//! Requests, exactly as a caller (a person, Step Functions, EventBridge) sends them.
//!
//! ```json
//! {"operation": "aggregate", "query": {"group_by": "customer", "from": "2026-11-01T00:00:00Z"}}
//! {"operation": "aggregate", "query": {"group_by": "day"}, "segment": 0, "total_segments": 4}
//! {"operation": "aggregate", "query": {"group_by": "customer"}, "segment": 0, "total_segments": 64, "run_id": "r-1"}
//! {"operation": "merge", "partials": [ ...answers of the segments... ]}
//! {"operation": "merge_stored", "partials": [ ...references the segments returned with run_id... ]}
//! {"operation": "daily_report", "day": "2026-11-21"}
//! ```
//!
//! Unknown fields are refused: a typo (`"grop_by"`) must not silently mean "no grouping".

use crate::answer::Answer;
use crate::partial::StoredPartial;
use crate::query::{BadRequest, GroupBy, MAX_SEGMENTS, Query, Segment, bad, quoted};
use serde::Deserialize;
use time::format_description::well_known::Rfc3339;
use time::{Date, OffsetDateTime};

/// A request.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "operation", rename_all = "snake_case", deny_unknown_fields)]
pub enum Request {
    /// Scan (all segments, or the one named) and aggregate.
    Aggregate {
        /// The question.
        query: Query,
        /// This invocation's scan segment, for a fan-out over many invocations.
        #[serde(default)]
        segment: Option<u32>,
        /// How many segments the fan-out has (with `segment`).
        #[serde(default)]
        total_segments: Option<u32>,
        /// The fan-out's run (with `segment`): the partial answer is stored in
        /// the analytics bucket and a [`StoredPartial`] returned instead.
        #[serde(default)]
        run_id: Option<String>,
    },
    /// Combine the answers of every segment of one fan-out.
    Merge {
        /// The partial answers, one per segment, in any order.
        partials: Vec<Answer>,
    },
    /// Combine the stored partial answers of every segment of one fan-out.
    MergeStored {
        /// The references the segments returned, one per segment, in any order.
        partials: Vec<StoredPartial>,
    },
    /// Aggregate one UTC day by currency and store it as a report item.
    DailyReport {
        /// The day (`2026-11-21`); yesterday (UTC) when absent.
        #[serde(default)]
        day: Option<String>,
    },
}

/// Most characters of the decoder's reason in an error (serde quotes an
/// offending value whole, and a payload may be megabytes).
const MAX_REASON_CHARS: usize = 200;

/// Parse a request from the invocation payload.
pub fn parse(payload: serde_json::Value) -> Result<Request, BadRequest> {
    serde_json::from_value(payload).map_err(|e| {
        let reason: String = e.to_string().chars().take(MAX_REASON_CHARS).collect();
        bad(format!(
            "not a valid request: {reason} (expected {{\"operation\": \"aggregate\" | \"merge\" | \"merge_stored\" | \"daily_report\", ...}})"
        ))
    })
}

/// The segment named by a request, if any, validated.
pub fn segment(
    segment: Option<u32>,
    total_segments: Option<u32>,
) -> Result<Option<Segment>, BadRequest> {
    match (segment, total_segments) {
        (None, None) => Ok(None),
        (Some(segment), Some(total_segments))
            if (1..=MAX_SEGMENTS).contains(&total_segments) && segment < total_segments =>
        {
            Ok(Some(Segment {
                segment,
                total_segments,
            }))
        }
        (Some(s), Some(t)) => Err(bad(format!(
            "segment {s} of total_segments {t}: need 1 <= total_segments <= {MAX_SEGMENTS} and segment < total_segments"
        ))),
        _ => Err(bad(
            "segment and total_segments go together: give both or neither",
        )),
    }
}

/// The window covering UTC `day` (`YYYY-MM-DD`), or yesterday relative to `now`.
pub fn day_window(day: Option<&str>, now: OffsetDateTime) -> Result<(Date, Query), BadRequest> {
    let format = time::macros::format_description!("[year]-[month]-[day]");
    let date = match day {
        Some(text) => Date::parse(text, &format).map_err(|e| {
            bad(format!(
                "day {} is not a date like 2026-11-21: {e}",
                quoted(text)
            ))
        })?,
        None => now
            .date()
            .previous_day()
            .ok_or_else(|| bad("no day before the earliest date"))?,
    };
    let next = date
        .next_day()
        .ok_or_else(|| bad("no day after the latest date"))?;
    let at = |d: Date| {
        d.midnight()
            .assume_utc()
            .format(&Rfc3339)
            .map_err(|e| bad(format!("cannot format {d}: {e}")))
    };
    Ok((
        date,
        Query {
            group_by: GroupBy::Currency,
            from: Some(at(date)?),
            to: Some(at(next)?),
            limit: None,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parses_each_operation() {
        let r = parse(json!({"operation": "aggregate", "query": {"group_by": "day"}})).unwrap();
        assert!(matches!(r, Request::Aggregate { segment: None, .. }));
        let r = parse(json!({"operation": "merge", "partials": []})).unwrap();
        assert!(matches!(r, Request::Merge { .. }));
        let r = parse(json!({"operation": "daily_report"})).unwrap();
        assert_eq!(r, Request::DailyReport { day: None });
    }

    #[test]
    fn refuses_typos_unknown_operations_and_wrong_types() {
        for payload in [
            json!({"operation": "aggregate", "query": {"grop_by": "day"}}),
            json!({"operation": "aggregate", "query": {"group_by": "day"}, "extra": 1}),
            json!({"operation": "aggregate", "query": {"group_by": "sku"}}),
            json!({"operation": "report", "group_by": "customer"}),
            json!({"query": {"group_by": "day"}}),
            json!({"operation": "aggregate", "query": {"group_by": "day"}, "segment": -1, "total_segments": 2}),
            json!("aggregate"),
            json!(null),
        ] {
            let e = parse(payload.clone()).expect_err(&payload.to_string());
            assert!(e.0.starts_with("not a valid request"), "{e}");
        }
    }

    #[test]
    fn errors_quote_at_most_a_short_part_of_a_value() {
        let long = "x".repeat(1 << 20);
        for payload in [
            json!({"operation": long}),
            json!({"operation": "aggregate", "query": {"group_by": long}}),
        ] {
            let e = parse(payload).expect_err("unknown variant");
            assert!(e.0.len() < 400, "{} bytes", e.0.len());
        }
        let query = Query {
            group_by: GroupBy::Day,
            from: Some(long.clone()),
            to: None,
            limit: None,
        };
        let e = query.window().expect_err("not a time");
        assert!(
            e.0.contains("\"xxx") && e.0.contains("(1048576 bytes)"),
            "{e}"
        );
        assert!(e.0.len() < 400, "{} bytes", e.0.len());
        let now = OffsetDateTime::from_unix_timestamp(0).unwrap();
        assert!(day_window(Some(&long), now).unwrap_err().0.len() < 400);
        assert_eq!(quoted("2026-02-30"), "\"2026-02-30\"");
    }

    #[test]
    fn segments_come_in_pairs_and_in_range() {
        assert_eq!(segment(None, None), Ok(None));
        assert!(segment(Some(3), Some(4)).unwrap().is_some());
        for (s, t) in [
            (Some(4), Some(4)),
            (Some(0), Some(0)),
            (Some(0), None),
            (None, Some(2)),
        ] {
            assert!(segment(s, t).is_err(), "{s:?} {t:?}");
        }
    }

    #[test]
    fn a_daily_report_covers_one_utc_day() {
        let now = OffsetDateTime::from_unix_timestamp(1_763_800_000).unwrap(); // 2025-11-22
        let (day, query) = day_window(None, now).unwrap();
        assert_eq!(day.to_string(), "2025-11-21");
        assert_eq!(query.from.as_deref(), Some("2025-11-21T00:00:00Z"));
        assert_eq!(query.to.as_deref(), Some("2025-11-22T00:00:00Z"));
        assert!(day_window(Some("2025-13-01"), now).is_err());
        let (day, _) = day_window(Some("2024-02-29"), now).unwrap();
        assert_eq!(day.to_string(), "2024-02-29");
    }
}

//! Requests, exactly as a caller (a person, Step Functions, EventBridge) sends them.
//!
//! ```json
//! {"operation": "aggregate", "query": {"group_by": "customer", "from": "2026-11-01T00:00:00Z"}}
//! {"operation": "aggregate", "query": {"group_by": "day"}, "segment": 0, "total_segments": 4}
//! {"operation": "aggregate", "query": {"group_by": "customer"}, "segment": 0, "total_segments": 64, "run_id": "r-1"}
//! {"operation": "merge", "partials": [ ...answers of the segments... ]}
//! {"operation": "aggregate", "query": {"group_by": "currency"}, "day": "2026-11-21", "segment": 5, "total_segments": 8, "run_id": "r-2"}
//! {"operation": "merge_stored", "run_id": "r-1", "partials": [ ...references the segments returned... ]}
//! {"operation": "merge_stored", "run_id": "r-2", "partials": [ ... ], "report": {"day": "2026-11-21", "as_of": "2026-11-22T00:15:00Z"}}
//! {"operation": "daily_report", "scheduled_time": "2026-11-22T00:15:00Z"}
//! {"operation": "daily_report", "day": "2026-11-21"}
//! ```
//!
//! Unknown fields are refused: a typo (`"grop_by"`) must not silently mean "no grouping".

use crate::answer::Answer;
use crate::partial::StoredPartial;
use crate::query::{BadRequest, MAX_SEGMENTS, Query, Segment, bad};
use serde::Deserialize;

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
        /// Read one UTC day (`2026-11-21`) through the day index instead of
        /// scanning the table; a segment then reads one shard of one slice of
        /// the day (see `report.rs`). The query's window defaults to the day.
        #[serde(default)]
        day: Option<String>,
    },
    /// Combine the answers of every segment of one fan-out.
    Merge {
        /// The partial answers, one per segment, in any order.
        partials: Vec<Answer>,
    },
    /// Combine the stored partial answers of every segment of one fan-out.
    MergeStored {
        /// The fan-out's run (the execution name).
        run_id: String,
        /// The references the segments returned, one per segment, in any order.
        partials: Vec<StoredPartial>,
        /// Save the merged answer as this day's report item (a day's report
        /// fanned out by the state machine).
        #[serde(default)]
        report: Option<ReportOf>,
    },
    /// Aggregate UTC days by currency and store each as a report item: the
    /// day before `scheduled_time` and the days before it that may still
    /// receive late orders, or just `day` (see `report.rs`).
    DailyReport {
        /// One day to report (`2026-11-21`), computed again by hand.
        #[serde(default)]
        day: Option<String>,
        /// When the schedule fired (EventBridge Scheduler's
        /// `<aws.scheduler.scheduled-time>`, RFC 3339).
        #[serde(default)]
        scheduled_time: Option<String>,
    },
}

/// The report a merged fan-out is saved as.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReportOf {
    /// The reported day (`2026-11-21`).
    pub day: String,
    /// The time the report stands for (RFC 3339): the scheduled run's.
    pub as_of: String,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::query::{GroupBy, quoted};
    use serde_json::json;

    #[test]
    fn parses_each_operation() {
        let r = parse(json!({"operation": "aggregate", "query": {"group_by": "day"}})).unwrap();
        assert!(matches!(r, Request::Aggregate { segment: None, .. }));
        let r = parse(json!({"operation": "merge", "partials": []})).unwrap();
        assert!(matches!(r, Request::Merge { .. }));
        let r = parse(json!({"operation": "daily_report"})).unwrap();
        assert_eq!(
            r,
            Request::DailyReport {
                day: None,
                scheduled_time: None
            }
        );
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
}

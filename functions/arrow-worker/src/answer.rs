//! What the worker answers: groups with their statistics, and how the rows were counted.
//!
//! A partial answer (one scan segment) names its segment and carries every
//! group; a final answer (a full scan or a merge) carries at most the query's
//! `limit` groups, in key order, and says if it left some out. An answer
//! checks itself against Lambda's response limit before it is returned.

use crate::query::{BadRequest, MAX_LIMIT, Query, Segment};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::ops::RangeInclusive;

/// Largest answer: Lambda's limit on a synchronous response (6 MB).
pub const MAX_ANSWER_BYTES: usize = 6 * 1024 * 1024;

/// Why an answer cannot be the invocation's response.
#[derive(Debug, thiserror::Error)]
pub enum Unanswerable {
    /// The answer, as JSON, is larger than Lambda can return.
    #[error(
        "the answer is {0} bytes, more than Lambda's response limit ({MAX_ANSWER_BYTES}): set a lower query.limit, a coarser group_by or more segments"
    )]
    TooLarge(usize),
    /// The answer does not serialise (a bug: every field is plain data).
    #[error("answer not serialisable: {0}")]
    NotSerialisable(#[from] serde_json::Error),
}

/// Sum, min, max and mean of one column within a group.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Stats {
    /// Sum of the values.
    pub sum: u64,
    /// Smallest value.
    pub min: u64,
    /// Largest value.
    pub max: u64,
    /// `sum / count` (recomputed, never merged).
    pub mean: f64,
}

impl Stats {
    /// Statistics of a group of `count` values from its sum, min and max.
    pub fn new(count: u64, sum: u64, min: u64, max: u64) -> Self {
        Self {
            sum,
            min,
            max,
            mean: sum as f64 / count.max(1) as f64,
        }
    }

    /// Whether these can be the statistics of `count` values (at least one),
    /// each within `range`: `min <= max`, both in `range`, and the sum between
    /// `count x min` and `count x max` (all three equal for one value). The
    /// error says which part is impossible.
    pub fn check(&self, count: u64, range: RangeInclusive<u64>) -> Result<(), String> {
        let (sum, min, max) = (self.sum, self.min, self.max);
        let (low, high) = (range.start(), range.end());
        let spread = u128::from(count) * u128::from(min)..=u128::from(count) * u128::from(max);
        if min > max {
            Err(format!("min {min} is above max {max}"))
        } else if min < *low || max > *high {
            Err(format!(
                "min {min} and max {max} must be within {low} to {high}"
            ))
        } else if !spread.contains(&u128::from(sum)) || (count == 1 && min != max) {
            Err(format!(
                "sum {sum} is impossible for {count} values from {min} to {max}"
            ))
        } else {
            Ok(())
        }
    }
}

/// The money of a group's orders in one currency. Amounts in different
/// currencies are never added together.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Money {
    /// The ISO 4217 code (`EUR`).
    pub currency: String,
    /// The group's orders in this currency (never 0).
    pub count: u64,
    /// `total_cents` of those orders, in this currency's minor unit.
    pub total_cents: Stats,
}

/// One group of orders.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Group {
    /// The customer id, currency or UTC day (`2026-11-20`).
    pub key: String,
    /// Orders in the group (never 0): the sum of the counts in `money`.
    pub count: u64,
    /// Order totals per currency, in currency order: one entry per currency
    /// the group's orders were placed in (exactly one for `group_by: currency`).
    pub money: Vec<Money>,
    /// Units ordered (`total_quantity`) per order, over all the group's orders.
    pub quantity: Stats,
}

/// Items read but not counted, by reason. A malformed item never stops a scan.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Skipped {
    /// An attribute the analytics need is absent.
    pub missing_field: u64,
    /// An attribute has the wrong DynamoDB type or does not parse.
    pub wrong_type: u64,
    /// A value is outside what the order processor ever writes.
    pub out_of_range: u64,
}

impl Skipped {
    /// All skipped items (saturating: the counters of a merge come from its caller).
    pub fn total(&self) -> u64 {
        self.missing_field
            .saturating_add(self.wrong_type)
            .saturating_add(self.out_of_range)
    }

    /// Add another count to this one; on overflow, the name of the counter.
    pub fn add(&mut self, other: &Skipped) -> Result<(), Overflow> {
        add(
            &mut self.missing_field,
            other.missing_field,
            "rows.skipped.missing_field",
        )?;
        add(
            &mut self.wrong_type,
            other.wrong_type,
            "rows.skipped.wrong_type",
        )?;
        add(
            &mut self.out_of_range,
            other.out_of_range,
            "rows.skipped.out_of_range",
        )
    }
}

/// A row counter that does not fit in 64 bits; names the counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the counter {0} overflows 64 bits")]
pub struct Overflow(pub &'static str);

fn add(counter: &mut u64, more: u64, name: &'static str) -> Result<(), Overflow> {
    *counter = counter.checked_add(more).ok_or(Overflow(name))?;
    Ok(())
}

/// How the rows were counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rows {
    /// Items DynamoDB returned.
    pub scanned: u64,
    /// Well-formed orders inside the time window (counted in the groups).
    pub matched: u64,
    /// Malformed items, by reason.
    pub skipped: Skipped,
}

impl Rows {
    /// Add another count to this one; on overflow, the name of the counter.
    pub fn add(&mut self, other: &Rows) -> Result<(), Overflow> {
        add(&mut self.scanned, other.scanned, "rows.scanned")?;
        add(&mut self.matched, other.matched, "rows.matched")?;
        self.skipped.add(&other.skipped)
    }
}

/// How one invocation went (not part of the result; ignored by `merge`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Run {
    /// Scan pages read.
    pub pages: u64,
    /// Whether this was the process's first invocation.
    pub cold_start: bool,
    /// Milliseconds the handler took.
    pub duration_ms: f64,
    /// Minor page faults of the process during the invocation.
    pub minor_faults: u64,
    /// CPU milliseconds of the process during the invocation (all threads:
    /// the Rayon workers' too), whatever the CPU share made it wait.
    #[serde(default)]
    pub cpu_ms: f64,
    /// Milliseconds the invocation waited for the pre-warm (0 when it was done).
    pub prewarm_wait_ms: f64,
    /// Whether the pre-warm had finished when the work started.
    pub prewarmed: bool,
}

/// An answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Answer {
    /// The question answered.
    pub query: Query,
    /// The segment covered, for a partial answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub segment: Option<Segment>,
    /// The groups, in key order.
    pub groups: Vec<Group>,
    /// Groups found (more than `groups.len()` when truncated).
    pub groups_total: u64,
    /// Whether `limit` left groups out.
    pub truncated: bool,
    /// How the rows were counted.
    pub rows: Rows,
    /// How the invocation went.
    #[serde(default)]
    pub run: Run,
}

impl Answer {
    /// Assemble an answer from groups in key order. A partial answer keeps every
    /// group (its merge needs them all) up to [`MAX_LIMIT`]; a final one keeps
    /// the query's `limit`.
    pub fn new(
        query: Query,
        segment: Option<Segment>,
        mut groups: Vec<Group>,
        rows: Rows,
    ) -> Result<Self, BadRequest> {
        let groups_total = groups.len() as u64;
        let keep = match segment {
            Some(s) if groups.len() > MAX_LIMIT as usize => {
                return Err(BadRequest(format!(
                    "segment {} of {} has {} groups, more than one answer carries ({MAX_LIMIT}): use more segments or a coarser group_by",
                    s.segment,
                    s.total_segments,
                    groups.len()
                )));
            }
            Some(_) => groups.len(),
            None => query.limit()?,
        };
        let truncated = groups.len() > keep;
        groups.truncate(keep);
        Ok(Self {
            query,
            segment,
            groups,
            groups_total,
            truncated,
            rows,
            run: Run::default(),
        })
    }

    /// One segment's partial answer to be stored in S3 (see `partial.rs`):
    /// every group, without the cap of an inline answer (the scan's
    /// `MAX_ROWS` bounds it).
    pub fn stored_partial(query: Query, segment: Segment, groups: Vec<Group>, rows: Rows) -> Self {
        Self {
            query,
            segment: Some(segment),
            groups_total: groups.len() as u64,
            groups,
            truncated: false,
            rows,
            run: Run::default(),
        }
    }

    /// The invocation's response: this answer as JSON, with `extra` fields
    /// (where a report was saved, say), at most [`MAX_ANSWER_BYTES`] long.
    /// Group keys and numbers vary in length (a merge's come from the
    /// caller): measure, rather than let Lambda refuse the response.
    pub fn to_response(
        &self,
        extra: serde_json::Map<String, Value>,
    ) -> Result<Value, Unanswerable> {
        let mut body = serde_json::to_value(self)?;
        if let Some(fields) = body.as_object_mut() {
            fields.extend(extra);
        }
        let bytes = serde_json::to_vec(&body).map_or(usize::MAX, |text| text.len());
        if bytes > MAX_ANSWER_BYTES {
            return Err(Unanswerable::TooLarge(bytes));
        }
        Ok(body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::query::GroupBy;

    fn answer(key: String) -> Answer {
        let group = Group {
            key,
            count: 1,
            money: vec![Money {
                currency: "EUR".into(),
                count: 1,
                total_cents: Stats::new(1, 5, 5, 5),
            }],
            quantity: Stats::new(1, 1, 1, 1),
        };
        let query = Query {
            group_by: GroupBy::Customer,
            from: None,
            to: None,
            limit: None,
        };
        Answer::new(query, None, vec![group], Rows::default()).unwrap()
    }

    #[test]
    fn a_response_carries_the_report_id_and_stays_within_lambdas_limit() {
        let extra = serde_json::json!({"report_id": "daily/2026-11-03"});
        let extra = extra.as_object().cloned().unwrap_or_default();
        let body = answer("c".into()).to_response(extra).unwrap();
        assert_eq!(body["report_id"], "daily/2026-11-03");
        assert_eq!(body["groups"][0]["key"], "c");
        let none = serde_json::Map::new();
        assert!(answer("c".into()).to_response(none.clone()).unwrap()["report_id"].is_null());
        let err = answer("k".repeat(MAX_ANSWER_BYTES))
            .to_response(none)
            .unwrap_err();
        assert!(matches!(err, Unanswerable::TooLarge(n) if n > MAX_ANSWER_BYTES));
        assert!(err.to_string().contains("query.limit"), "{err}");
    }
}

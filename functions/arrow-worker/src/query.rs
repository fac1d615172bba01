//! The analytics vocabulary shared by requests and answers: the question
//! ([`Query`]: a grouping, a time window, a group limit), the part of the table
//! an answer covers ([`Segment`]), the bounds, and the refusal of a question
//! that cannot be answered as sent ([`BadRequest`]).
//!
//! `request.rs` (what callers send) and `answer.rs` (what the worker returns)
//! both build on this module, and neither imports the other's internals.

use serde::{Deserialize, Serialize};
use std::fmt;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// Most groups one answer carries: about 200 bytes each with one currency, 4 MB
/// in all; several currencies per group (about 100 bytes each), the longest
/// keys and numbers can pass Lambda's 6 MB response limit, which the answer
/// checks itself (`AnswerTooLarge`).
pub const MAX_LIMIT: u32 = 20_000;
/// Groups in a final answer when the query sets no `limit`.
pub const DEFAULT_LIMIT: u32 = 1_000;
/// DynamoDB's own bound on parallel scan segments.
pub const MAX_SEGMENTS: u32 = 1_000_000;

/// What to group the orders by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GroupBy {
    /// `customer_id`.
    Customer,
    /// The UTC day of `created_at` (`2026-11-20`).
    Day,
    /// `currency`.
    Currency,
}

/// An analytics question: the same in every partial and in their merge.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Query {
    /// The grouping.
    pub group_by: GroupBy,
    /// Orders created at or after this RFC 3339 time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// Orders created before this RFC 3339 time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    /// Most groups in the final answer (1 to [`MAX_LIMIT`], default [`DEFAULT_LIMIT`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
}

/// Which part of the table an aggregation covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Segment {
    /// This segment, `0..total_segments`.
    pub segment: u32,
    /// The fan-out's segment count.
    pub total_segments: u32,
}

/// A half-open window of creation times, in milliseconds since the epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// Inclusive lower bound.
    pub from_ms: Option<i64>,
    /// Exclusive upper bound.
    pub to_ms: Option<i64>,
}

impl Window {
    /// Whether the window lets every order through.
    pub fn is_unbounded(&self) -> bool {
        self.from_ms.is_none() && self.to_ms.is_none()
    }
}

/// A request that cannot be answered as sent. `Display` says what to change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadRequest(pub String);

impl fmt::Display for BadRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BadRequest {}

/// A [`BadRequest`] saying `message`.
pub(crate) fn bad(message: impl Into<String>) -> BadRequest {
    BadRequest(message.into())
}

/// Most characters of a caller's value quoted in an error.
const MAX_QUOTED_CHARS: usize = 32;

/// `value` for an error message: quoted, at most [`MAX_QUOTED_CHARS`] characters.
pub(crate) fn quoted(value: &str) -> String {
    let mut chars = value.chars();
    let head: String = chars.by_ref().take(MAX_QUOTED_CHARS).collect();
    match chars.next() {
        None => format!("{head:?}"),
        Some(_) => format!("{head:?}... ({} bytes)", value.len()),
    }
}

fn timestamp_ms(field: &str, value: &str) -> Result<i64, BadRequest> {
    let at = OffsetDateTime::parse(value, &Rfc3339).map_err(|e| {
        bad(format!(
            "query.{field} {} is not an RFC 3339 time (2026-11-20T09:15:00Z): {e}",
            quoted(value)
        ))
    })?;
    i64::try_from(at.unix_timestamp_nanos() / 1_000_000)
        .map_err(|_| bad(format!("query.{field} {} is out of range", quoted(value))))
}

impl Query {
    /// The validated creation-time window.
    pub fn window(&self) -> Result<Window, BadRequest> {
        let from_ms = self
            .from
            .as_deref()
            .map(|v| timestamp_ms("from", v))
            .transpose()?;
        let to_ms = self
            .to
            .as_deref()
            .map(|v| timestamp_ms("to", v))
            .transpose()?;
        if let (Some(from), Some(to)) = (from_ms, to_ms)
            && from > to
        {
            return Err(bad("query.from is after query.to"));
        }
        Ok(Window { from_ms, to_ms })
    }

    /// The validated group limit of a final answer.
    pub fn limit(&self) -> Result<usize, BadRequest> {
        match self.limit.unwrap_or(DEFAULT_LIMIT) {
            n @ 1..=MAX_LIMIT => Ok(n as usize),
            n => Err(bad(format!("query.limit {n} must be 1 to {MAX_LIMIT}"))),
        }
    }

    /// Validate everything at once.
    pub fn validate(&self) -> Result<Window, BadRequest> {
        self.limit()?;
        self.window()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_and_limits_are_checked() {
        let q = |from: &str, to: &str, limit| Query {
            group_by: GroupBy::Day,
            from: Some(from.into()),
            to: Some(to.into()),
            limit,
        };
        let w = q("1970-01-01T00:00:01Z", "1970-01-01T00:00:02+00:00", None)
            .validate()
            .unwrap();
        assert_eq!((w.from_ms, w.to_ms), (Some(1_000), Some(2_000)));
        assert!(
            q("yesterday", "2026-01-01T00:00:00Z", None)
                .window()
                .is_err()
        );
        assert!(
            q("2026-02-01T00:00:00Z", "2026-01-01T00:00:00Z", None)
                .window()
                .is_err()
        );
        assert!(
            q("1970-01-01T00:00:00Z", "1970-01-01T00:00:00Z", Some(0))
                .validate()
                .is_err()
        );
        let over = Some(MAX_LIMIT + 1);
        assert!(
            q("1970-01-01T00:00:00Z", "1970-01-01T00:00:00Z", over)
                .validate()
                .is_err()
        );
    }
}

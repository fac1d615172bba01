//! The Arrow worker's two fuzz targets, defined once for both fuzzing engines:
//! the proptest harness of the test suite and the coverage-guided `fuzz/`
//! crate beside it. Not part of the function's behaviour.
//!
//! - [`check_request`]: a payload as JSON text, through [`request::parse`], the
//!   checks of what parses (segment, window, limit, merge, day), and the real
//!   [`Handler`] over a small in-memory table, which must agree.
//! - [`check_items`]: bytes decoded by [`decode_items`] into DynamoDB items with
//!   any attribute types, names, numbers and strings, through
//!   [`columns::read`], [`columns::to_batch`] and the aggregation.
//!
//! A violated property comes back as `Err(what)`; a panic of the code under
//! test is left to propagate, so the engine sees it.

use crate::orders::{self, DAY_MS, MemoryStore, START_MS};
use arrow_worker::aggregate::aggregate;
use arrow_worker::answer::{Answer, Group, Money, Rows, Skipped, Stats};
use arrow_worker::columns::{self, Flaw, Item, PROJECTION, Row, day_of};
use arrow_worker::config::Config;
use arrow_worker::handler::Handler;
use arrow_worker::merge::merge;
use arrow_worker::partial;
use arrow_worker::query::{BadRequest, GroupBy, MAX_LIMIT, MAX_SEGMENTS, Query, Segment, Window};
use arrow_worker::report;
use arrow_worker::request::{self, Request};
use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::AttributeValue;
use lambda_runtime::{Context, LambdaEvent};
use serde_json::{Value, json};
use shared::orders::{MAX_AMOUNT_CENTS, MAX_ID_LEN, MAX_TOTAL_QUANTITY, attr};
use time::OffsetDateTime;

/// Names and values that steer a generator towards the request schema.
pub const VOCABULARY: &[&str] = &[
    "operation",
    "aggregate",
    "merge",
    "daily_report",
    "query",
    "group_by",
    "customer",
    "day",
    "currency",
    "from",
    "to",
    "limit",
    "segment",
    "total_segments",
    "partials",
    "groups",
    "groups_total",
    "truncated",
    "rows",
    "key",
    "count",
    "total_cents",
    "quantity",
    "money",
    "sum",
    "min",
    "max",
    "mean",
    "2026-11-20T09:15:00Z",
    "2026-11-21",
];

/// The sample events' payloads, and a merge of two partial answers.
pub fn request_seeds(events: &[Value]) -> Vec<Vec<u8>> {
    let mut seeds: Vec<Vec<u8>> = events
        .iter()
        .filter_map(|event| serde_json::to_vec(event).ok())
        .collect();
    seeds.extend(merge_seed());
    seeds
}

fn merge_seed() -> Option<Vec<u8>> {
    let query = Query {
        group_by: GroupBy::Currency,
        from: None,
        to: None,
        limit: Some(2),
    };
    let group = |key: &str, count, sum| Group {
        key: key.into(),
        count,
        money: vec![Money {
            currency: key.into(),
            count,
            total_cents: Stats::new(count, sum, sum / count, sum / count),
        }],
        quantity: Stats::new(count, count, 1, 1),
    };
    let partial = |segment, groups: Vec<Group>| {
        let segment = Segment {
            segment,
            total_segments: 2,
        };
        let matched = groups.iter().map(|g| g.count).sum();
        let rows = Rows {
            scanned: matched,
            matched,
            ..Rows::default()
        };
        Answer::new(query.clone(), Some(segment), groups, rows).ok()
    };
    let partials = [
        partial(1, vec![group("EUR", 2, 10), group("USD", 1, 5)])?,
        partial(0, vec![group("EUR", 1, 3), group("JPY", 4, 40)])?,
    ];
    serde_json::to_vec(&json!({"operation": "merge", "partials": partials})).ok()
}

/// The "now" of a daily report without a day, in the pure checks.
const NOW_S: i64 = 1_795_338_000;

/// Check one request payload given as JSON text.
pub fn check_request(data: &[u8]) -> Result<(), String> {
    // The runtime decodes the payload; text that is not JSON never gets here.
    let Ok(payload) = serde_json::from_slice::<Value>(data) else {
        return Ok(());
    };
    let parsed = request::parse(payload.clone());
    let stored_merge = matches!(parsed, Ok(Request::MergeStored { .. }));
    let verdict = match parsed {
        Ok(request) => validated(request)?,
        Err(e) => Err(e.0),
    };
    if let Err(message) = &verdict {
        non_empty(message)?;
    }
    let config = Config::from_env(&[("TABLE_NAME", "orders"), ("REPORTS_TABLE", "reports")])
        .map_err(|e| e.to_string())?;
    let handler = Handler::new(
        MemoryStore::new(orders::items(20, 5, 1), 4),
        config,
        2,
        None,
    );
    // The handler's deadline needs tokio's timer.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .map_err(|e| e.to_string())?;
    let answer = runtime.block_on(handler.handle(LambdaEvent::new(payload, Context::default())));
    if stored_merge {
        // The store holds no objects: every stored merge fails, and says why.
        return match answer {
            Ok(_) => Err("a merge of stored partials answered without any stored".into()),
            Err(d) => non_empty(&d.error_message),
        };
    }
    match (answer, verdict) {
        (Ok(_), Ok(())) => Ok(()),
        (Err(d), Err(message))
            if d.error_type == "InvalidRequest" && d.error_message == message =>
        {
            Ok(())
        }
        (answer, verdict) => Err(format!(
            "the handler answered {:?} where the checks say {verdict:?}",
            answer.map(|_| "an answer")
        )),
    }
}

fn non_empty(message: &str) -> Result<(), String> {
    if message.trim().is_empty() {
        Err("an error without a message".into())
    } else {
        Ok(())
    }
}

/// A request accepted, or refused with this message.
type Verdict = Result<(), String>;

/// An aggregate request's checks after its day's: segment, run id, query.
fn aggregate_checked(
    query: Query,
    segment: Result<Option<Segment>, BadRequest>,
    run_id: Option<String>,
) -> Result<Verdict, String> {
    match (segment, run_id) {
        (Err(e), _) => Ok(Err(e.0)),
        (Ok(Some(s)), _) if s.segment >= s.total_segments || s.total_segments > MAX_SEGMENTS => {
            Err(format!("segment {s:?} passed"))
        }
        (Ok(None), Some(_)) => Ok(Err(
            "run_id goes with segment and total_segments: it names a fan-out".into(),
        )),
        (Ok(Some(_)), Some(run_id)) => match partial::check_run_id(&run_id) {
            Err(e) => Ok(Err(e.0)),
            Ok(()) => query_checked(&query),
        },
        (Ok(_), None) => query_checked(&query),
    }
}

/// The checks a parsed request must pass before work starts, in the worker's
/// order: the verdict, or `Err` when what passed breaks an invariant.
fn validated(request: Request) -> Result<Verdict, String> {
    match request {
        Request::Aggregate {
            query,
            segment,
            total_segments,
            run_id,
            day,
        } => {
            let segment = request::segment(segment, total_segments);
            let query = match (day.as_deref().map(report::parse_day).transpose(), &segment) {
                (_, Err(_)) | (Ok(None), _) => query,
                (Err(e), Ok(_)) => return Ok(Err(e.0)),
                (Ok(Some(day)), Ok(segment)) => {
                    let source = segment.map(|s| report::segment_source(day, s)).transpose();
                    match (report::within_day(query, day), source) {
                        (Err(e), _) | (_, Err(e)) => return Ok(Err(e.0)),
                        (Ok(query), Ok(_)) => query,
                    }
                }
            };
            aggregate_checked(query, segment, run_id)
        }
        // Checked in `check_request`: they need stored objects.
        Request::MergeStored { .. } => Ok(Ok(())),
        Request::Merge { partials } => match merge(partials) {
            Err(e) => Ok(Err(e.0)),
            Ok(answer) => merged_ok(&answer).map(Ok),
        },
        Request::DailyReport {
            day,
            scheduled_time,
        } => {
            let now = OffsetDateTime::from_unix_timestamp(NOW_S).map_err(|e| e.to_string())?;
            let plan = match report::plan(day.as_deref(), scheduled_time.as_deref(), now, 2) {
                Err(e) => return Ok(Err(e.0)),
                Ok(plan) => plan,
            };
            for day in &plan.days {
                let query = report::query(*day).map_err(|e| e.0)?;
                match query.validate() {
                    Ok(Window {
                        from_ms: Some(from),
                        to_ms: Some(to),
                    }) if to - from == DAY_MS => {}
                    other => return Err(format!("a day's window is {other:?}")),
                }
            }
            Ok(Ok(()))
        }
    }
}

/// A query's window and limit: refused, or within bounds.
fn query_checked(query: &Query) -> Result<Verdict, String> {
    let window = match query.validate() {
        Err(e) => return Ok(Err(e.0)),
        Ok(window) => window,
    };
    let limit = query.limit().map_err(|e| e.0)?;
    let ordered = match (window.from_ms, window.to_ms) {
        (Some(from), Some(to)) => from <= to,
        _ => true,
    };
    if ordered && (1..=MAX_LIMIT as usize).contains(&limit) {
        Ok(Ok(()))
    } else {
        Err(format!("window {window:?} and limit {limit} passed"))
    }
}

/// A merged answer is final, in key order, within its limit, and says so.
fn merged_ok(answer: &Answer) -> Result<(), String> {
    let limit = answer.query.limit().map_err(|e| e.0)?;
    let in_order = answer.groups.windows(2).all(|w| w[0].key < w[1].key);
    let shown = answer.groups.len() as u64;
    let consistent = answer.segment.is_none()
        && in_order
        && answer.groups.len() <= limit
        && answer.groups_total >= shown
        && answer.truncated == (answer.groups_total > shown);
    if consistent {
        Ok(())
    } else {
        Err("a merged answer breaks its invariants".into())
    }
}

/// Most items one input decodes to.
pub const MAX_ITEMS_PER_INPUT: usize = 64;
/// How deep lists and maps nest.
const MAX_DEPTH: u8 = 3;
/// Attribute names an item byte can pick (the rest are spelled out).
const NAMES: [&str; 6] = [
    PROJECTION[0],
    PROJECTION[1],
    PROJECTION[2],
    PROJECTION[3],
    PROJECTION[4],
    attr::ORDER_ID,
];
/// Name bytes at or above this spell a name out; below, they pick from [`NAMES`].
const SPELLED_NAME: u8 = 0xC0;
/// Text length bytes at or above this pick an odd string instead.
const ODD_TEXT: u8 = 0xF0;

/// Most bytes of text one input may decode to: a short input cannot make
/// the decoder allocate without bound through the long odd strings.
const TEXT_BUDGET: usize = 256 * 1024;

/// Reads fuzz bytes; past the end every byte is 0.
struct Reader<'a> {
    data: &'a [u8],
    text_left: usize,
}

impl Reader<'_> {
    fn byte(&mut self) -> u8 {
        let (first, rest) = self
            .data
            .split_first()
            .map_or((0, &[][..]), |(b, r)| (*b, r));
        self.data = rest;
        first
    }

    fn bytes(&mut self, n: usize) -> &[u8] {
        let (taken, rest) = self.data.split_at(n.min(self.data.len()));
        self.data = rest;
        taken
    }

    fn text(&mut self) -> String {
        let text = match self.byte() {
            n @ ODD_TEXT.. => odd_text(n - ODD_TEXT),
            n => String::from_utf8_lossy(self.bytes(usize::from(n))).into_owned(),
        };
        self.spend(text)
    }

    fn spend(&mut self, text: String) -> String {
        match self.text_left.checked_sub(text.len()) {
            Some(left) => {
                self.text_left = left;
                text
            }
            None => String::new(),
        }
    }

    fn number(&mut self) -> String {
        let number = odd_number(self.byte());
        self.spend(number)
    }

    fn ms(&mut self) -> Option<i64> {
        let pick = self.byte();
        (pick != 0).then(|| odd_number(pick).parse().unwrap_or(START_MS))
    }

    fn value(&mut self, depth: u8) -> AttributeValue {
        let nested = depth < MAX_DEPTH;
        match self.byte() % 10 {
            0 => AttributeValue::S(self.text()),
            1 => AttributeValue::N(self.text()),
            2 => AttributeValue::N(self.number()),
            3 => AttributeValue::Bool(self.byte() % 2 == 1),
            5 => {
                let n = usize::from(self.byte());
                AttributeValue::B(Blob::new(self.bytes(n)))
            }
            6 => AttributeValue::Ss((0..self.byte() % 4).map(|_| self.text()).collect()),
            7 => AttributeValue::Ns((0..self.byte() % 4).map(|_| self.number()).collect()),
            8 if nested => AttributeValue::L(
                (0..self.byte() % 4)
                    .map(|_| self.value(depth + 1))
                    .collect(),
            ),
            9 if nested => AttributeValue::M(self.item(depth + 1)),
            _ => AttributeValue::Null(true),
        }
    }

    fn item(&mut self, depth: u8) -> Item {
        (0..self.byte() % 8)
            .map(|_| {
                let name = match self.byte() {
                    SPELLED_NAME.. => self.text(),
                    pick => NAMES[usize::from(pick) % NAMES.len()].to_owned(),
                };
                (name, self.value(depth))
            })
            .collect()
    }
}

/// Strings a text byte can pick: empty, limits and one past them, case,
/// non-ASCII, NUL, and long.
fn odd_text(pick: u8) -> String {
    match pick % 8 {
        0 => String::new(),
        1 => "c".repeat(MAX_ID_LEN),
        2 => "c".repeat(MAX_ID_LEN + 1),
        3 => "eur".into(),
        4 => "€UR".into(),
        5 => "EU\u{0}".into(),
        6 => "ü".repeat(20_000),
        _ => "9".repeat(60_000),
    }
}

/// Number texts a number byte can pick: the type limits and one past them,
/// the order schema's limits and one past them, the range of dates, and texts
/// that are not DynamoDB numbers or not integers.
fn odd_number(pick: u8) -> String {
    match pick % 24 {
        0 => "0".into(),
        1 => "1".into(),
        2 => "-1".into(),
        3 => i64::MIN.to_string(),
        4 => i64::MAX.to_string(),
        5 => (i128::from(i64::MAX) + 1).to_string(),
        6 => u64::MAX.to_string(),
        7 => i128::MAX.to_string(),
        8 => format!("{}0", i128::MAX),
        9 => MAX_AMOUNT_CENTS.to_string(),
        10 => (MAX_AMOUNT_CENTS + 1).to_string(),
        11 => MAX_TOTAL_QUANTITY.to_string(),
        12 => (MAX_TOTAL_QUANTITY + 1).to_string(),
        13 => "253402300799999".into(),  // 9999-12-31T23:59:59.999Z
        14 => "253402300800000".into(),  // year 10000
        15 => "-377705116800000".into(), // -9999-01-01
        16 => "-377705116800001".into(),
        17 => "1.5".into(),
        18 => "1e3".into(),
        19 => "-0".into(),
        20 => "+5".into(),
        21 => " 5".into(),
        22 => (START_MS + DAY_MS / 2).to_string(),
        _ => "9".repeat(4_096),
    }
}

/// Decode fuzz bytes into a grouping, a time window and items. Every byte
/// string decodes. Layout: grouping byte, `from` and `to` bytes (0 = none,
/// else a time picked by [`odd_number`]), then items until the bytes run out
/// (at most [`MAX_ITEMS_PER_INPUT`]): an attribute count, then per attribute a
/// name byte (below 0xC0 picks a known name, else a text follows) and a type
/// tag (`% 10`: S, N, N picked, BOOL, NULL, B, SS, NS, L, M) with its payload.
/// A text is a length byte and that many bytes (lossy UTF-8), or, from 0xF0,
/// a pick of [`odd_text`]; past [`TEXT_BUDGET`] bytes of text, texts are empty.
pub fn decode_items(data: &[u8]) -> (GroupBy, Window, Vec<Item>) {
    let mut reader = Reader {
        data,
        text_left: TEXT_BUDGET,
    };
    let group_by =
        [GroupBy::Customer, GroupBy::Day, GroupBy::Currency][usize::from(reader.byte() % 3)];
    let (from_ms, to_ms) = match (reader.ms(), reader.ms()) {
        (Some(a), Some(b)) => (Some(a.min(b)), Some(a.max(b))),
        other => other,
    };
    let mut items = Vec::new();
    while !reader.data.is_empty() && items.len() < MAX_ITEMS_PER_INPUT {
        items.push(reader.item(0));
    }
    (group_by, Window { from_ms, to_ms }, items)
}

/// The bytes [`decode_items`] turns into `items` (string and number
/// attributes only; at most 7 per item, texts up to 239 bytes), grouped by
/// `group_by`, with no window.
pub fn encode_items(group_by: GroupBy, items: &[Item]) -> Vec<u8> {
    let mut out = vec![group_by as u8, 0, 0];
    let text = |out: &mut Vec<u8>, text: &str| {
        let text = &text.as_bytes()[..text.len().min(usize::from(ODD_TEXT) - 1)];
        out.push(text.len() as u8);
        out.extend_from_slice(text);
    };
    for item in items {
        let mut attributes: Vec<_> = item
            .iter()
            .filter(|(_, v)| v.is_s() || v.is_n())
            .take(7)
            .collect();
        attributes.sort_by_key(|(name, _)| name.as_str());
        out.push(attributes.len() as u8);
        for (name, value) in attributes {
            match NAMES.iter().position(|known| known == name) {
                Some(pick) => out.push(pick as u8),
                None => {
                    out.push(SPELLED_NAME);
                    text(&mut out, name);
                }
            }
            let (tag, value) = match value {
                AttributeValue::S(s) => (0, s),
                AttributeValue::N(n) => (1, n),
                _ => continue,
            };
            out.push(tag);
            text(&mut out, value);
        }
    }
    out
}

/// Sample orders as stored, by each grouping, and items at the limits.
pub fn item_seeds() -> Vec<Vec<u8>> {
    let mut edge = vec![
        orders::order_item("c", "EUR", 0, 0, 1),
        orders::order_item(
            &"c".repeat(MAX_ID_LEN),
            "JPY",
            -1,
            MAX_AMOUNT_CENTS,
            MAX_TOTAL_QUANTITY,
        ),
        orders::order_item("c", "eur", i64::MAX, MAX_AMOUNT_CENTS + 1, 0),
    ];
    edge[2].remove(attr::TOTAL_QUANTITY);
    [GroupBy::Customer, GroupBy::Day, GroupBy::Currency]
        .into_iter()
        .enumerate()
        .flat_map(|(i, group_by)| {
            [
                encode_items(group_by, &orders::items(6, 3, i as u64)),
                encode_items(group_by, &edge),
            ]
        })
        .collect()
}

/// Check one input of DynamoDB items given as bytes (see [`decode_items`]).
pub fn check_items(data: &[u8]) -> Result<(), String> {
    let (group_by, window, items) = decode_items(data);
    let mut rows = 0;
    let mut expected = Skipped::default();
    for item in &items {
        match columns::read(item, group_by) {
            Ok(row) => {
                row_ok(&row, group_by)?;
                rows += 1;
            }
            Err(Flaw::Missing) => expected.missing_field += 1,
            Err(Flaw::WrongType) => expected.wrong_type += 1,
            Err(Flaw::OutOfRange) => expected.out_of_range += 1,
        }
    }
    let (batch, skipped) = columns::to_batch(&items, group_by);
    if batch.num_rows() != rows || skipped != expected || batch.schema() != columns::schema() {
        return Err(format!(
            "to_batch made {} rows and skipped {skipped:?}; read says {rows} and {expected:?}",
            batch.num_rows()
        ));
    }
    let (groups, matched) = aggregate(vec![batch], window).map_err(|e| e.to_string())?;
    let counted: u64 = groups.iter().map(|g| g.count).sum();
    let stats_ok = |s: &Stats| s.min <= s.max && s.min as f64 <= s.mean && s.mean <= s.max as f64;
    let money_ok = |g: &Group| {
        let in_order = g.money.windows(2).all(|w| w[0].currency < w[1].currency);
        let orders: u64 = g.money.iter().map(|m| m.count).sum();
        in_order
            && orders == g.count
            && g.money
                .iter()
                .all(|m| m.count > 0 && stats_ok(&m.total_cents))
    };
    let groups_ok = groups.windows(2).all(|w| w[0].key < w[1].key)
        && groups
            .iter()
            .all(|g| g.count > 0 && money_ok(g) && stats_ok(&g.quantity));
    if counted != matched || matched > rows as u64 || !groups_ok {
        return Err(format!(
            "aggregation: {matched} matched of {rows} rows, {counted} counted in groups"
        ));
    }
    Ok(())
}

/// A row read from an item is within what the order processor writes.
fn row_ok(row: &Row, group_by: GroupBy) -> Result<(), String> {
    let key_ok = match group_by {
        GroupBy::Customer => (1..=MAX_ID_LEN).contains(&row.key.len()),
        GroupBy::Currency => row.key.len() == 3 && row.key.bytes().all(|b| b.is_ascii_uppercase()),
        GroupBy::Day => day_of(row.created_at_ms).as_deref() == Some(row.key.as_str()),
    };
    if key_ok
        && columns::is_currency_code(&row.currency)
        && (group_by != GroupBy::Currency || row.key == row.currency)
        && row.total_cents <= MAX_AMOUNT_CENTS
        && (1..=MAX_TOTAL_QUANTITY).contains(&row.quantity)
    {
        Ok(())
    } else {
        Err(format!("a row breaks the order limits: {row:?}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item_of(pairs: &[(&str, AttributeValue)]) -> Item {
        pairs
            .iter()
            .map(|(name, value)| ((*name).to_owned(), value.clone()))
            .collect()
    }

    #[test]
    fn encoded_items_decode_to_themselves() {
        let items = orders::items(5, 2, 7);
        let (group_by, window, decoded) = decode_items(&encode_items(GroupBy::Day, &items));
        assert_eq!(group_by, GroupBy::Day);
        assert!(window.is_unbounded());
        assert_eq!(decoded, items);
        let odd = item_of(&[("x y", AttributeValue::N("1".into()))]);
        assert_eq!(
            decode_items(&encode_items(GroupBy::Currency, std::slice::from_ref(&odd))).2,
            [odd]
        );
    }

    #[test]
    fn seeds_pass_the_checks() {
        for seed in item_seeds() {
            check_items(&seed).expect("checks hold");
        }
        let events = [json!({"operation": "aggregate", "query": {"group_by": "day"}})];
        for seed in request_seeds(&events) {
            check_request(&seed).expect("checks hold");
        }
        for data in [&b""[..], b"\xff\xff\xff", b"{}", b"null"] {
            check_items(data).expect("checks hold");
            check_request(data).expect("checks hold");
        }
    }

    #[test]
    fn a_row_outside_the_limits_is_reported() {
        let row = Row {
            key: "eur".into(),
            currency: "EUR".into(),
            created_at_ms: 0,
            total_cents: 1,
            quantity: 1,
        };
        assert!(row_ok(&row, GroupBy::Currency).is_err());
        assert!(row_ok(&row, GroupBy::Customer).is_ok());
    }
}

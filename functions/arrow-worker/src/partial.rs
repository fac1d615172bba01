//! Partial answers stored in S3: one object per scan segment of a fan-out, in
//! the Arrow IPC stream format, and the small reference ([`StoredPartial`])
//! that travels through Step Functions instead of the data.
//!
//! The stream holds one row per group and currency (the group's own columns
//! repeated on each of its currencies' rows, in key then currency order), and
//! the answer's other fields as JSON in the schema's metadata. Objects come
//! back from a bucket: [`open`] checks the SHA-256 the reference carries
//! before decoding (arrow-ipc panics on some corrupt buffers), [`decode`]
//! checks types and shape, and `merge` then checks the groups as it checks
//! inline partials.

use crate::answer::{Answer, Group, Money, Rows, Stats};
use crate::query::{BadRequest, Query, Segment, bad, quoted};
use arrow_array::builder::{StringBuilder, UInt64Builder};
use arrow_array::{Array, ArrayRef, RecordBatch, StringArray, UInt64Array};
use arrow_ipc::reader::StreamReader;
use arrow_ipc::writer::StreamWriter;
use arrow_schema::{DataType, Field, Schema};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::Arc;

/// Where the partials of fan-out run `run_id` are stored.
pub const PARTIALS_PREFIX: &str = "partials/";
/// Where answers too large for a response are stored (`answers/<request id>.json`).
pub const ANSWERS_PREFIX: &str = "answers/";
/// Most characters of a run id (a Step Functions execution name).
pub const MAX_RUN_ID_CHARS: usize = 80;
/// Rows per record batch in a stored partial.
const BATCH_ROWS: usize = 16_384;
/// The schema metadata naming this layout.
const FORMAT_KEY: &str = "format";
const FORMAT: &str = "orders-partial/1";
/// The schema metadata holding the answer's fields other than its groups.
const HEADER_KEY: &str = "answer";

/// What the state machine passes between states for one segment: enough to
/// find the partial (with the run id the merge is given once) and to check it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoredPartial {
    /// The segment this partial covers.
    pub segment: u32,
    /// The fan-out's segment count.
    pub total_segments: u32,
    /// The invocation that wrote it (random, one per invocation): every
    /// attempt at a segment writes an object of its own, created only if new,
    /// so an attempt Step Functions gave up on can never replace the partial
    /// a reference names.
    pub attempt: String,
    /// Groups in the partial.
    pub groups: u64,
    /// Size of the stored object.
    pub bytes: u64,
    /// SHA-256 of the stored object, in hex.
    pub sha256: String,
}

/// The SHA-256 of `bytes`, in hex.
pub fn sha256(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(bytes))
}

/// The partial answer `stored` (of run `run_id`) refers to, from the object's `bytes`.
pub fn open(run_id: &str, stored: &StoredPartial, bytes: &[u8]) -> Result<Answer, BadRequest> {
    let key = stored.key(run_id);
    if bytes.len() as u64 != stored.bytes || sha256(bytes) != stored.sha256 {
        return Err(bad(format!(
            "{key} is not the object its segment stored (size or SHA-256 differ)"
        )));
    }
    let answer = decode(bytes).map_err(|e| bad(format!("{key}: {e}")))?;
    let named = Segment {
        segment: stored.segment,
        total_segments: stored.total_segments,
    };
    if answer.segment != Some(named) {
        return Err(bad(format!("{key} holds another segment's answer")));
    }
    Ok(answer)
}

impl StoredPartial {
    /// The object key of this partial of run `run_id`.
    pub fn key(&self, run_id: &str) -> String {
        key(run_id, self.segment, self.total_segments, &self.attempt)
    }
}

/// The object key of `segment` of `total_segments` in run `run_id`, written by `attempt`.
pub fn key(run_id: &str, segment: u32, total_segments: u32, attempt: &str) -> String {
    format!(
        "{PARTIALS_PREFIX}{}/{segment:07}-of-{total_segments}-{}.arrow",
        key_part(run_id),
        key_part(attempt)
    )
}

/// `text` as one part of an object key: A-Z a-z 0-9 `-` `_` as they are,
/// every other byte (UTF-8) as `~` and its two hex digits. Two texts never
/// give the same part, and no part climbs out of its prefix (`..`, `/`).
/// Also the request id of a stored answer (`answers/<id>.json`).
pub(crate) fn key_part(text: &str) -> String {
    let mut part = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_') {
            part.push(char::from(byte));
        } else {
            part.push_str(&format!("~{byte:02X}"));
        }
    }
    part
}

/// A new attempt id: 16 random hex digits.
pub fn new_attempt() -> String {
    format!("{:016x}", fastrand::u64(..))
}

/// Refuse a run id Step Functions cannot have given: an execution name is
/// 1 to 80 characters (any script, `@ + = ( )` included) and holds no control
/// characters. Every such name is a run id; its key part is escaped.
pub fn check_run_id(run_id: &str) -> Result<(), BadRequest> {
    let chars = run_id.chars().count();
    if (1..=MAX_RUN_ID_CHARS).contains(&chars) && !run_id.chars().any(char::is_control) {
        Ok(())
    } else {
        Err(bad(format!(
            "run_id {} must be 1 to {MAX_RUN_ID_CHARS} characters without control characters: the execution name",
            quoted(run_id)
        )))
    }
}

/// The answer without its groups (kept in the schema metadata).
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Header {
    query: Query,
    segment: Option<Segment>,
    groups_total: u64,
    rows: Rows,
}

const COLUMNS: [(&str, DataType); 10] = [
    ("key", DataType::Utf8),
    ("count", DataType::UInt64),
    ("quantity_sum", DataType::UInt64),
    ("quantity_min", DataType::UInt64),
    ("quantity_max", DataType::UInt64),
    ("currency", DataType::Utf8),
    ("currency_count", DataType::UInt64),
    ("cents_sum", DataType::UInt64),
    ("cents_min", DataType::UInt64),
    ("cents_max", DataType::UInt64),
];

fn fields() -> Vec<Field> {
    COLUMNS
        .iter()
        .map(|(name, kind)| Field::new(*name, kind.clone(), false))
        .collect()
}

/// Builders of one batch.
struct Builders {
    keys: StringBuilder,
    currencies: StringBuilder,
    numbers: [UInt64Builder; 8],
    rows: usize,
}

impl Builders {
    fn new() -> Self {
        Self {
            keys: StringBuilder::new(),
            currencies: StringBuilder::new(),
            numbers: std::array::from_fn(|_| UInt64Builder::new()),
            rows: 0,
        }
    }

    fn push(&mut self, group: &Group, money: &Money) {
        self.keys.append_value(&group.key);
        self.currencies.append_value(&money.currency);
        let q = &group.quantity;
        let c = &money.total_cents;
        let values = [
            group.count,
            q.sum,
            q.min,
            q.max,
            money.count,
            c.sum,
            c.min,
            c.max,
        ];
        for (builder, value) in self.numbers.iter_mut().zip(values) {
            builder.append_value(value);
        }
        self.rows += 1;
    }

    fn finish(&mut self, schema: &Arc<Schema>) -> Result<RecordBatch, String> {
        let mut numbers = self
            .numbers
            .iter_mut()
            .map(|b| Arc::new(b.finish()) as ArrayRef);
        let mut next = || numbers.next().ok_or("too few number columns");
        let columns: Vec<ArrayRef> = vec![
            Arc::new(self.keys.finish()),
            next()?,
            next()?,
            next()?,
            next()?,
            Arc::new(self.currencies.finish()),
            next()?,
            next()?,
            next()?,
            next()?,
        ];
        self.rows = 0;
        RecordBatch::try_new(schema.clone(), columns).map_err(|e| e.to_string())
    }
}

/// `answer` (one segment's partial) as an Arrow IPC stream.
pub fn encode(answer: &Answer) -> Result<Vec<u8>, String> {
    let header = Header {
        query: answer.query.clone(),
        segment: answer.segment,
        groups_total: answer.groups_total,
        rows: answer.rows,
    };
    let header = serde_json::to_string(&header).map_err(|e| e.to_string())?;
    let metadata = HashMap::from([
        (FORMAT_KEY.to_owned(), FORMAT.to_owned()),
        (HEADER_KEY.to_owned(), header),
    ]);
    let schema = Arc::new(Schema::new_with_metadata(fields(), metadata));
    let mut writer = StreamWriter::try_new(Vec::new(), &schema).map_err(|e| e.to_string())?;
    let mut builders = Builders::new();
    for group in &answer.groups {
        for money in &group.money {
            builders.push(group, money);
            if builders.rows == BATCH_ROWS {
                let batch = builders.finish(&schema)?;
                writer.write(&batch).map_err(|e| e.to_string())?;
            }
        }
    }
    if builders.rows > 0 {
        let batch = builders.finish(&schema)?;
        writer.write(&batch).map_err(|e| e.to_string())?;
    }
    writer.finish().map_err(|e| e.to_string())?;
    writer.into_inner().map_err(|e| e.to_string())
}

fn column<T: 'static>(batch: &RecordBatch, i: usize) -> Result<&T, String> {
    let array = batch.column(i);
    if array.null_count() > 0 {
        return Err(format!("column {} has nulls", COLUMNS[i].0));
    }
    array
        .as_any()
        .downcast_ref::<T>()
        .ok_or_else(|| format!("column {} has the wrong type", COLUMNS[i].0))
}

/// Append the rows of `batch` to `groups`.
fn read_batch(batch: &RecordBatch, groups: &mut Vec<Group>) -> Result<(), String> {
    let keys: &StringArray = column(batch, 0)?;
    let currencies: &StringArray = column(batch, 5)?;
    let mut numbers = Vec::with_capacity(8);
    for i in [1, 2, 3, 4, 6, 7, 8, 9] {
        numbers.push(column::<UInt64Array>(batch, i)?);
    }
    for row in 0..batch.num_rows() {
        let n = |i: usize| numbers[i].value(row);
        let money = Money {
            currency: currencies.value(row).to_owned(),
            count: n(4),
            total_cents: Stats::new(n(4), n(5), n(6), n(7)),
        };
        let (key, count) = (keys.value(row), n(0));
        let quantity = Stats::new(count, n(1), n(2), n(3));
        match groups.last_mut() {
            Some(group) if group.key == key => {
                if group.count != count || group.quantity != quantity {
                    return Err(format!(
                        "group {} differs between its currency rows",
                        quoted(key)
                    ));
                }
                group.money.push(money);
            }
            _ => groups.push(Group {
                key: key.to_owned(),
                count,
                money: vec![money],
                quantity,
            }),
        }
    }
    Ok(())
}

/// The partial answer stored in `bytes`, an object written by [`encode`]
/// (check it with [`open`] first: a corrupt buffer can make arrow-ipc panic).
pub fn decode(bytes: &[u8]) -> Result<Answer, BadRequest> {
    let broken = |e: String| bad(format!("not a stored partial answer: {e}"));
    let reader = StreamReader::try_new(bytes, None).map_err(|e| broken(e.to_string()))?;
    let schema = reader.schema();
    if schema.metadata().get(FORMAT_KEY).map(String::as_str) != Some(FORMAT) {
        return Err(broken(format!("no {FORMAT_KEY}: {FORMAT} in its metadata")));
    }
    let expected = fields();
    if schema.fields().len() != expected.len()
        || schema
            .fields()
            .iter()
            .zip(&expected)
            .any(|(f, e)| f.name() != e.name() || f.data_type() != e.data_type())
    {
        return Err(broken("unexpected columns".into()));
    }
    let header: Header = schema
        .metadata()
        .get(HEADER_KEY)
        .ok_or_else(|| broken("no answer in its metadata".into()))
        .and_then(|text| serde_json::from_str(text).map_err(|e| broken(e.to_string())))?;
    let mut groups = Vec::new();
    for batch in reader {
        let batch = batch.map_err(|e| broken(e.to_string()))?;
        read_batch(&batch, &mut groups).map_err(broken)?;
    }
    if groups.len() as u64 != header.groups_total {
        return Err(broken(format!(
            "{} groups stored, {} announced",
            groups.len(),
            header.groups_total
        )));
    }
    Ok(Answer {
        query: header.query,
        segment: header.segment,
        groups,
        groups_total: header.groups_total,
        truncated: false,
        rows: header.rows,
        run: Default::default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::query::GroupBy;

    fn group(key: &str, currencies: &[&str]) -> Group {
        let count = currencies.len() as u64;
        Group {
            key: key.into(),
            count,
            money: currencies
                .iter()
                .map(|c| Money {
                    currency: (*c).into(),
                    count: 1,
                    total_cents: Stats::new(1, 7, 7, 7),
                })
                .collect(),
            quantity: Stats::new(count, count * 2, 2, 2),
        }
    }

    fn partial(groups: Vec<Group>) -> Answer {
        let query = Query {
            group_by: GroupBy::Customer,
            from: Some("2026-11-01T00:00:00Z".into()),
            to: None,
            limit: Some(5),
        };
        let matched = groups.iter().map(|g| g.count).sum();
        let rows = Rows {
            scanned: matched + 3,
            matched,
            ..Rows::default()
        };
        let segment = Segment {
            segment: 2,
            total_segments: 7,
        };
        Answer::new(query, Some(segment), groups, rows).unwrap()
    }

    #[test]
    fn a_partial_comes_back_as_it_was_stored() {
        // More rows than one batch holds, groups spanning a batch boundary.
        let groups: Vec<Group> = (0..BATCH_ROWS / 2 + 10)
            .map(|i| group(&format!("c{i:06}"), &["EUR", "JPY", "USD"][..1 + i % 3]))
            .collect();
        let answer = partial(groups);
        let bytes = encode(&answer).unwrap();
        assert_eq!(decode(&bytes).unwrap(), answer);
        let empty = partial(Vec::new());
        assert_eq!(decode(&encode(&empty).unwrap()).unwrap(), empty);
    }

    #[test]
    fn broken_objects_are_refused_without_panicking() {
        let bytes = encode(&partial(vec![group("a", &["EUR", "USD"])])).unwrap();
        for cut in [0, 1, 8, bytes.len() / 2, bytes.len() - 1] {
            let err = decode(&bytes[..cut]).expect_err("truncated");
            assert!(err.0.starts_with("not a stored partial answer"), "{err}");
        }
        let stored = StoredPartial {
            segment: 2,
            total_segments: 7,
            attempt: new_attempt(),
            groups: 1,
            bytes: bytes.len() as u64,
            sha256: sha256(&bytes),
        };
        assert_eq!(open("r", &stored, &bytes).unwrap().groups.len(), 1);
        let mut flipped = bytes.clone();
        for i in 0..flipped.len() {
            flipped[i] ^= 0x5a;
            let err = open("r", &stored, &flipped).expect_err("corrupt");
            assert!(err.0.contains("SHA-256"), "{err}");
            flipped[i] ^= 0x5a;
        }
        let other = StoredPartial {
            segment: 3,
            ..stored
        };
        let err = open("r", &other, &bytes).unwrap_err();
        assert!(err.0.contains("another segment"), "{err}");
        let mut lying = partial(vec![group("a", &["EUR"])]);
        lying.groups_total = 2;
        let err = decode(&encode(&lying).unwrap()).unwrap_err();
        assert!(err.0.contains("1 groups stored, 2 announced"), "{err}");
    }

    /// The longest execution name in 4-byte characters.
    fn longest_run_id() -> String {
        "\u{1D11E}".repeat(MAX_RUN_ID_CHARS)
    }

    #[test]
    fn the_references_of_a_thousand_segments_fit_in_one_state() {
        // The state the merge starts from: the fan-out's input (a thousand
        // segment numbers), the longest execution name once, and a thousand
        // references of a segment read to the bound of MAX_ROWS (9 digits of
        // groups) in objects of tens of GB.
        let worst = StoredPartial {
            segment: 999,
            total_segments: 1_000,
            attempt: new_attempt(),
            groups: 100_000_000,
            bytes: 99_999_999_999,
            sha256: sha256(b""),
        };
        let state = serde_json::json!({
            "query": {"group_by": "customer", "from": "2026-11-01T00:00:00Z", "to": "2026-12-01T00:00:00Z", "limit": 20_000},
            "total_segments": 1_000,
            "segments": (0..1_000).collect::<Vec<_>>(),
            "run_id": longest_run_id(),
            "partials": vec![worst; 1_000],
        });
        let bytes = state.to_string().len();
        assert!(
            bytes < 262_144,
            "{bytes} bytes: more than Step Functions' 256 KiB"
        );
    }

    #[test]
    fn every_execution_name_is_a_run_id_with_a_key_of_its_own() {
        let longest = longest_run_id();
        let names = [
            "a",
            "3f9c1f9e-6d1b-4a41-9d0e-1c1b6c0c2b55",
            "daily_2026.11.21",
            "a@b+c=d(e)",
            "bestellung-ü-注文",
            "a.b",
            "a~2Eb",
            longest.as_str(),
        ];
        let mut keys = std::collections::BTreeSet::new();
        for name in names {
            assert!(check_run_id(name).is_ok(), "{name}");
            let key = key(name, 999_999, 1_000_000, "ffffffffffffffff");
            assert!(
                key.len() <= 1_024,
                "{} bytes: over S3's key limit",
                key.len()
            );
            let run = &key[PARTIALS_PREFIX.len()..key.rfind('/').unwrap_or(0)];
            assert!(
                run.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_~".contains(&b)),
                "{key}"
            );
            assert!(keys.insert(key), "{name}: a key another name has");
        }
        let too_long = "x".repeat(MAX_RUN_ID_CHARS + 1);
        for bad in ["", "a\nb", "\u{7}", too_long.as_str()] {
            assert!(check_run_id(bad).is_err(), "{bad:?}");
        }
        assert_eq!(key("r", 3, 16, "a1"), "partials/r/0000003-of-16-a1.arrow");
        assert_eq!(
            key("../x", 3, 16, "a1"),
            "partials/~2E~2E~2Fx/0000003-of-16-a1.arrow"
        );
        assert!(key("r", 9, 16, "a") < key("r", 10, 16, "a"));
        assert_ne!(new_attempt(), new_attempt());
    }
}

//! Group and aggregate with Arrow compute kernels: filter the time window,
//! sort by the group key, split the sorted rows into runs of equal keys, and
//! take sum, min and max of each run's slice. No loop visits rows; the only
//! loop is over groups, and each step inside it is a kernel over a slice.

use crate::answer::{Group, Stats};
use crate::columns::{CREATED_AT_MS, KEY, QUANTITY, TOTAL_CENTS, schema};
use crate::query::Window;
use arrow_arith::aggregate::{max, min, sum_checked};
use arrow_arith::boolean::and;
use arrow_array::cast::AsArray;
use arrow_array::types::UInt64Type;
use arrow_array::{Int64Array, RecordBatch, UInt64Array};
use arrow_ord::cmp::{gt_eq, lt};
use arrow_ord::partition::partition;
use arrow_ord::sort::sort_to_indices;
use arrow_schema::ArrowError;
use arrow_select::concat::concat_batches;
use arrow_select::filter::filter_record_batch;
use arrow_select::take::take_record_batch;

/// Why an aggregation failed.
#[derive(Debug, thiserror::Error)]
pub enum AggregateError {
    /// A group's sum does not fit in 64 bits.
    #[error("the sum of {column} in group {key:?} overflows 64 bits")]
    Overflow {
        /// The column.
        column: &'static str,
        /// The group.
        key: String,
    },
    /// An Arrow kernel failed (a bug: the batches are built to fit).
    #[error("arrow: {0}")]
    Arrow(#[from] ArrowError),
}

/// The rows of `batch` created inside `window`.
fn within(batch: RecordBatch, window: Window) -> Result<RecordBatch, ArrowError> {
    let created = batch.column(CREATED_AT_MS);
    let mask = match (window.from_ms, window.to_ms) {
        (None, None) => return Ok(batch),
        (Some(from), None) => gt_eq(created, &Int64Array::new_scalar(from))?,
        (None, Some(to)) => lt(created, &Int64Array::new_scalar(to))?,
        (Some(from), Some(to)) => and(
            &gt_eq(created, &Int64Array::new_scalar(from))?,
            &lt(created, &Int64Array::new_scalar(to))?,
        )?,
    };
    filter_record_batch(&batch, &mask)
}

/// Count, sum, min and max of one group's slice of `column`.
fn stats(column: &UInt64Array, name: &'static str, key: &str) -> Result<Stats, AggregateError> {
    let overflow = || AggregateError::Overflow {
        column: name,
        key: key.to_owned(),
    };
    let sum = sum_checked(column).map_err(|_| overflow())?.unwrap_or(0);
    Ok(Stats::new(
        column.len() as u64,
        sum,
        min(column).unwrap_or(0),
        max(column).unwrap_or(0),
    ))
}

/// Aggregate `batches` (all in [`schema`]) within `window`: the groups in key
/// order, and the number of rows that matched the window. The batches are
/// consumed, so their memory is freed as soon as they are combined.
pub fn aggregate(
    batches: Vec<RecordBatch>,
    window: Window,
) -> Result<(Vec<Group>, u64), AggregateError> {
    let combined = concat_batches(&schema(), &batches)?;
    drop(batches);
    let rows = within(combined, window)?;
    let matched = rows.num_rows() as u64;
    if matched == 0 {
        return Ok((Vec::new(), 0));
    }
    let order = sort_to_indices(rows.column(KEY), None, None)?;
    let sorted = take_record_batch(&rows, &order)?;
    drop(rows);
    let runs = partition(&[sorted.column(KEY).clone()])?.ranges();
    let keys = sorted.column(KEY).as_string::<i32>();
    let totals = sorted.column(TOTAL_CENTS).as_primitive::<UInt64Type>();
    let quantities = sorted.column(QUANTITY).as_primitive::<UInt64Type>();
    let mut groups = Vec::with_capacity(runs.len());
    for run in runs {
        let len = run.end - run.start;
        let key = keys.value(run.start);
        groups.push(Group {
            key: key.to_owned(),
            count: len as u64,
            total_cents: stats(&totals.slice(run.start, len), "total_cents", key)?,
            quantity: stats(&quantities.slice(run.start, len), "total_quantity", key)?,
        });
    }
    Ok((groups, matched))
}

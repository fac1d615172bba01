//! Group and aggregate with Arrow compute kernels: filter the time window,
//! sort by group key then currency, split the sorted rows into runs of equal
//! (key, currency), and take sum, min and max of each run's slice. A group is
//! the consecutive runs of one key: its money per currency, its quantities
//! over all its rows. No loop visits rows; the only loop is over runs, and
//! each step inside it is a kernel over a slice.

use crate::answer::{Group, Money, Stats};
use crate::columns::{CREATED_AT_MS, CURRENCY, KEY, QUANTITY, TOTAL_CENTS, schema};
use crate::query::Window;
use arrow_arith::aggregate::{max, min, sum_checked};
use arrow_arith::boolean::and;
use arrow_array::cast::AsArray;
use arrow_array::types::UInt64Type;
use arrow_array::{Int64Array, RecordBatch, StringArray, UInt64Array};
use arrow_ord::cmp::{gt_eq, lt};
use arrow_ord::partition::partition;
use arrow_ord::sort::{SortColumn, lexsort_to_indices};
use arrow_schema::ArrowError;
use arrow_select::concat::concat_batches;
use arrow_select::filter::filter_record_batch;
use arrow_select::take::take_record_batch;
use std::ops::Range;

/// Why an aggregation failed.
#[derive(Debug, thiserror::Error)]
pub enum AggregateError {
    /// A group's sum does not fit in 64 bits.
    #[error("the sum of {column} in group {group} overflows 64 bits")]
    Overflow {
        /// The column.
        column: &'static str,
        /// The group (its key, and the currency for money).
        group: String,
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

/// Sum, min and max of the `rows` of `column`; `group` names the group if
/// the sum overflows.
fn stats(
    column: &UInt64Array,
    rows: &Range<usize>,
    name: &'static str,
    group: impl FnOnce() -> String,
) -> Result<Stats, AggregateError> {
    let slice = column.slice(rows.start, rows.len());
    let sum = sum_checked(&slice)
        .map_err(|_| AggregateError::Overflow {
            column: name,
            group: group(),
        })?
        .unwrap_or(0);
    Ok(Stats::new(
        rows.len() as u64,
        sum,
        min(&slice).unwrap_or(0),
        max(&slice).unwrap_or(0),
    ))
}

/// The sorted columns a group is read from.
struct Sorted<'a> {
    keys: &'a StringArray,
    currencies: &'a StringArray,
    totals: &'a UInt64Array,
    quantities: &'a UInt64Array,
}

impl Sorted<'_> {
    /// The money of one run of equal (key, currency).
    fn money(&self, run: &Range<usize>) -> Result<Money, AggregateError> {
        let currency = self.currencies.value(run.start);
        let group = || format!("{:?} ({currency})", self.keys.value(run.start));
        Ok(Money {
            currency: currency.to_owned(),
            count: run.len() as u64,
            total_cents: stats(self.totals, run, "total_cents", group)?,
        })
    }
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
    let by = |column| SortColumn {
        values: rows.column(column).clone(),
        options: None,
    };
    let order = lexsort_to_indices(&[by(KEY), by(CURRENCY)], None)?;
    let sorted = take_record_batch(&rows, &order)?;
    drop(rows);
    let runs = partition(&[sorted.column(KEY).clone(), sorted.column(CURRENCY).clone()])?.ranges();
    let columns = Sorted {
        keys: sorted.column(KEY).as_string::<i32>(),
        currencies: sorted.column(CURRENCY).as_string::<i32>(),
        totals: sorted.column(TOTAL_CENTS).as_primitive::<UInt64Type>(),
        quantities: sorted.column(QUANTITY).as_primitive::<UInt64Type>(),
    };
    let mut groups = Vec::new();
    let mut runs = runs.into_iter().peekable();
    while let Some(first) = runs.next() {
        let key = columns.keys.value(first.start);
        let mut money = vec![columns.money(&first)?];
        let mut end = first.end;
        while let Some(run) = runs.next_if(|run| columns.keys.value(run.start) == key) {
            money.push(columns.money(&run)?);
            end = run.end;
        }
        let all = first.start..end;
        groups.push(Group {
            key: key.to_owned(),
            count: all.len() as u64,
            money,
            quantity: stats(columns.quantities, &all, "total_quantity", || {
                format!("{key:?}")
            })?,
        });
    }
    Ok((groups, matched))
}

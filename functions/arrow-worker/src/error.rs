//! Why a request failed. Each variant maps to the stable `errorType` the
//! caller sees (Step Functions retries `DynamoDBError` and `S3Error`; tests and
//! users match on the others), and the message says what to change.

use crate::aggregate::AggregateError;
use crate::answer::Unanswerable;
use crate::merge::MergeError;
use crate::query::BadRequest;
use crate::scan::ScanError;
use crate::store::{FanOutError, ObjectError, ObjectFault, StoreError};
use lambda_runtime::Diagnostic;

/// A failed request; [`Error::error_type`] is the error type the caller sees.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The request cannot be answered as sent: `InvalidRequest`.
    #[error(transparent)]
    InvalidRequest(#[from] BadRequest),
    /// The scan stopped: `DynamoDBError` (after the SDK's retries),
    /// `TooManyRows` (more than `MAX_ROWS`: fan out) or `DeadlineTooShort`
    /// (the invocation's deadline came first).
    #[error(transparent)]
    Scan(#[from] ScanError),
    /// A report could not be saved: `DynamoDBError`.
    #[error("report not saved: {0}")]
    Report(#[from] StoreError),
    /// A day too large for one invocation could not be handed to the
    /// report state machine: `StepFunctionsError`.
    #[error("the day's fan-out was not started: {0}")]
    FanOut(#[from] FanOutError),
    /// The aggregation failed: `AggregationFailed`.
    #[error(transparent)]
    Aggregate(#[from] AggregateError),
    /// The Rayon job did not return: `AggregationFailed`.
    #[error(transparent)]
    Pool(#[from] shared::pool::JobError),
    /// The analytics bucket failed (after the SDK's retries) or is not
    /// configured: `S3Error`; an object is missing (`PartialMissing`), too
    /// large to read (`MergeTooLarge`) or, written create-only, already there
    /// (`InternalError`).
    #[error(transparent)]
    Objects(#[from] ObjectError),
    /// A partial answer could not be encoded (a bug): `InternalError`.
    #[error("partial answer not encoded: {0}")]
    Encode(String),
    /// The answer cannot be returned: `AnswerTooLarge` (more than Lambda's
    /// 6 MB response limit), or `InternalError` (it does not serialise).
    #[error(transparent)]
    Answer(#[from] Unanswerable),
    /// Partials could not be merged: `InvalidRequest` (not one fan-out's
    /// possible answers) or `MergeTooLarge` (more groups than the memory holds).
    #[error(transparent)]
    Merge(#[from] MergeError),
    /// A stored partial is gone: `PartialMissing`. No retry brings it back.
    #[error(
        "{key} is gone: partials expire a day after they are written (the bucket's lifecycle rule), so a merge redriven later cannot succeed: start a new execution"
    )]
    PartialMissing {
        /// The partial's key.
        key: String,
    },
    /// A stored partial is larger than a merge reads at once: `MergeTooLarge`.
    #[error(
        "{key} is {bytes} bytes, more than a merge holds at once ({budget} bytes, an eighth of the function's memory): fan out over more segments or give the function more memory"
    )]
    PartialTooLarge {
        /// The partial's key.
        key: String,
        /// Its size.
        bytes: u64,
        /// What a merge holds at once.
        budget: usize,
    },
    /// The stored partials were not all read and merged by the invocation's
    /// deadline: `DeadlineTooShort`.
    #[error(
        "{merged} of {total} stored partials merged by the invocation's deadline: raise the function's Timeout (template.yaml)"
    )]
    MergeDeadline {
        /// Partials read and merged by then.
        merged: usize,
        /// Partials to merge.
        total: usize,
    },
}

impl Error {
    /// The `errorType` of the failed invocation.
    pub fn error_type(&self) -> &'static str {
        match self {
            Error::InvalidRequest(_) => "InvalidRequest",
            Error::Scan(ScanError::TooManyRows(_)) => "TooManyRows",
            Error::Scan(ScanError::Busy { .. }) => "Busy",
            Error::Scan(ScanError::Deadline { .. }) | Error::MergeDeadline { .. } => {
                "DeadlineTooShort"
            }
            Error::Scan(ScanError::Store(_)) | Error::Report(_) => "DynamoDBError",
            Error::FanOut(_) => "StepFunctionsError",
            Error::Aggregate(_) | Error::Pool(_) => "AggregationFailed",
            Error::Answer(Unanswerable::TooLarge(_)) => "AnswerTooLarge",
            Error::Objects(e) => match e.fault {
                ObjectFault::Failed => "S3Error",
                ObjectFault::Missing => "PartialMissing",
                ObjectFault::TooLarge => "MergeTooLarge",
                // Attempts are random: a taken key is a bug, not S3 failing.
                ObjectFault::Exists => "InternalError",
            },
            Error::Merge(MergeError::Invalid(_)) => "InvalidRequest",
            Error::Merge(MergeError::TooManyGroups(_)) | Error::PartialTooLarge { .. } => {
                "MergeTooLarge"
            }
            Error::PartialMissing { .. } => "PartialMissing",
            Error::Answer(Unanswerable::NotSerialisable(_)) | Error::Encode(_) => "InternalError",
        }
    }
}

impl From<Error> for Diagnostic {
    fn from(error: Error) -> Self {
        Diagnostic {
            error_type: error.error_type().into(),
            error_message: error.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_failure_has_its_stable_error_type() {
        let cases = [
            (Error::from(BadRequest("x".into())), "InvalidRequest"),
            (Error::from(ScanError::TooManyRows(5)), "TooManyRows"),
            (
                Error::from(ScanError::Busy {
                    held: 90,
                    limit: 100,
                }),
                "Busy",
            ),
            (
                Error::from(ScanError::Store(StoreError("down".into()))),
                "DynamoDBError",
            ),
            (Error::from(StoreError("down".into())), "DynamoDBError"),
            (
                Error::from(AggregateError::Overflow {
                    column: "total_cents",
                    group: "\"k\" (EUR)".into(),
                }),
                "AggregationFailed",
            ),
            (
                Error::from(shared::pool::JobError::Panicked("aggregation")),
                "AggregationFailed",
            ),
            (Error::from(Unanswerable::TooLarge(7)), "AnswerTooLarge"),
            (
                Error::from(ObjectError::new(ObjectFault::Failed, "down")),
                "S3Error",
            ),
            (
                Error::from(ObjectError::new(ObjectFault::Missing, "gone")),
                "PartialMissing",
            ),
            (
                Error::from(ObjectError::new(ObjectFault::TooLarge, "big")),
                "MergeTooLarge",
            ),
            (
                Error::from(ObjectError::new(ObjectFault::Exists, "taken")),
                "InternalError",
            ),
            (Error::from(MergeError::TooManyGroups(9)), "MergeTooLarge"),
            (
                Error::from(MergeError::Invalid(BadRequest("x".into()))),
                "InvalidRequest",
            ),
            (Error::PartialMissing { key: "k".into() }, "PartialMissing"),
            (
                Error::PartialTooLarge {
                    key: "k".into(),
                    bytes: 9,
                    budget: 8,
                },
                "MergeTooLarge",
            ),
            (
                Error::from(ScanError::Deadline { pages: 3, rows: 7 }),
                "DeadlineTooShort",
            ),
            (
                Error::MergeDeadline {
                    merged: 2,
                    total: 8,
                },
                "DeadlineTooShort",
            ),
            (Error::Encode("no IPC".into()), "InternalError"),
            (
                Error::from(FanOutError("throttled".into())),
                "StepFunctionsError",
            ),
        ];
        for (error, error_type) in cases {
            let message = error.to_string();
            let diagnostic = Diagnostic::from(error);
            assert_eq!(diagnostic.error_type, error_type, "{message}");
            assert_eq!(diagnostic.error_message, message);
        }
        let report = Diagnostic::from(Error::from(StoreError("down".into())));
        assert_eq!(report.error_message, "report not saved: down");
    }
}

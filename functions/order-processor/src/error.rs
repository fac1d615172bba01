//! Why an invocation failed as a whole ([`Error`]: Lambda's `errorType` and
//! `errorMessage`, SQS delivers the whole batch again) and why one record
//! failed ([`RecordFailure`]: its message id goes into `batchItemFailures`).

use crate::order::Invalid;
use lambda_runtime::Diagnostic;

/// The invocation failed as a whole: no record is acknowledged.
///
/// Each variant has a stable `errorType` ([`Error::error_type`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// Records without a `messageId` (their number): they cannot be named in
    /// `batchItemFailures`, so the batch cannot be answered record by record.
    #[error(
        "{0} record(s) without a messageId: they cannot be reported one by one, so the whole batch fails and SQS delivers it again"
    )]
    MissingMessageId(usize),
}

impl Error {
    /// The `errorType` Lambda reports for this error.
    pub fn error_type(&self) -> &'static str {
        match self {
            Error::MissingMessageId(_) => "MissingMessageId",
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

/// Why one record failed (it is reported in `batchItemFailures`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordFailure {
    /// The body is not a valid order.
    #[error("{0}")]
    Invalid(Invalid),
    /// A different order is stored under this `order_id`.
    #[error("a different order is already stored under this order_id")]
    Conflict,
    /// The store refused or kept failing.
    #[error("not stored: {0}")]
    Store(String),
    /// The invocation's deadline came before the write finished.
    #[error("not stored before the invocation's deadline")]
    Timeout,
    /// Processing panicked.
    #[error("processing panicked: {0}")]
    Panic(String),
    /// An earlier record of the same FIFO message group failed.
    #[error("an earlier message of its FIFO group failed")]
    Blocked,
    /// The order under this `order_id` was stored by a newer release, in a
    /// `hash_version` this one does not know: left for that release to
    /// compare once it runs again.
    #[error("stored by a newer release in hash_version {0}, which this release cannot compare")]
    NewerHashVersion(u64),
}

impl RecordFailure {
    /// Whether no later delivery can succeed (an invalid order, a conflict):
    /// such a record goes to the dead-letter queue at once. The others
    /// (store, timeout, panic, blocked, an order of a newer release) may
    /// succeed when delivered again.
    pub fn is_permanent(&self) -> bool {
        matches!(self, RecordFailure::Invalid(_) | RecordFailure::Conflict)
    }

    /// Short class for metrics (`Failed_<class>`) and logs.
    pub fn class(&self) -> &'static str {
        match self {
            RecordFailure::Invalid(invalid) => invalid.class(),
            RecordFailure::Conflict => "conflict",
            RecordFailure::Store(_) => "store",
            RecordFailure::Timeout => "timeout",
            RecordFailure::Panic(_) => "panic",
            RecordFailure::Blocked => "fifo_blocked",
            RecordFailure::NewerHashVersion(_) => "unknown_hash_version",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_invocation_error_names_its_type_and_cause() {
        let diagnostic = Diagnostic::from(Error::MissingMessageId(2));
        assert_eq!(diagnostic.error_type, "MissingMessageId");
        assert!(
            diagnostic
                .error_message
                .starts_with("2 record(s) without a messageId"),
            "{}",
            diagnostic.error_message
        );
    }

    #[test]
    fn record_failures_keep_their_classes_and_messages() {
        let cases = [
            (
                RecordFailure::Invalid(Invalid::EmptyBody),
                "empty_body",
                "empty body",
            ),
            (
                RecordFailure::Conflict,
                "conflict",
                "a different order is already stored under this order_id",
            ),
            (
                RecordFailure::Store("throttled".into()),
                "store",
                "not stored: throttled",
            ),
            (
                RecordFailure::Timeout,
                "timeout",
                "not stored before the invocation's deadline",
            ),
            (
                RecordFailure::Panic("boom".into()),
                "panic",
                "processing panicked: boom",
            ),
            (
                RecordFailure::Blocked,
                "fifo_blocked",
                "an earlier message of its FIFO group failed",
            ),
            (
                RecordFailure::NewerHashVersion(2),
                "unknown_hash_version",
                "stored by a newer release in hash_version 2, which this release cannot compare",
            ),
        ];
        for (failure, class, message) in cases {
            assert_eq!(failure.class(), class);
            assert_eq!(failure.to_string(), message);
            assert_eq!(
                failure.is_permanent(),
                matches!(class, "empty_body" | "conflict"),
                "{class}"
            );
        }
    }
}

//! Why a request got no answer: the one error type of an invocation, with its
//! `errorType` (direct invoke) and its HTTP status (Function URL).
//!
//! No message ever contains a password or a field name the caller chose:
//! parse errors are written by hand in [`crate::request`], the others quote
//! only counts, costs, vCPUs and durations.

use crate::hashing::HashingError;
use crate::request::Invalid;
use lambda_runtime::Diagnostic;
use std::time::Duration;

/// A request that was refused, or that failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The request is malformed or breaks a limit (`InvalidRequest`, HTTP 400).
    #[error(transparent)]
    InvalidRequest(#[from] Invalid),
    /// A Function URL request with another method than POST (`InvalidRequest`,
    /// HTTP 405).
    #[error("use POST with a JSON body")]
    MethodNotAllowed,
    /// The estimated work would not finish before the deadline; refused before
    /// any hashing (`DeadlineTooShort`, HTTP 400).
    #[error(
        "{hashes} hash(es) at cost {cost} on {workers} worker(s) sharing {vcpus:.2} vCPU(s) need about {:.1} s{}; {:.1} s are left before the deadline: send smaller batches or a lower cost",
        .estimate.as_secs_f64(),
        behind(*.queued),
        .left.as_secs_f64()
    )]
    DeadlineTooShort {
        /// Hashes (or verifications) in the batch.
        hashes: usize,
        /// The cost they would be computed at.
        cost: u32,
        /// Pool threads sharing them.
        workers: usize,
        /// The CPU they share, in vCPUs (see [`crate::calibration::parallelism`]).
        vcpus: f64,
        /// How long they would take, from the cold-start calibration.
        estimate: Duration,
        /// The estimated time of the work this environment accepted before
        /// and has not finished (other requests in flight on Lambda Managed
        /// Instances; zero on demand), see [`crate::backlog`].
        queued: Duration,
        /// Time left to work before the deadline.
        left: Duration,
    },
    /// The pool or bcrypt failed: a bug, not the caller's fault
    /// (`InternalError`, HTTP 500).
    #[error(transparent)]
    Internal(#[from] HashingError),
}

/// The work a refused request would have waited behind, if any.
fn behind(queued: Duration) -> String {
    match queued.is_zero() {
        true => String::new(),
        false => format!(
            " behind {:.1} s of work already accepted",
            queued.as_secs_f64()
        ),
    }
}

impl Error {
    /// The `errorType` of a direct invoke (also in a Function URL's error body).
    pub fn error_type(&self) -> &'static str {
        match self {
            Error::InvalidRequest(_) | Error::MethodNotAllowed => "InvalidRequest",
            Error::DeadlineTooShort { .. } => "DeadlineTooShort",
            Error::Internal(_) => "InternalError",
        }
    }

    /// The HTTP status of a Function URL answer.
    pub fn http_status(&self) -> u16 {
        match self {
            Error::InvalidRequest(_) | Error::DeadlineTooShort { .. } => 400,
            Error::MethodNotAllowed => 405,
            Error::Internal(_) => 500,
        }
    }
}

impl From<Error> for Diagnostic {
    fn from(error: Error) -> Self {
        Diagnostic {
            error_type: error.error_type().to_owned(),
            error_message: error.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 1,000 cost-14 hashes estimated at 128 s with 20 s left.
    fn too_slow() -> Error {
        Error::DeadlineTooShort {
            hashes: 1_000,
            cost: 14,
            workers: 2,
            vcpus: 1.0175,
            estimate: Duration::from_millis(128_000),
            queued: Duration::ZERO,
            left: Duration::from_secs(20),
        }
    }

    #[test]
    fn each_error_keeps_its_error_type_and_status() {
        let cases = [
            (
                Error::from(Invalid("cost 3 is outside".into())),
                "InvalidRequest",
                400,
            ),
            (Error::MethodNotAllowed, "InvalidRequest", 405),
            (too_slow(), "DeadlineTooShort", 400),
            (
                Error::from(HashingError::from(shared::pool::JobError::Panicked(
                    "hashing",
                ))),
                "InternalError",
                500,
            ),
        ];
        for (error, error_type, status) in cases {
            assert_eq!(
                (error.error_type(), error.http_status()),
                (error_type, status)
            );
            let diagnostic = Diagnostic::from(error);
            assert_eq!(diagnostic.error_type, error_type);
            assert!(!diagnostic.error_message.is_empty());
        }
    }

    #[test]
    fn the_deadline_message_names_the_work_and_the_time() {
        let error = too_slow();
        assert_eq!(
            error.to_string(),
            "1000 hash(es) at cost 14 on 2 worker(s) sharing 1.02 vCPU(s) need about 128.0 s; 20.0 s are left before the deadline: send smaller batches or a lower cost"
        );
        let Error::DeadlineTooShort { estimate, left, .. } = too_slow() else {
            unreachable!("too_slow is DeadlineTooShort")
        };
        let busy = Error::DeadlineTooShort {
            hashes: 10,
            cost: 10,
            workers: 2,
            vcpus: 2.0,
            estimate,
            queued: Duration::from_millis(2_500),
            left,
        };
        assert!(
            busy.to_string()
                .contains("128.0 s behind 2.5 s of work already accepted; 20.0 s are left"),
            "{busy}"
        );
    }
}

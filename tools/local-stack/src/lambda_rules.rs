//! Lambda's rules for an SQS event source mapping: what
//! `CreateEventSourceMapping` refuses, with the reason Lambda gives, and the
//! visibility timeout AWS recommends. [`crate::template::Template::sqs_sources`]
//! checks every SQS event with [`SqsMapping::check`], so the local event source
//! mapping never runs a configuration Lambda would not create.

use std::ops::RangeInclusive;

/// `BatchSize` Lambda accepts for an SQS queue.
pub const BATCH_SIZE: RangeInclusive<u32> = 1..=10_000;
/// The largest `BatchSize` of a FIFO queue, and of a standard queue without a
/// batching window.
pub const SMALL_BATCH_MAX: u32 = 10;
/// `MaximumBatchingWindowInSeconds` Lambda accepts.
pub const BATCHING_WINDOW_S: RangeInclusive<u32> = 0..=300;
/// `ScalingConfig.MaximumConcurrency` Lambda accepts.
pub const MAXIMUM_CONCURRENCY: RangeInclusive<u32> = 2..=1000;
/// AWS recommends a visibility timeout of this many function timeouts, plus
/// the batching window: Lambda may retry a throttled batch within it, and a
/// message that becomes visible while in flight is delivered twice.
pub const FUNCTION_TIMEOUTS_PER_VISIBILITY_TIMEOUT: u32 = 6;

/// What Lambda looks at when it creates an SQS event source mapping: the
/// mapping's settings, its queue's and its function's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SqsMapping {
    /// `BatchSize`.
    pub batch_size: u32,
    /// `MaximumBatchingWindowInSeconds` (0 when absent).
    pub batching_window_s: u32,
    /// `ScalingConfig.MaximumConcurrency`, if set.
    pub maximum_concurrency: Option<u32>,
    /// The queue is FIFO.
    pub fifo: bool,
    /// The queue's `VisibilityTimeout` in seconds.
    pub visibility_timeout_s: u32,
    /// The function's `Timeout` in seconds.
    pub function_timeout_s: u32,
}

impl SqsMapping {
    /// `Err` with Lambda's reason if Lambda refuses to create this mapping.
    pub fn check(&self) -> Result<(), String> {
        out_of_range("batchSize", self.batch_size, &BATCH_SIZE)?;
        out_of_range(
            "maximumBatchingWindowInSeconds",
            self.batching_window_s,
            &BATCHING_WINDOW_S,
        )?;
        if let Some(concurrency) = self.maximum_concurrency {
            out_of_range(
                "scalingConfig.maximumConcurrency",
                concurrency,
                &MAXIMUM_CONCURRENCY,
            )?;
        }
        if self.fifo && self.batching_window_s > 0 {
            return Err("Batching window is not supported for FIFO queues".into());
        }
        if self.fifo && self.batch_size > SMALL_BATCH_MAX {
            // Lambda's wording from when every SQS batch was capped at 10.
            return Err(format!(
                "Maximum batch size must be between 1 and {SMALL_BATCH_MAX} inclusive"
            ));
        }
        if self.batch_size > SMALL_BATCH_MAX && self.batching_window_s == 0 {
            return Err(format!(
                "Maximum batch window in seconds must be greater than 0 if maximum batch size is greater than {SMALL_BATCH_MAX}"
            ));
        }
        if self.visibility_timeout_s < self.function_timeout_s {
            return Err(format!(
                "Queue visibility timeout: {} seconds is less than Function timeout: {} seconds",
                self.visibility_timeout_s, self.function_timeout_s
            ));
        }
        Ok(())
    }

    /// The visibility timeout AWS recommends for this mapping: six times the
    /// function timeout plus the batching window. Lambda does not enforce it.
    pub fn recommended_visibility_timeout_s(&self) -> u32 {
        FUNCTION_TIMEOUTS_PER_VISIBILITY_TIMEOUT
            .saturating_mul(self.function_timeout_s)
            .saturating_add(self.batching_window_s)
    }
}

/// The request validation error AWS APIs answer for a value out of its range.
fn out_of_range(field: &str, value: u32, range: &RangeInclusive<u32>) -> Result<(), String> {
    let constraint = if value < *range.start() {
        format!("greater than or equal to {}", range.start())
    } else if value > *range.end() {
        format!("less than or equal to {}", range.end())
    } else {
        return Ok(());
    };
    Err(format!(
        "1 validation error detected: Value '{value}' at '{field}' failed to satisfy constraint: Member must have value {constraint}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The template's defaults: a standard queue, batches of 10, no window.
    const DEFAULT: SqsMapping = SqsMapping {
        batch_size: 10,
        batching_window_s: 0,
        maximum_concurrency: Some(5),
        fifo: false,
        visibility_timeout_s: 180,
        function_timeout_s: 30,
    };

    fn refusal(mapping: SqsMapping) -> String {
        mapping.check().expect_err("Lambda refuses this mapping")
    }

    #[test]
    fn the_defaults_and_the_limits_themselves_pass() {
        assert_eq!(DEFAULT.check(), Ok(()));
        for mapping in [
            SqsMapping {
                batch_size: 1,
                maximum_concurrency: None,
                ..DEFAULT
            },
            SqsMapping {
                batch_size: 10_000,
                batching_window_s: 1,
                maximum_concurrency: Some(1000),
                ..DEFAULT
            },
            SqsMapping {
                batching_window_s: 300,
                maximum_concurrency: Some(2),
                ..DEFAULT
            },
            SqsMapping {
                fifo: true,
                ..DEFAULT
            },
            SqsMapping {
                visibility_timeout_s: 30,
                ..DEFAULT
            },
        ] {
            assert_eq!(mapping.check(), Ok(()), "{mapping:?}");
        }
    }

    #[test]
    fn values_out_of_range_get_the_api_validation_error() {
        assert_eq!(
            refusal(SqsMapping {
                batch_size: 0,
                ..DEFAULT
            }),
            "1 validation error detected: Value '0' at 'batchSize' failed to satisfy constraint: Member must have value greater than or equal to 1"
        );
        assert_eq!(
            refusal(SqsMapping {
                batch_size: 10_001,
                batching_window_s: 1,
                ..DEFAULT
            }),
            "1 validation error detected: Value '10001' at 'batchSize' failed to satisfy constraint: Member must have value less than or equal to 10000"
        );
        assert_eq!(
            refusal(SqsMapping {
                batching_window_s: 301,
                ..DEFAULT
            }),
            "1 validation error detected: Value '301' at 'maximumBatchingWindowInSeconds' failed to satisfy constraint: Member must have value less than or equal to 300"
        );
        for (concurrency, constraint) in [
            (1, "greater than or equal to 2"),
            (1001, "less than or equal to 1000"),
        ] {
            assert_eq!(
                refusal(SqsMapping {
                    maximum_concurrency: Some(concurrency),
                    ..DEFAULT
                }),
                format!(
                    "1 validation error detected: Value '{concurrency}' at 'scalingConfig.maximumConcurrency' failed to satisfy constraint: Member must have value {constraint}"
                )
            );
        }
    }

    #[test]
    fn a_batch_above_10_needs_a_batching_window() {
        assert_eq!(
            refusal(SqsMapping {
                batch_size: 11,
                ..DEFAULT
            }),
            "Maximum batch window in seconds must be greater than 0 if maximum batch size is greater than 10"
        );
        let windowed = SqsMapping {
            batch_size: 11,
            batching_window_s: 1,
            ..DEFAULT
        };
        assert_eq!(windowed.check(), Ok(()));
    }

    #[test]
    fn fifo_takes_no_window_and_batches_of_at_most_10() {
        assert_eq!(
            refusal(SqsMapping {
                fifo: true,
                batching_window_s: 1,
                ..DEFAULT
            }),
            "Batching window is not supported for FIFO queues"
        );
        assert_eq!(
            refusal(SqsMapping {
                fifo: true,
                batch_size: 11,
                ..DEFAULT
            }),
            "Maximum batch size must be between 1 and 10 inclusive"
        );
    }

    #[test]
    fn the_visibility_timeout_must_cover_the_function_timeout() {
        assert_eq!(
            refusal(SqsMapping {
                visibility_timeout_s: 29,
                ..DEFAULT
            }),
            "Queue visibility timeout: 29 seconds is less than Function timeout: 30 seconds"
        );
    }

    #[test]
    fn the_recommended_visibility_timeout_is_six_function_timeouts_plus_the_window() {
        assert_eq!(DEFAULT.recommended_visibility_timeout_s(), 180);
        let windowed = SqsMapping {
            batching_window_s: 300,
            ..DEFAULT
        };
        assert_eq!(windowed.recommended_visibility_timeout_s(), 480);
    }
}

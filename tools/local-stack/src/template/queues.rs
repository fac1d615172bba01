//! The template's SQS queues (with their redrive policies), the SQS event
//! sources of its functions (the event source mappings SAM creates, checked as
//! Lambda checks them) and its dead-letter queues.

use super::Template;
use super::functions::Function;
use super::{number, text};
use crate::lambda_rules::SqsMapping;
use serde_norway::Value;

/// An `AWS::SQS::Queue`, as the local stack creates it (named by its logical
/// id, with `.fifo` appended for a FIFO queue, as SQS requires).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Queue {
    /// Logical id, e.g. `OrdersQueue`.
    pub logical_id: String,
    /// `FifoQueue`.
    pub fifo: bool,
    /// `ContentBasedDeduplication`.
    pub content_based_deduplication: bool,
    /// `VisibilityTimeout` in seconds (SQS's default, 30, if absent).
    pub visibility_timeout_s: u32,
    /// `MessageRetentionPeriod` in seconds (SQS's default, 4 days, if absent).
    pub message_retention_s: u32,
    /// `RedrivePolicy`: where messages go after too many receives.
    pub redrive: Option<Redrive>,
}

impl Queue {
    /// The queue's name: the logical id, plus `.fifo` for a FIFO queue.
    pub fn name(&self) -> String {
        if self.fifo {
            format!("{}.fifo", self.logical_id)
        } else {
            self.logical_id.clone()
        }
    }
}

/// A queue's `RedrivePolicy`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redrive {
    /// Logical id of the dead-letter queue.
    pub dead_letter_queue: String,
    /// `maxReceiveCount`.
    pub max_receive_count: u32,
}

/// A function's `Type: SQS` event: the event source mapping SAM creates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SqsSource {
    /// The function's binary.
    pub function: String,
    /// Logical id of the queue.
    pub queue: String,
    /// `BatchSize` (10 if absent).
    pub batch_size: u32,
    /// `MaximumBatchingWindowInSeconds` (0 if absent).
    pub batching_window_s: u32,
    /// `FunctionResponseTypes` has `ReportBatchItemFailures`.
    pub report_batch_item_failures: bool,
    /// `ScalingConfig.MaximumConcurrency`: most concurrent invocations.
    pub maximum_concurrency: Option<u32>,
}

impl Template {
    /// Every SQS queue, dead-letter queues first (so a redrive target exists
    /// before the queue that names it).
    pub fn queues(&self) -> Result<Vec<Queue>, String> {
        let mut queues = Vec::new();
        for (logical_id, resource) in self.resources("AWS::SQS::Queue") {
            let prop = |name: &str| self.property(resource, name);
            let flag = |name: &str| -> Result<bool, String> {
                match prop(name)? {
                    None => Ok(false),
                    Some(Value::Bool(b)) => Ok(b),
                    Some(Value::String(s)) if s == "true" || s == "false" => Ok(s == "true"),
                    Some(other) => Err(format!("{logical_id}.{name} is not a boolean: {other:?}")),
                }
            };
            let redrive = match prop("RedrivePolicy")? {
                None => None,
                Some(policy) => {
                    let part = |key: &str| {
                        policy
                            .get(key)
                            .ok_or_else(|| format!("{logical_id}.RedrivePolicy has no {key}"))
                            .and_then(|v| {
                                self.resolve(v)?.ok_or_else(|| {
                                    format!("{logical_id}.RedrivePolicy.{key} is empty")
                                })
                            })
                    };
                    Some(Redrive {
                        dead_letter_queue: text(&part("deadLetterTargetArn")?)
                            .ok_or_else(|| format!("{logical_id}: deadLetterTargetArn"))?,
                        max_receive_count: number(&part("maxReceiveCount")?)
                            .ok_or_else(|| format!("{logical_id}: maxReceiveCount"))?,
                    })
                }
            };
            queues.push(Queue {
                fifo: flag("FifoQueue")?,
                content_based_deduplication: flag("ContentBasedDeduplication")?,
                visibility_timeout_s: match prop("VisibilityTimeout")? {
                    None => 30,
                    Some(v) => number(&v)
                        .ok_or_else(|| format!("{logical_id}.VisibilityTimeout: {v:?}"))?,
                },
                message_retention_s: match prop("MessageRetentionPeriod")? {
                    None => 345_600,
                    Some(v) => number(&v)
                        .ok_or_else(|| format!("{logical_id}.MessageRetentionPeriod: {v:?}"))?,
                },
                redrive,
                logical_id,
            });
        }
        queues.sort_by_key(|q| q.redrive.is_some());
        Ok(queues)
    }

    /// Every `Type: SQS` event of every function: the event source mappings
    /// SAM creates. An error with Lambda's reason if Lambda would refuse to
    /// create one (see [`crate::lambda_rules`]), so none runs locally.
    pub fn sqs_sources(&self) -> Result<Vec<SqsSource>, String> {
        self.sqs_mappings()?
            .into_iter()
            .map(|(source, mapping)| match mapping.check() {
                Ok(()) => Ok(source),
                Err(reason) => Err(format!(
                    "Lambda refuses the SQS event source mapping from {} to {}: {reason}",
                    source.queue, source.function
                )),
            })
            .collect()
    }

    /// Every `Type: SQS` event, each with what Lambda checks when it creates
    /// the mapping (the queue's and the function's settings), unchecked.
    pub fn sqs_mappings(&self) -> Result<Vec<(SqsSource, SqsMapping)>, String> {
        let queues = self.queues()?;
        let functions = self.functions()?;
        let mut mappings = Vec::new();
        for source in self.sqs_events(&functions)? {
            let queue = queues
                .iter()
                .find(|q| q.logical_id == source.queue)
                .ok_or_else(|| {
                    format!(
                        "the SQS event of {} reads {}, which is not an SQS queue of the template",
                        source.function, source.queue
                    )
                })?;
            let function = functions
                .iter()
                .find(|f| f.binary == source.function)
                .ok_or_else(|| format!("no function {}", source.function))?;
            let mapping = SqsMapping {
                batch_size: source.batch_size,
                batching_window_s: source.batching_window_s,
                maximum_concurrency: source.maximum_concurrency,
                fifo: queue.fifo,
                visibility_timeout_s: queue.visibility_timeout_s,
                function_timeout_s: function.timeout_s,
            };
            mappings.push((source, mapping));
        }
        Ok(mappings)
    }

    /// Every `Type: SQS` event of `functions`, as written.
    fn sqs_events(&self, functions: &[Function]) -> Result<Vec<SqsSource>, String> {
        let mut sources = Vec::new();
        for function in functions {
            let resource = self
                .resources("AWS::Serverless::Function")
                .into_iter()
                .find(|(id, _)| *id == function.logical_id)
                .map(|(_, r)| r);
            let events = resource
                .and_then(|r| r.get("Properties"))
                .and_then(|p| p.get("Events"))
                .and_then(Value::as_mapping);
            for (name, event) in events.into_iter().flatten() {
                if event.get("Type").and_then(Value::as_str) != Some("SQS") {
                    continue;
                }
                let name = name.as_str().unwrap_or("?");
                let at = |key: &str| -> Result<Option<Value>, String> {
                    event
                        .get("Properties")
                        .and_then(|p| p.get(key))
                        .map_or(Ok(None), |v| self.resolve(v))
                };
                let count = |key: &str, default: u32| -> Result<u32, String> {
                    at(key)?.map_or(Ok(default), |v| {
                        number(&v).ok_or_else(|| format!("{name}.{key}: {v:?}"))
                    })
                };
                let queue = at("Queue")?
                    .as_ref()
                    .and_then(text)
                    .ok_or_else(|| format!("{name}: no Queue"))?;
                let report = at("FunctionResponseTypes")?
                    .as_ref()
                    .and_then(Value::as_sequence)
                    .is_some_and(|types| {
                        types
                            .iter()
                            .any(|t| t.as_str() == Some("ReportBatchItemFailures"))
                    });
                let maximum_concurrency = match at("ScalingConfig")? {
                    None => None,
                    Some(scaling) => match scaling.get("MaximumConcurrency") {
                        None => None,
                        Some(v) => {
                            let v = self.resolve(v)?;
                            Some(v.as_ref().and_then(number).ok_or_else(|| {
                                format!("{name}.ScalingConfig.MaximumConcurrency: {v:?}")
                            })?)
                        }
                    },
                };
                sources.push(SqsSource {
                    function: function.binary.clone(),
                    queue,
                    batch_size: count("BatchSize", 10)?,
                    batching_window_s: count("MaximumBatchingWindowInSeconds", 0)?,
                    report_batch_item_failures: report,
                    maximum_concurrency,
                });
            }
        }
        Ok(sources)
    }

    /// Every dead-letter queue: the target of a queue's `RedrivePolicy` or of
    /// a function's `DeadLetterQueue` (logical ids, each once).
    pub fn dead_letter_queues(&self) -> Result<Vec<String>, String> {
        let mut found: Vec<String> = self
            .queues()?
            .into_iter()
            .filter_map(|q| q.redrive.map(|r| r.dead_letter_queue))
            .collect();
        for (logical_id, function) in self.resources("AWS::Serverless::Function") {
            let target = function
                .get("Properties")
                .and_then(|p| p.get("DeadLetterQueue"))
                .and_then(|d| d.get("TargetArn"));
            if let Some(target) = target {
                let queue = self.resolve(target)?.as_ref().and_then(text);
                found.push(queue.ok_or_else(|| {
                    format!("{logical_id}.DeadLetterQueue.TargetArn: {target:?}")
                })?);
            }
        }
        found.sort();
        found.dedup();
        Ok(found)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queues_and_sqs_events_of_a_template() {
        let template = crate::fixtures::template();
        let queues = template.queues().expect("queues");
        let ids: Vec<_> = queues.iter().map(|q| q.logical_id.as_str()).collect();
        // Dead-letter queues first, each before the queue that names it.
        assert_eq!(
            ids,
            [
                "FixtureDeadLetterQueue",
                "FixtureEventsDeadLetterQueue",
                "FixtureQueue"
            ]
        );
        let queue = &queues[2];
        assert!(!queue.fifo, "QueueFifo defaults to false");
        assert_eq!(queue.visibility_timeout_s, 180);
        assert_eq!(queues[0].message_retention_s, 1_209_600);
        assert_eq!(
            queue.redrive,
            Some(Redrive {
                dead_letter_queue: "FixtureDeadLetterQueue".into(),
                max_receive_count: 5
            })
        );
        let sources = template.sqs_sources().expect("sources");
        assert_eq!(
            sources,
            [SqsSource {
                function: "fixture-function".into(),
                queue: "FixtureQueue".into(),
                batch_size: 10,
                batching_window_s: 0,
                report_batch_item_failures: true,
                maximum_concurrency: Some(5),
            }]
        );
        let fifo = template
            .with_parameters(&[("QueueFifo", "true")])
            .expect("allowed");
        let names: Vec<_> = fifo
            .queues()
            .expect("queues")
            .iter()
            .map(Queue::name)
            .collect();
        assert_eq!(
            names,
            [
                "FixtureDeadLetterQueue.fifo",
                "FixtureEventsDeadLetterQueue",
                "FixtureQueue.fifo"
            ]
        );
    }

    /// A queue feeding a function, with the mapping's settings from parameters.
    const MAPPING: &str = r#"
Parameters:
  Batch: { Type: Number, Default: 10, MinValue: 1, MaxValue: 10000 }
  Window: { Type: Number, Default: 0, AllowedValues: [0, 1, 300] }
  Visibility: { Type: Number, Default: 180 }
  Fifo: { Type: String, Default: "false", AllowedValues: ["false", "true"] }
Conditions:
  IsFifo: !Equals [!Ref Fifo, "true"]
Resources:
  Q:
    Type: AWS::SQS::Queue
    Properties:
      FifoQueue: !If [IsFifo, true, !Ref AWS::NoValue]
      VisibilityTimeout: !Ref Visibility
  Fn:
    Type: AWS::Serverless::Function
    Metadata: { BuildProperties: { Binary: fn-bin } }
    Properties:
      Timeout: 30
      Events:
        Q:
          Type: SQS
          Properties:
            Queue: !GetAtt Q.Arn
            BatchSize: !Ref Batch
            MaximumBatchingWindowInSeconds: !Ref Window
            ScalingConfig: { MaximumConcurrency: 7 }
"#;

    #[test]
    fn sqs_sources_refuse_what_lambda_refuses() {
        let template = Template::parse(MAPPING).expect("parse");
        let sources = template.sqs_sources().expect("the defaults are valid");
        assert_eq!(sources[0].maximum_concurrency, Some(7));
        for (overrides, reason) in [
            (
                &[("Batch", "11")][..],
                "Maximum batch window in seconds must be greater than 0 if maximum batch size is greater than 10",
            ),
            (
                &[("Fifo", "true"), ("Window", "1")][..],
                "Batching window is not supported for FIFO queues",
            ),
            (
                &[("Visibility", "29")][..],
                "Queue visibility timeout: 29 seconds is less than Function timeout: 30 seconds",
            ),
        ] {
            let error = template
                .clone()
                .with_parameters(overrides)
                .expect("allowed values")
                .sqs_sources()
                .expect_err("Lambda refuses it");
            assert_eq!(
                error,
                format!("Lambda refuses the SQS event source mapping from Q to fn-bin: {reason}"),
                "{overrides:?}"
            );
        }
        let windowed = template.with_parameters(&[("Batch", "11"), ("Window", "1")]);
        assert_eq!(
            windowed.expect("allowed").sqs_sources().map(|s| s.len()),
            Ok(1)
        );
    }
}

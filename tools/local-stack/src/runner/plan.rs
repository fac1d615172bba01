//! How each sample reaches its function, from the template and the samples
//! alone: an SQS batch of a function with an SQS event through that event's
//! queue, a state machine's input (its expectation's `state_machine`)
//! through that state machine, anything else straight to its function.

use crate::events::{self, Sample};
use crate::stored::{self, Table};
use crate::template::{Function, SqsSource, Template};

/// Every sample of every function of the template, by how it is sent.
pub(super) struct Plan {
    /// Each SQS event source, in the template's order, with its function's
    /// SQS batches.
    pub queues: Vec<Queued>,
    /// Each function, in the template's order, with the samples sent
    /// straight to it (none: every sample goes another way).
    pub invoked: Vec<(Function, Vec<Sample>)>,
    /// Each state machine's input, with the binary of the function whose
    /// folder holds it, in the template's order of functions.
    pub executions: Vec<(String, Sample)>,
    /// The template's tables, where what the queues' functions stored is
    /// looked for (see [`stored`]).
    pub tables: Vec<Table>,
}

/// One SQS event source and its function's samples for it.
pub(super) struct Queued {
    pub source: SqsSource,
    /// The function's SQS batch samples, whose record bodies go through the queue.
    pub samples: Vec<Sample>,
}

impl Queued {
    /// Every record body of the samples, in order.
    pub fn bodies(&self) -> Vec<String> {
        self.samples.iter().flat_map(Sample::sqs_bodies).collect()
    }

    /// How many messages the expectations say end in the dead-letter queue:
    /// the records each batch declares invalid, which the function moves
    /// there (or reports failed until SQS does). `None` when a batch
    /// declares none: its records' fate is not known.
    pub fn expected_dead_letters(&self) -> Option<usize> {
        self.samples
            .iter()
            .map(|s| s.expect.invalid_records.as_ref().map(Vec::len))
            .sum()
    }
}

/// The samples of one function, by how each is sent.
#[derive(Debug, Default, PartialEq)]
struct Split {
    queued: Vec<Sample>,
    invoked: Vec<Sample>,
    executions: Vec<Sample>,
}

/// `samples` split: a state machine's input goes through it, an SQS batch
/// through the queue if the function is `sqs_fed`, the rest straight to it.
fn split(samples: Vec<Sample>, sqs_fed: bool) -> Split {
    let mut split = Split::default();
    for sample in samples {
        if sample.state_machine().is_some() {
            split.executions.push(sample);
        } else if sqs_fed && !sample.sqs_bodies().is_empty() {
            split.queued.push(sample);
        } else {
            split.invoked.push(sample);
        }
    }
    split
}

impl Plan {
    /// The plan for `template`'s functions and their samples in `events/`.
    pub fn of(template: &Template) -> Result<Self, String> {
        let sources = template.sqs_sources()?;
        let mut plan = Plan {
            queues: Vec::new(),
            invoked: Vec::new(),
            executions: Vec::new(),
            tables: stored::tables(template)?,
        };
        for function in template.functions()? {
            let own: Vec<&SqsSource> = sources
                .iter()
                .filter(|s| s.function == function.binary)
                .collect();
            let split = split(samples_of(&function.binary)?, !own.is_empty());
            // A function fed by several queues gets its batches through each.
            for source in own {
                plan.queues.push(Queued {
                    source: source.clone(),
                    samples: split.queued.clone(),
                });
            }
            let binary = function.binary.clone();
            plan.executions
                .extend(split.executions.into_iter().map(|s| (binary.clone(), s)));
            plan.invoked.push((function, split.invoked));
        }
        Ok(plan)
    }
}

/// The samples of `function`; none if it has no `events/<function>/` folder.
fn samples_of(function: &str) -> Result<Vec<Sample>, String> {
    let dir = crate::workspace_root().join("events").join(function);
    if dir.is_dir() {
        events::samples_in(&dir)
    } else {
        Ok(Vec::new())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expectations::Expectation;
    use serde_json::{Value, json};
    use std::path::PathBuf;

    fn sample(name: &str, event: Value, expect: Value) -> Sample {
        Sample {
            path: PathBuf::from(format!("events/f/{name}.json")),
            text: event.to_string(),
            event,
            expect: serde_json::from_value::<Expectation>(expect).expect("an expectation"),
        }
    }

    fn batch(name: &str, bodies: &[&str], invalid: Option<&[&str]>) -> Sample {
        let records: Vec<Value> = bodies
            .iter()
            .enumerate()
            .map(
                |(i, b)| json!({"messageId": format!("m{i}"), "eventSource": "aws:sqs", "body": b}),
            )
            .collect();
        let expect = match invalid {
            Some(ids) => json!({ "invalid_records": ids }),
            None => json!({}),
        };
        sample(name, json!({ "Records": records }), expect)
    }

    fn names(samples: &[Sample]) -> Vec<String> {
        samples.iter().map(Sample::file_name).collect()
    }

    #[test]
    fn each_sample_goes_its_way() {
        let samples = vec![
            batch("batch", &["a", "b"], Some(&[])),
            sample("direct", json!({"operation": "x"}), json!({})),
            sample(
                "run",
                json!({"query": {}}),
                json!({"state_machine": "M", "report": "all_stored_orders"}),
            ),
        ];
        let fed = split(samples.clone(), true);
        assert_eq!(names(&fed.queued), ["batch.json"]);
        assert_eq!(names(&fed.invoked), ["direct.json"]);
        assert_eq!(names(&fed.executions), ["run.json"]);
        // Without an SQS event, a batch is invoked directly, as Lambda's
        // console would.
        let unfed = split(samples, false);
        assert!(unfed.queued.is_empty());
        assert_eq!(names(&unfed.invoked), ["batch.json", "direct.json"]);
        assert_eq!(names(&unfed.executions), ["run.json"]);
    }

    #[test]
    fn dead_letters_are_the_invalid_records_when_every_batch_says() {
        let source = SqsSource {
            function: "f".into(),
            queue: "Q".into(),
            batch_size: 10,
            batching_window_s: 0,
            report_batch_item_failures: true,
            maximum_concurrency: None,
        };
        let queued = |samples| Queued {
            source: source.clone(),
            samples,
        };
        let declared = queued(vec![
            batch("one", &["a", "b", "c"], Some(&["m1", "m2"])),
            batch("two", &["d"], Some(&[])),
        ]);
        assert_eq!(declared.bodies(), ["a", "b", "c", "d"]);
        assert_eq!(declared.expected_dead_letters(), Some(2));
        let undeclared = queued(vec![
            batch("one", &["a"], Some(&["m0"])),
            batch("two", &["b"], None),
        ]);
        assert_eq!(undeclared.expected_dead_letters(), None);
        assert_eq!(queued(Vec::new()).expected_dead_letters(), Some(0));
    }
}

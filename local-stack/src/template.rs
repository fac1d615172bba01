//! Reads `template.yaml`, so local runs use what the template declares (memory,
//! timeout, environment) instead of a second copy of it.
//!
//! Locally every resource's physical name is its logical id: `!Ref OrdersTable`
//! resolves to `"OrdersTable"`, the name the local stack gives that table; a
//! `!Ref` to a parameter resolves to the value given with
//! [`Template::with_parameters`], else to the parameter's `Default`.

use serde_norway::Value;
use std::path::Path;

/// One `AWS::Serverless::Function`, with `Globals` applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Function {
    /// Logical id, e.g. `OrderProcessorFunction`.
    pub logical_id: String,
    /// `Metadata.BuildProperties.Binary`: the cargo binary.
    pub binary: String,
    /// `MemorySize` in MB (Lambda's default, 128, if absent).
    pub memory_mb: u32,
    /// `Timeout` in seconds (Lambda's default, 3, if absent).
    pub timeout_s: u32,
    /// The variables Lambda derives from `LoggingConfig`, then
    /// `Environment.Variables`, with `!Ref X` resolved to `X`.
    pub env: Vec<(String, String)>,
}

/// The parsed template.
#[derive(Debug, Clone)]
pub struct Template {
    doc: Value,
    /// Parameter values given instead of the defaults (`sam deploy --parameter-overrides`).
    overrides: Vec<(String, String)>,
}

impl Template {
    /// Parse the template at `path`.
    pub fn load(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        Self::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Parse template text.
    pub fn parse(text: &str) -> Result<Self, String> {
        let doc: Value = serde_norway::from_str(text).map_err(|e| e.to_string())?;
        Ok(Self {
            doc,
            overrides: Vec::new(),
        })
    }

    /// The same template deployed with these parameter values instead of the
    /// defaults, as `sam deploy --parameter-overrides` would. A name the
    /// template does not declare is an error.
    pub fn with_parameters(mut self, values: &[(&str, &str)]) -> Result<Self, String> {
        for (name, value) in values {
            if self
                .doc
                .get("Parameters")
                .and_then(|p| p.get(*name))
                .is_none()
            {
                return Err(format!("template.yaml has no parameter {name}"));
            }
            self.overrides.retain(|(n, _)| n != name);
            self.overrides
                .push(((*name).to_owned(), (*value).to_owned()));
        }
        Ok(self)
    }

    /// The template's resources of `kind` (e.g. `AWS::SQS::Queue`): (logical id, properties).
    pub fn resources(&self, kind: &str) -> Vec<(String, &Value)> {
        let Some(resources) = self.doc.get("Resources").and_then(Value::as_mapping) else {
            return Vec::new();
        };
        resources
            .iter()
            .filter(|(_, r)| r.get("Type").and_then(Value::as_str) == Some(kind))
            .filter_map(|(id, r)| Some((id.as_str()?.to_owned(), r)))
            .collect()
    }

    /// Every serverless function, `Globals.Function` applied.
    pub fn functions(&self) -> Result<Vec<Function>, String> {
        let globals = self.doc.get("Globals").and_then(|g| g.get("Function"));
        self.resources("AWS::Serverless::Function")
            .into_iter()
            .map(|(logical_id, resource)| {
                let props = resource.get("Properties");
                let prop = |name: &str| {
                    props
                        .and_then(|p| p.get(name))
                        .or_else(|| globals.and_then(|g| g.get(name)))
                };
                let number = |name: &str, default: u32| -> Result<u32, String> {
                    match prop(name) {
                        None => Ok(default),
                        Some(v) => v
                            .as_u64()
                            .and_then(|n| u32::try_from(n).ok())
                            .ok_or_else(|| format!("{logical_id}.{name} is not a number: {v:?}")),
                    }
                };
                let binary = resource
                    .get("Metadata")
                    .and_then(|m| m.get("BuildProperties"))
                    .and_then(|b| b.get("Binary"))
                    .and_then(Value::as_str)
                    .ok_or_else(|| format!("{logical_id}: no Metadata.BuildProperties.Binary"))?
                    .to_owned();
                let mut env = Vec::new();
                // Lambda turns `LoggingConfig` into these variables.
                for (key, variable) in [
                    ("LogFormat", "AWS_LAMBDA_LOG_FORMAT"),
                    ("ApplicationLogLevel", "AWS_LAMBDA_LOG_LEVEL"),
                ] {
                    // SAM merges maps from `Globals` key by key.
                    if let Some(value) = logging_setting(props, key)
                        .or_else(|| logging_setting(globals, key))
                        .and_then(|v| self.scalar(v))
                    {
                        env.push((variable.to_owned(), value));
                    }
                }
                for scope in [globals, props] {
                    let vars = scope
                        .and_then(|s| s.get("Environment"))
                        .and_then(|e| e.get("Variables"))
                        .and_then(Value::as_mapping);
                    for (key, value) in vars.into_iter().flatten() {
                        let key = key
                            .as_str()
                            .ok_or("environment key is not a string")?
                            .to_owned();
                        let value = self.scalar(value).ok_or_else(|| {
                            format!(
                                "{logical_id}: {key} has a value the local runner cannot resolve"
                            )
                        })?;
                        env.retain(|(k, _)| *k != key);
                        env.push((key, value));
                    }
                }
                Ok(Function {
                    memory_mb: number("MemorySize", 128)?,
                    timeout_s: number("Timeout", 3)?,
                    logical_id,
                    binary,
                    env,
                })
            })
            .collect()
    }

    /// The function whose binary is `binary`.
    pub fn function(&self, binary: &str) -> Result<Function, String> {
        self.functions()?
            .into_iter()
            .find(|f| f.binary == binary)
            .ok_or_else(|| format!("template.yaml has no function with Binary: {binary}"))
    }
}

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
                redrive,
                logical_id,
            });
        }
        queues.sort_by_key(|q| q.redrive.is_some());
        Ok(queues)
    }

    /// Every `Type: SQS` event of every function.
    pub fn sqs_sources(&self) -> Result<Vec<SqsSource>, String> {
        let mut sources = Vec::new();
        for function in self.functions()? {
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
                sources.push(SqsSource {
                    function: function.binary.clone(),
                    queue,
                    batch_size: count("BatchSize", 10)?,
                    batching_window_s: count("MaximumBatchingWindowInSeconds", 0)?,
                    report_batch_item_failures: report,
                });
            }
        }
        Ok(sources)
    }

    /// A resource's property, resolved; `None` if absent or `AWS::NoValue`.
    fn property(&self, resource: &Value, name: &str) -> Result<Option<Value>, String> {
        resource
            .get("Properties")
            .and_then(|p| p.get(name))
            .map_or(Ok(None), |v| self.resolve(v))
    }

    /// A value with the intrinsic functions the local stack understands
    /// resolved: `!Ref` (a parameter's default, or a resource's logical id),
    /// `!GetAtt X.Attr` (the logical id `X`: locally a resource's name is its
    /// id), `!If` over conditions made of `!Equals` and `!Not`. `None` for
    /// `!Ref AWS::NoValue`.
    fn resolve(&self, value: &Value) -> Result<Option<Value>, String> {
        let Value::Tagged(tagged) = value else {
            return Ok(Some(value.clone()));
        };
        let inner = &tagged.value;
        if tagged.tag == "Ref" {
            let name = inner.as_str().ok_or("!Ref of a non-string")?;
            if name == "AWS::NoValue" {
                return Ok(None);
            }
            if let Some((_, value)) = self.overrides.iter().find(|(n, _)| n == name) {
                return Ok(Some(Value::String(value.clone())));
            }
            return match self.doc.get("Parameters").and_then(|p| p.get(name)) {
                Some(parameter) => parameter
                    .get("Default")
                    .map_or(Err(format!("parameter {name} has no Default")), |d| {
                        self.resolve(d)
                    }),
                None => Ok(Some(Value::String(name.to_owned()))),
            };
        }
        if tagged.tag == "GetAtt" {
            let target = match inner {
                Value::String(s) => s.split('.').next().map(str::to_owned),
                Value::Sequence(parts) => parts.first().and_then(Value::as_str).map(str::to_owned),
                _ => None,
            };
            return target
                .map(|t| Some(Value::String(t)))
                .ok_or_else(|| format!("cannot resolve !GetAtt {inner:?}"));
        }
        if tagged.tag == "If" {
            let parts = inner.as_sequence().filter(|p| p.len() == 3);
            let [condition, then, otherwise] = parts.map(Vec::as_slice).unwrap_or_default() else {
                return Err(format!("!If needs three parts: {inner:?}"));
            };
            let name = condition.as_str().ok_or("!If condition is not a name")?;
            let chosen = if self.condition(name)? {
                then
            } else {
                otherwise
            };
            return self.resolve(chosen);
        }
        Err(format!(
            "the local stack cannot resolve !{} {inner:?}",
            tagged.tag
        ))
    }

    /// Evaluate the condition `name` with the parameter values.
    fn condition(&self, name: &str) -> Result<bool, String> {
        let definition = self
            .doc
            .get("Conditions")
            .and_then(|c| c.get(name))
            .ok_or_else(|| format!("no condition {name}"))?;
        self.evaluate(definition)
    }

    fn evaluate(&self, definition: &Value) -> Result<bool, String> {
        let Value::Tagged(tagged) = definition else {
            return Err(format!("not a condition: {definition:?}"));
        };
        let operands = tagged
            .value
            .as_sequence()
            .map(Vec::as_slice)
            .unwrap_or_default();
        match (tagged.tag.to_string().trim_start_matches('!'), operands) {
            ("Equals", [a, b]) => Ok(self.resolve(a)?.as_ref().and_then(text)
                == self.resolve(b)?.as_ref().and_then(text)),
            ("Not", [inner]) => Ok(!self.evaluate(inner)?),
            (tag, _) => Err(format!("the local stack cannot evaluate !{tag}")),
        }
    }

    /// A plain scalar as text, intrinsic functions resolved.
    fn scalar(&self, value: &Value) -> Option<String> {
        self.resolve(value).ok().flatten().as_ref().and_then(text)
    }
}

/// A scalar as text.
fn text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// A whole number (a YAML number or a numeric string).
fn number(value: &Value) -> Option<u32> {
    match value {
        Value::Number(n) => n.as_u64().and_then(|n| u32::try_from(n).ok()),
        Value::String(s) => s.parse().ok(),
        _ => None,
    }
}

/// `LoggingConfig.<key>` of a function's properties or of `Globals.Function`.
fn logging_setting<'a>(scope: Option<&'a Value>, key: &str) -> Option<&'a Value> {
    scope
        .and_then(|s| s.get("LoggingConfig"))
        .and_then(|c| c.get(key))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_projects_template() {
        let template =
            Template::load(&crate::workspace_root().join("template.yaml")).expect("template");
        let functions = template.functions().expect("functions");
        let mut binaries: Vec<_> = functions.iter().map(|f| f.binary.as_str()).collect();
        binaries.sort();
        assert_eq!(
            binaries,
            ["arrow-worker", "order-processor", "password-hasher"]
        );
        for f in &functions {
            assert!((128..=10_240).contains(&f.memory_mb), "{f:?}");
            assert!(f.env.iter().any(|(k, _)| k == "MEMORY_RETURN"), "{f:?}");
            let format = f.env.iter().find(|(k, _)| k == "AWS_LAMBDA_LOG_FORMAT");
            assert_eq!(format.map(|(_, v)| v.as_str()), Some("JSON"), "{f:?}");
        }
    }

    #[test]
    fn globals_refs_and_defaults() {
        let template = Template::parse(
            r#"
Parameters:
  Size: { Type: Number, Default: 42 }
Globals:
  Function:
    Timeout: 9
    Environment: { Variables: { A: global, B: global } }
Resources:
  Table: { Type: AWS::DynamoDB::Table }
  Fn:
    Type: AWS::Serverless::Function
    Metadata: { BuildProperties: { Binary: fn-bin } }
    Properties:
      Environment:
        Variables:
          B: local
          TABLE: !Ref Table
          N: 5
          SIZE: !Ref Size
"#,
        )
        .expect("parse");
        let f = template.function("fn-bin").expect("function");
        assert_eq!((f.memory_mb, f.timeout_s), (128, 9));
        let env: Vec<_> = f.env.iter().map(|(k, v)| format!("{k}={v}")).collect();
        assert_eq!(
            env,
            ["A=global", "B=local", "TABLE=Table", "N=5", "SIZE=42"]
        );
        assert!(template.function("other").is_err());
    }

    #[test]
    fn unresolvable_values_are_errors() {
        let template = Template::parse(
            "Resources:\n  Fn:\n    Type: AWS::Serverless::Function\n    Metadata: { BuildProperties: { Binary: b } }\n    Properties:\n      MemorySize: lots\n",
        )
        .expect("parse");
        assert!(template.functions().unwrap_err().contains("MemorySize"));
    }

    #[test]
    fn queues_and_sqs_events_of_the_projects_template() {
        let template =
            Template::load(&crate::workspace_root().join("template.yaml")).expect("template");
        let queues = template.queues().expect("queues");
        let ids: Vec<_> = queues.iter().map(|q| q.logical_id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "OrdersDeadLetterQueue",
                "ReportsDeadLetterQueue",
                "OrdersQueue"
            ]
        );
        let orders = &queues[2];
        assert!(!orders.fifo, "OrdersQueueFifo defaults to false");
        assert_eq!(orders.visibility_timeout_s, 180);
        assert_eq!(
            orders.redrive,
            Some(Redrive {
                dead_letter_queue: "OrdersDeadLetterQueue".into(),
                max_receive_count: 5
            })
        );
        let sources = template.sqs_sources().expect("sources");
        assert_eq!(
            sources,
            [SqsSource {
                function: "order-processor".into(),
                queue: "OrdersQueue".into(),
                batch_size: 10,
                batching_window_s: 0,
                report_batch_item_failures: true,
            }]
        );
    }

    #[test]
    fn conditions_pick_fifo_and_novalue() {
        let template = Template::parse(
            r#"
Parameters:
  Fifo: { Type: String, Default: "true" }
Conditions:
  IsFifo: !Equals [!Ref Fifo, "true"]
  NotFifo: !Not [!Equals [!Ref Fifo, "true"]]
Resources:
  Q:
    Type: AWS::SQS::Queue
    Properties:
      FifoQueue: !If [IsFifo, true, !Ref AWS::NoValue]
      ContentBasedDeduplication: !If [NotFifo, true, !Ref AWS::NoValue]
"#,
        )
        .expect("parse");
        let queues = template.queues().expect("queues");
        assert!(queues[0].fifo);
        assert!(!queues[0].content_based_deduplication);
        assert_eq!(queues[0].name(), "Q.fifo");
        assert_eq!(queues[0].visibility_timeout_s, 30);
        let standard = template.with_parameters(&[("Fifo", "false")]).unwrap();
        assert!(!standard.queues().unwrap()[0].fifo);
        assert!(standard.with_parameters(&[("Nope", "1")]).is_err());
        let bad = Template::parse(
            "Resources:\n  Q:\n    Type: AWS::SQS::Queue\n    Properties:\n      FifoQueue: !If [Missing, true, false]\n",
        )
        .expect("parse");
        assert!(bad.queues().unwrap_err().contains("Missing"));
    }
}

//! Reads `template.yaml`, so local runs use what the template declares (memory,
//! timeout, environment) instead of a second copy of it, and checks what AWS
//! would check: parameter values, the `Rules` ([`Template::check_rules`]) and
//! each SQS event source mapping ([`Template::sqs_sources`]).
//!
//! Locally every resource's physical name is its logical id: `!Ref OrdersTable`
//! resolves to `"OrdersTable"`, the name the local stack gives that table; a
//! `!Ref` to a parameter resolves to the value given with
//! [`Template::with_parameters`], else to the parameter's `Default`.

use crate::lambda_rules::SqsMapping;
use crate::managed_instances::ManagedInstances;
use serde_norway::Value;
use std::path::Path;
use std::sync::Arc;

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
    /// `ReservedConcurrentExecutions`: most invocations at once, throttled past it.
    pub reserved_concurrency: Option<u32>,
}

/// The parsed template.
#[derive(Debug, Clone)]
pub struct Template {
    /// Shared: a template with other parameter values is a cheap copy.
    doc: Arc<Value>,
    /// Parameter values given instead of the defaults (`sam deploy --parameter-overrides`).
    overrides: Vec<(String, String)>,
}

/// A template parameter and the values it allows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parameter {
    /// Its name, e.g. `OrderBatchSize`.
    pub name: String,
    /// `Default`, as text.
    pub default: Option<String>,
    /// `AllowedValues`, as text.
    pub allowed_values: Option<Vec<String>>,
    /// `MinValue`.
    pub min_value: Option<i64>,
    /// `MaxValue`.
    pub max_value: Option<i64>,
}

impl Parameter {
    /// Every value the parameter allows, if they can be listed: its
    /// `AllowedValues`, else `MinValue..=MaxValue`; `None` for a free value.
    pub fn every_value(&self) -> Option<Vec<String>> {
        match (&self.allowed_values, self.min_value, self.max_value) {
            (Some(values), _, _) => Some(values.clone()),
            (None, Some(min), Some(max)) => Some((min..=max).map(|n| n.to_string()).collect()),
            _ => None,
        }
    }

    /// `Err` if CloudFormation would refuse `value` for this parameter.
    pub fn check(&self, value: &str) -> Result<(), String> {
        let name = &self.name;
        if let Some(allowed) = &self.allowed_values
            && !allowed.iter().any(|a| a == value)
        {
            return Err(format!(
                "{name}={value:?} is not one of its AllowedValues {allowed:?}"
            ));
        }
        if self.min_value.is_some() || self.max_value.is_some() {
            let number: f64 = value
                .parse()
                .map_err(|_| format!("{name}={value:?} is not a number"))?;
            let below = self.min_value.is_some_and(|min| number < min as f64);
            let above = self.max_value.is_some_and(|max| number > max as f64);
            if below || above {
                return Err(format!(
                    "{name}={value} is outside MinValue..MaxValue ({:?}..{:?})",
                    self.min_value, self.max_value
                ));
            }
        }
        Ok(())
    }
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
            doc: Arc::new(doc),
            overrides: Vec::new(),
        })
    }

    /// The same template deployed with these parameter values instead of the
    /// defaults, as `sam deploy --parameter-overrides` would. A name the
    /// template does not declare, or a value outside the parameter's
    /// `AllowedValues` or `MinValue`..`MaxValue`, is an error, as in
    /// CloudFormation. (`Rules` are checked by [`Template::check_rules`].)
    pub fn with_parameters(mut self, values: &[(&str, &str)]) -> Result<Self, String> {
        for (name, value) in values {
            let parameter = self
                .parameters()?
                .into_iter()
                .find(|p| p.name == *name)
                .ok_or_else(|| format!("template.yaml has no parameter {name}"))?;
            parameter.check(value)?;
            self.overrides.retain(|(n, _)| n != name);
            self.overrides
                .push(((*name).to_owned(), (*value).to_owned()));
        }
        Ok(self)
    }

    /// Every parameter the template declares, in order.
    pub fn parameters(&self) -> Result<Vec<Parameter>, String> {
        let Some(parameters) = self.doc.get("Parameters").and_then(Value::as_mapping) else {
            return Ok(Vec::new());
        };
        parameters
            .iter()
            .map(|(name, declaration)| {
                let name = name.as_str().ok_or("a parameter name is not a string")?;
                let bound = |key: &str| -> Result<Option<i64>, String> {
                    declaration.get(key).map_or(Ok(None), |v| {
                        v.as_i64()
                            .map(Some)
                            .ok_or_else(|| format!("{name}.{key} is not a whole number: {v:?}"))
                    })
                };
                let allowed_values = match declaration.get("AllowedValues") {
                    None => None,
                    Some(values) => Some(
                        values
                            .as_sequence()
                            .ok_or_else(|| format!("{name}.AllowedValues is not a list"))?
                            .iter()
                            .map(|v| text(v).ok_or_else(|| format!("{name}: {v:?}")))
                            .collect::<Result<Vec<_>, _>>()?,
                    ),
                };
                Ok(Parameter {
                    name: name.to_owned(),
                    default: declaration.get("Default").and_then(text),
                    allowed_values,
                    min_value: bound("MinValue")?,
                    max_value: bound("MaxValue")?,
                })
            })
            .collect()
    }

    /// The template's `Rules`, evaluated with the parameter values as
    /// CloudFormation does before it creates or updates the stack: `Err` with
    /// the `AssertDescription` of the first failed assertion whose rule
    /// applies (its `RuleCondition` holds, or it has none).
    pub fn check_rules(&self) -> Result<(), String> {
        let rules = self.doc.get("Rules").and_then(Value::as_mapping);
        for (name, rule) in rules.into_iter().flatten() {
            let name = name.as_str().unwrap_or("?");
            if let Some(condition) = rule.get("RuleCondition")
                && !self.evaluate(condition)?
            {
                continue;
            }
            let assertions = rule
                .get("Assertions")
                .and_then(Value::as_sequence)
                .ok_or_else(|| format!("rule {name} has no Assertions"))?;
            for assertion in assertions {
                let assert = assertion
                    .get("Assert")
                    .ok_or_else(|| format!("rule {name}: an assertion has no Assert"))?;
                if !self.evaluate(assert)? {
                    let description = assertion
                        .get("AssertDescription")
                        .and_then(Value::as_str)
                        .unwrap_or("(no AssertDescription)");
                    return Err(format!("rule {name}: {description}"));
                }
            }
        }
        Ok(())
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

    /// Every serverless function, `Globals.Function` applied, each checked
    /// as Lambda checks it (its Lambda Managed Instances settings too: see
    /// [`Template::functions_with_capacity`]).
    pub fn functions(&self) -> Result<Vec<Function>, String> {
        Ok(self
            .functions_with_capacity()?
            .into_iter()
            .map(|(function, _)| function)
            .collect())
    }

    /// Every serverless function with where it runs: on Lambda Managed
    /// Instances (its `CapacityProviderConfig`, checked with its `MemorySize`
    /// as Lambda checks them), or on demand (`None`). A property given by
    /// `!If` is the branch its condition picks; `!Ref AWS::NoValue` leaves it
    /// out (Lambda's default, not the `Globals` value: SAM merges `Globals`
    /// before CloudFormation resolves conditions).
    pub fn functions_with_capacity(
        &self,
    ) -> Result<Vec<(Function, Option<ManagedInstances>)>, String> {
        let globals = self.doc.get("Globals").and_then(|g| g.get("Function"));
        self.resources("AWS::Serverless::Function")
            .into_iter()
            .map(|(logical_id, resource)| self.read_function(logical_id, resource, globals))
            .collect()
    }

    /// The Lambda Managed Instances settings of `function` (`None`: it runs
    /// on demand), as [`Template::functions_with_capacity`] reads them.
    pub fn managed_instances(
        &self,
        function: &Function,
    ) -> Result<Option<ManagedInstances>, String> {
        self.functions_with_capacity()?
            .into_iter()
            .find(|(f, _)| f.logical_id == function.logical_id)
            .map(|(_, managed)| managed)
            .ok_or_else(|| format!("template.yaml has no function {}", function.logical_id))
    }

    /// The function `logical_id` (`resource`), with `globals` applied.
    fn read_function(
        &self,
        logical_id: String,
        resource: &Value,
        globals: Option<&Value>,
    ) -> Result<(Function, Option<ManagedInstances>), String> {
        let props = resource.get("Properties");
        // The function's own property wins over `Globals`, even when it
        // resolves to `AWS::NoValue` (then it is left out).
        let prop = |name: &str| -> Result<Option<Value>, String> {
            match props
                .and_then(|p| p.get(name))
                .or_else(|| globals.and_then(|g| g.get(name)))
            {
                None => Ok(None),
                Some(v) => self
                    .resolve(v)
                    .map_err(|e| format!("{logical_id}.{name}: {e}")),
            }
        };
        let whole = |name: &str, default: u32| -> Result<u32, String> {
            match prop(name)? {
                None => Ok(default),
                Some(v) => {
                    number(&v).ok_or_else(|| format!("{logical_id}.{name} is not a number: {v:?}"))
                }
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
            for (key, value) in self.variables(&logical_id, scope)? {
                env.retain(|(k, _)| *k != key);
                env.push((key, value));
            }
        }
        let memory_mb = whole("MemorySize", 128)?;
        let managed_instances = match prop("CapacityProviderConfig")? {
            None => None,
            Some(config) => Some(self.capacity_provider_config(&logical_id, &config, memory_mb)?),
        };
        let function = Function {
            memory_mb,
            timeout_s: whole("Timeout", 3)?,
            reserved_concurrency: prop("ReservedConcurrentExecutions")?
                .map(|v| {
                    number(&v).ok_or_else(|| {
                        format!("{logical_id}: ReservedConcurrentExecutions is not a whole number")
                    })
                })
                .transpose()?,
            logical_id,
            binary,
            env,
        };
        Ok((function, managed_instances))
    }

    /// `Environment.Variables` of `scope` (a function's properties or
    /// `Globals.Function`), resolved; a variable whose value is
    /// `!Ref AWS::NoValue` is left out, as CloudFormation leaves it out.
    fn variables(
        &self,
        logical_id: &str,
        scope: Option<&Value>,
    ) -> Result<Vec<(String, String)>, String> {
        let resolved = |value: Option<&Value>, what: &str| -> Result<Option<Value>, String> {
            value.map_or(Ok(None), |v| {
                self.resolve(v)
                    .map_err(|e| format!("{logical_id}.{what}: {e}"))
            })
        };
        let environment = resolved(scope.and_then(|s| s.get("Environment")), "Environment")?;
        let variables = resolved(
            environment.as_ref().and_then(|e| e.get("Variables")),
            "Environment.Variables",
        )?;
        let mut found = Vec::new();
        for (key, value) in variables.iter().filter_map(Value::as_mapping).flatten() {
            let key = key.as_str().ok_or("environment key is not a string")?;
            let unresolvable =
                || format!("{logical_id}: {key} has a value the local runner cannot resolve");
            let resolved = self
                .resolve(value)
                .map_err(|e| format!("{}: {e}", unresolvable()))?;
            match resolved {
                None => {}
                Some(value) => found.push((key.to_owned(), text(&value).ok_or_else(unresolvable)?)),
            }
        }
        Ok(found)
    }

    /// A function's resolved `CapacityProviderConfig` (SAM's form: `Arn`,
    /// `ExecutionEnvironmentMemoryGiBPerVCpu`,
    /// `PerExecutionEnvironmentMaxConcurrency`), checked with its `memory_mb`.
    fn capacity_provider_config(
        &self,
        logical_id: &str,
        config: &Value,
        memory_mb: u32,
    ) -> Result<ManagedInstances, String> {
        let field = |key: &str| -> Result<Option<Value>, String> {
            config.get(key).map_or(Ok(None), |v| {
                self.resolve(v)
                    .map_err(|e| format!("{logical_id}.CapacityProviderConfig.{key}: {e}"))
            })
        };
        let decimal = |key: &str| -> Result<Option<f64>, String> {
            field(key)?
                .map(|v| {
                    decimal(&v).ok_or_else(|| {
                        format!("{logical_id}.CapacityProviderConfig.{key} is not a number: {v:?}")
                    })
                })
                .transpose()
        };
        if field("Arn")?.as_ref().and_then(text).is_none() {
            return Err(format!(
                "Lambda refuses {logical_id}: CapacityProviderConfig has no Arn"
            ));
        }
        ManagedInstances::checked(
            logical_id,
            decimal("ExecutionEnvironmentMemoryGiBPerVCpu")?,
            decimal("PerExecutionEnvironmentMaxConcurrency")?,
            memory_mb,
        )
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

/// An `AWS::CloudWatch::Alarm` on one metric.
#[derive(Debug, Clone, PartialEq)]
pub struct Alarm {
    /// Logical id, e.g. `OrdersDeadLetterAlarm`.
    pub logical_id: String,
    /// `Namespace`, e.g. `AWS/SQS`.
    pub namespace: String,
    /// `MetricName`.
    pub metric: String,
    /// `Dimensions` as (name, value); a resource's value is its logical id.
    pub dimensions: Vec<(String, String)>,
    /// `Threshold`.
    pub threshold: f64,
    /// `AlarmActions`: what it notifies (logical ids of topics).
    pub actions: Vec<String>,
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

    /// Every `AWS::CloudWatch::Alarm`, its references resolved.
    pub fn alarms(&self) -> Result<Vec<Alarm>, String> {
        self.resources("AWS::CloudWatch::Alarm")
            .into_iter()
            .map(|(logical_id, resource)| {
                let scalar = |name: &str| -> Result<String, String> {
                    self.property(resource, name)?
                        .as_ref()
                        .and_then(text)
                        .ok_or_else(|| format!("{logical_id}.{name} is missing or not a scalar"))
                };
                let list = |name: &str| -> Result<Vec<Value>, String> {
                    Ok(self
                        .property(resource, name)?
                        .and_then(|v| v.as_sequence().cloned())
                        .unwrap_or_default())
                };
                let mut dimensions = Vec::new();
                for dimension in list("Dimensions")? {
                    let part = |key: &str| -> Result<String, String> {
                        let value = dimension
                            .get(key)
                            .ok_or_else(|| format!("{logical_id}: a dimension has no {key}"))?;
                        self.resolve(value)?
                            .as_ref()
                            .and_then(text)
                            .ok_or_else(|| format!("{logical_id}: dimension {key} {value:?}"))
                    };
                    dimensions.push((part("Name")?, part("Value")?));
                }
                let mut actions = Vec::new();
                for action in list("AlarmActions")? {
                    actions.extend(self.resolve(&action)?.as_ref().and_then(text));
                }
                let threshold = scalar("Threshold")?;
                Ok(Alarm {
                    namespace: scalar("Namespace")?,
                    metric: scalar("MetricName")?,
                    threshold: threshold
                        .parse()
                        .map_err(|_| format!("{logical_id}.Threshold: {threshold}"))?,
                    dimensions,
                    actions,
                    logical_id,
                })
            })
            .collect()
    }

    /// A resource's property that is text (`Name`, say), resolved; `None`
    /// if absent or `AWS::NoValue`.
    pub fn text_property(&self, resource: &Value, name: &str) -> Result<Option<String>, String> {
        match self.property(resource, name)? {
            None => Ok(None),
            Some(value) => text(&value)
                .map(Some)
                .ok_or_else(|| format!("{name} is not text: {value:?}")),
        }
    }

    /// Whether a resource's `Tracing: {Enabled: ...}` (a state machine's)
    /// is on, resolved; off when absent.
    pub fn tracing_enabled(&self, resource: &Value) -> Result<bool, String> {
        let Some(tracing) = self.property(resource, "Tracing")? else {
            return Ok(false);
        };
        match tracing
            .get("Enabled")
            .map(|v| self.resolve(v))
            .transpose()?
            .flatten()
        {
            None => Ok(false),
            Some(Value::Bool(enabled)) => Ok(enabled),
            Some(other) => Err(format!("Tracing.Enabled is not true or false: {other:?}")),
        }
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
    /// id), `!FindInMap`, `!Join`, `!Split`, `!Select`, `!If` over conditions
    /// made of `!Equals`, `!Not`, `!And` and `!Or`, in the short form or the
    /// long one (`Fn::If`). A list parameter (`CommaDelimitedList`,
    /// `List<...>`) is a list. `None` for `!Ref AWS::NoValue`.
    fn resolve(&self, value: &Value) -> Result<Option<Value>, String> {
        let Some((tag, inner)) = intrinsic(value) else {
            return Ok(Some(value.clone()));
        };
        match tag.as_str() {
            "Ref" => self.reference(inner.as_str().ok_or("!Ref of a non-string")?),
            "Sub" => self.sub(inner),
            "GetAtt" => get_att(inner),
            "FindInMap" => self.find_in_map(inner),
            "Join" => self.join(inner),
            "Split" => self.split(inner),
            "Select" => self.select(inner),
            "If" => self.if_then_else(inner),
            _ => Err(format!("the local stack cannot resolve !{tag} {inner:?}")),
        }
    }

    /// `!Sub text` or `!Sub [text, {variables}]` (see [`Template::substitute`]).
    fn sub(&self, inner: &Value) -> Result<Option<Value>, String> {
        let (text, variables) = match inner {
            Value::String(text) => (text.as_str(), None),
            Value::Sequence(parts) => match parts.as_slice() {
                [Value::String(text), Value::Mapping(variables)] => {
                    (text.as_str(), Some(variables))
                }
                _ => return Err(format!("!Sub needs a string and a map: {inner:?}")),
            },
            _ => return Err(format!("!Sub of {inner:?}")),
        };
        self.substitute(text, variables)
            .map(|s| Some(Value::String(s)))
    }

    /// `!FindInMap [map, key, key]`, the keys resolved.
    fn find_in_map(&self, inner: &Value) -> Result<Option<Value>, String> {
        let parts = inner.as_sequence().filter(|p| p.len() == 3);
        let keys = parts
            .ok_or_else(|| format!("!FindInMap needs three parts: {inner:?}"))?
            .iter()
            .map(|part| {
                self.resolve(part)?
                    .as_ref()
                    .and_then(text)
                    .ok_or_else(|| format!("!FindInMap key {part:?} is not text"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let found = keys
            .iter()
            .try_fold(self.doc.get("Mappings"), |at, key| {
                at.map(|at| at.get(key.as_str()))
            })
            .flatten()
            .ok_or_else(|| format!("Mappings has no {}", keys.join(".")))?;
        self.resolve(found)
    }

    /// `!Join [delimiter, list]`: the list's items (resolved, as text)
    /// joined; an item that is `AWS::NoValue` is left out.
    fn join(&self, inner: &Value) -> Result<Option<Value>, String> {
        let [delimiter, list] = inner.as_sequence().map(Vec::as_slice).unwrap_or_default() else {
            return Err(format!("!Join needs a delimiter and a list: {inner:?}"));
        };
        let delimiter = delimiter.as_str().ok_or("!Join delimiter is not text")?;
        let mut parts = Vec::new();
        for item in &self.list(list, "!Join")? {
            parts.extend(self.resolve(item)?.as_ref().and_then(text));
        }
        Ok(Some(Value::String(parts.join(delimiter))))
    }

    /// `!Split [delimiter, text]`: the list of the text's parts.
    fn split(&self, inner: &Value) -> Result<Option<Value>, String> {
        let [delimiter, source] = inner.as_sequence().map(Vec::as_slice).unwrap_or_default() else {
            return Err(format!("!Split needs a delimiter and a text: {inner:?}"));
        };
        let delimiter = delimiter.as_str().ok_or("!Split delimiter is not text")?;
        let source = self
            .resolve(source)?
            .as_ref()
            .and_then(text)
            .ok_or_else(|| format!("!Split of what is not text: {source:?}"))?;
        Ok(Some(Value::Sequence(
            source
                .split(delimiter)
                .map(|part| Value::String(part.to_owned()))
                .collect(),
        )))
    }

    /// `!Select [index, list]`: the list's item at the index, resolved.
    fn select(&self, inner: &Value) -> Result<Option<Value>, String> {
        let [index, list] = inner.as_sequence().map(Vec::as_slice).unwrap_or_default() else {
            return Err(format!("!Select needs an index and a list: {inner:?}"));
        };
        let index = self
            .resolve(index)?
            .as_ref()
            .and_then(number)
            .ok_or_else(|| format!("!Select index {index:?} is not a whole number"))?;
        let items = self.list(list, "!Select")?;
        let item = usize::try_from(index)
            .ok()
            .and_then(|i| items.get(i))
            .ok_or_else(|| format!("!Select index {index} is past the list's end"))?;
        self.resolve(item)
    }

    /// `value` resolved to a list (the argument of `function`).
    fn list(&self, value: &Value, function: &str) -> Result<Vec<Value>, String> {
        self.resolve(value)?
            .and_then(|l| l.as_sequence().cloned())
            .ok_or_else(|| format!("{function} of what is not a list: {value:?}"))
    }

    /// `!If [condition, then, otherwise]`: the branch the condition picks, resolved.
    fn if_then_else(&self, inner: &Value) -> Result<Option<Value>, String> {
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
        self.resolve(chosen)
    }

    /// `!Ref name`: a pseudo parameter's local value, a parameter's value
    /// (override or default), or a resource's logical id; `None` for
    /// `AWS::NoValue`.
    fn reference(&self, name: &str) -> Result<Option<Value>, String> {
        if name == "AWS::NoValue" {
            return Ok(None);
        }
        if let Some(value) = crate::local_aws::pseudo_parameter(name) {
            return Ok(Some(Value::String(value.to_owned())));
        }
        let Some(parameter) = self.doc.get("Parameters").and_then(|p| p.get(name)) else {
            return Ok(Some(Value::String(name.to_owned())));
        };
        let value = match self.overrides.iter().find(|(n, _)| n == name) {
            Some((_, value)) => Some(Value::String(value.clone())),
            None => parameter
                .get("Default")
                .map_or(Err(format!("parameter {name} has no Default")), |d| {
                    self.resolve(d)
                })?,
        };
        // A list parameter is a list: its text split at the commas.
        let listed = parameter
            .get("Type")
            .and_then(Value::as_str)
            .is_some_and(|t| t == "CommaDelimitedList" || t.starts_with("List<"));
        Ok(match value {
            Some(Value::String(text)) if listed => Some(Value::Sequence(
                text.split(',')
                    .map(|item| Value::String(item.to_owned()))
                    .collect(),
            )),
            other => other,
        })
    }

    /// `!Sub text` with `variables`: each `${Name}` becomes the variable, or
    /// what `!Ref Name` gives; `${Id.Attribute}` the logical id (as
    /// `!GetAtt`); `${!Literal}` stays `${Literal}`.
    fn substitute(
        &self,
        source: &str,
        variables: Option<&serde_norway::Mapping>,
    ) -> Result<String, String> {
        let mut out = String::new();
        let mut rest = source;
        while let Some(start) = rest.find("${") {
            out.push_str(&rest[..start]);
            let after = &rest[start + 2..];
            let end = after
                .find('}')
                .ok_or_else(|| format!("!Sub {source:?}: an unclosed ${{"))?;
            let name = &after[..end];
            rest = &after[end + 1..];
            if let Some(literal) = name.strip_prefix('!') {
                out.push_str("${");
                out.push_str(literal);
                out.push('}');
                continue;
            }
            let variable = variables.and_then(|v| v.get(name));
            let value = match (variable, name.split_once('.')) {
                (Some(value), _) => self.resolve(value)?,
                (None, Some((logical_id, _))) => Some(Value::String(logical_id.to_owned())),
                (None, None) => self.reference(name)?,
            };
            let value = value.as_ref().and_then(text);
            out.push_str(
                &value.ok_or_else(|| format!("!Sub {source:?}: ${{{name}}} is not text"))?,
            );
        }
        out.push_str(rest);
        Ok(out)
    }

    /// Evaluate the condition `name` with the parameter values (the
    /// `Conditions` section).
    fn condition(&self, name: &str) -> Result<bool, String> {
        let definition = self
            .doc
            .get("Conditions")
            .and_then(|c| c.get(name))
            .ok_or_else(|| format!("no condition {name}"))?;
        self.evaluate(definition)
    }

    /// A condition or a rule's assertion: `!Equals`, `!Not`, `!And`, `!Or`,
    /// and, in `Rules`, `!Contains [[values], value]`.
    fn evaluate(&self, definition: &Value) -> Result<bool, String> {
        let Some((tag, inner)) = intrinsic(definition) else {
            return Err(format!("not a condition: {definition:?}"));
        };
        let operands = inner.as_sequence().map(Vec::as_slice).unwrap_or_default();
        match (tag.as_str(), operands) {
            ("Equals", [a, b]) => Ok(self.resolve(a)?.as_ref().and_then(text)
                == self.resolve(b)?.as_ref().and_then(text)),
            ("Not", [inner]) => Ok(!self.evaluate(inner)?),
            ("And", all) if !all.is_empty() => {
                for operand in all {
                    if !self.evaluate(operand)? {
                        return Ok(false);
                    }
                }
                Ok(true)
            }
            ("Or", any) if !any.is_empty() => {
                for operand in any {
                    if self.evaluate(operand)? {
                        return Ok(true);
                    }
                }
                Ok(false)
            }
            ("Contains", [list, value]) => {
                let list = self
                    .resolve(list)?
                    .and_then(|l| l.as_sequence().cloned())
                    .ok_or_else(|| format!("!Contains needs a list first: {list:?}"))?;
                let value = self.resolve(value)?.as_ref().and_then(text);
                let mut members = Vec::new();
                for member in &list {
                    members.push(self.resolve(member)?.as_ref().and_then(text));
                }
                Ok(value.is_some() && members.contains(&value))
            }
            (tag, _) => Err(format!("the local stack cannot evaluate !{tag}")),
        }
    }

    /// A plain scalar as text, intrinsic functions resolved.
    fn scalar(&self, value: &Value) -> Option<String> {
        self.resolve(value).ok().flatten().as_ref().and_then(text)
    }
}

/// A function's `Type: ScheduleV2` event: the EventBridge Scheduler schedule
/// SAM creates, with what happens to the event once the schedule fires (see
/// [`crate::schedule`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    /// The function's binary.
    pub function: String,
    /// The event's name, e.g. `DailyReport`.
    pub name: String,
    /// `ScheduleExpression`, e.g. `cron(15 0 * * ? *)`.
    pub expression: String,
    /// `ScheduleExpressionTimezone` (Scheduler's default, `UTC`, if absent).
    pub timezone: String,
    /// `Input`, as written: the payload of each invocation (a JSON text; `{}`
    /// if absent).
    pub input: String,
    /// `RetryPolicy`: how often Scheduler retries an invocation Lambda did not accept.
    pub retry_policy: RetryPolicy,
    /// The function's `EventInvokeConfig.MaximumRetryAttempts`: how often
    /// Lambda retries the event after a function error (its default, 2, if absent).
    pub lambda_retries: u32,
    /// Logical id of the function's `DeadLetterQueue` (an SQS queue), where
    /// Lambda sends the event after its last retry.
    pub dead_letter_queue: Option<String>,
}

/// A schedule's `RetryPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// `MaximumRetryAttempts` (Scheduler's default, 185, if absent).
    pub maximum_retry_attempts: u32,
    /// `MaximumEventAgeInSeconds` (Scheduler's default, 86,400, if absent).
    pub maximum_event_age_s: u32,
}

impl Template {
    /// Every `Type: ScheduleV2` event of every function, with the function's
    /// `EventInvokeConfig` retries and `DeadLetterQueue` (`Globals` applied).
    pub fn schedules(&self) -> Result<Vec<Schedule>, String> {
        let globals = self.doc.get("Globals").and_then(|g| g.get("Function"));
        let mut schedules = Vec::new();
        for function in self.functions()? {
            let resource = self
                .resources("AWS::Serverless::Function")
                .into_iter()
                .find(|(id, _)| *id == function.logical_id)
                .map(|(_, r)| r);
            let props = resource.and_then(|r| r.get("Properties"));
            let prop = |name: &str| {
                props
                    .and_then(|p| p.get(name))
                    .or_else(|| globals.and_then(|g| g.get(name)))
            };
            let id = &function.logical_id;
            let lambda_retries = self.lambda_retries(id, prop("EventInvokeConfig"))?;
            let dead_letter_queue = self.dead_letter_queue(id, prop("DeadLetterQueue"))?;
            let events = props
                .and_then(|p| p.get("Events"))
                .and_then(Value::as_mapping);
            for (name, event) in events.into_iter().flatten() {
                if event.get("Type").and_then(Value::as_str) != Some("ScheduleV2") {
                    continue;
                }
                let name = name.as_str().unwrap_or("?").to_owned();
                schedules.push(self.schedule(
                    &function,
                    name,
                    event,
                    lambda_retries,
                    dead_letter_queue.clone(),
                )?);
            }
        }
        Ok(schedules)
    }

    /// What Lambda does with `function`'s asynchronous events: its
    /// `EventInvokeConfig.MaximumRetryAttempts` (2 if absent) and the logical
    /// id of its `DeadLetterQueue`, if any (`Globals` applied).
    pub fn event_invoke(&self, function: &Function) -> Result<(u32, Option<String>), String> {
        let globals = self.doc.get("Globals").and_then(|g| g.get("Function"));
        let props = self
            .resources("AWS::Serverless::Function")
            .into_iter()
            .find(|(id, _)| *id == function.logical_id)
            .and_then(|(_, r)| r.get("Properties"));
        let prop = |name: &str| {
            props
                .and_then(|p| p.get(name))
                .or_else(|| globals.and_then(|g| g.get(name)))
        };
        let id = &function.logical_id;
        Ok((
            self.lambda_retries(id, prop("EventInvokeConfig"))?,
            self.dead_letter_queue(id, prop("DeadLetterQueue"))?,
        ))
    }

    /// `EventInvokeConfig.MaximumRetryAttempts` of the function `id` (`config`
    /// its `EventInvokeConfig`): 0, 1 or 2, Lambda's default (2) if absent.
    fn lambda_retries(&self, id: &str, config: Option<&Value>) -> Result<u32, String> {
        match config.and_then(|c| c.get("MaximumRetryAttempts")) {
            None => Ok(2),
            Some(v) => self
                .resolve(v)?
                .as_ref()
                .and_then(number)
                .filter(|n| *n <= 2)
                .ok_or_else(|| {
                    format!("{id}.EventInvokeConfig.MaximumRetryAttempts is not 0, 1 or 2: {v:?}")
                }),
        }
    }

    /// The `TargetArn` of the function `id`'s `DeadLetterQueue` (`dlq`), which
    /// must be of `Type: SQS`; `None` without one.
    fn dead_letter_queue(&self, id: &str, dlq: Option<&Value>) -> Result<Option<String>, String> {
        let Some(dlq) = dlq else {
            return Ok(None);
        };
        let kind = dlq.get("Type").and_then(|t| self.scalar(t));
        if kind.as_deref() != Some("SQS") {
            return Err(format!(
                "{id}.DeadLetterQueue: the local stack runs only Type: SQS, not {kind:?}"
            ));
        }
        let target = dlq
            .get("TargetArn")
            .and_then(|t| self.scalar(t))
            .ok_or_else(|| format!("{id}.DeadLetterQueue has no TargetArn"))?;
        Ok(Some(target))
    }

    /// The `ScheduleV2` event `name` (`event`) of `function`, its properties
    /// checked and Scheduler's defaults applied.
    fn schedule(
        &self,
        function: &Function,
        name: String,
        event: &Value,
        lambda_retries: u32,
        dead_letter_queue: Option<String>,
    ) -> Result<Schedule, String> {
        let id = &function.logical_id;
        let at = |key: &str| -> Result<Option<Value>, String> {
            event
                .get("Properties")
                .and_then(|p| p.get(key))
                .map_or(Ok(None), |v| self.resolve(v))
        };
        let scalar = |key: &str| -> Result<Option<String>, String> {
            at(key)?.map_or(Ok(None), |v| {
                text(&v)
                    .map(Some)
                    .ok_or_else(|| format!("{id} {name}.{key} is not text: {v:?}"))
            })
        };
        let expression = scalar("ScheduleExpression")?
            .ok_or_else(|| format!("{id} {name} has no ScheduleExpression"))?;
        let input = scalar("Input")?.unwrap_or_else(|| "{}".to_owned());
        serde_json::from_str::<serde_json::Value>(&input)
            .map_err(|e| format!("{id} {name}.Input is not JSON ({e}): {input:.80}"))?;
        let policy = at("RetryPolicy")?;
        let bound = |key: &str, default: u32, max: u32| -> Result<u32, String> {
            match policy.as_ref().and_then(|p| p.get(key)) {
                None => Ok(default),
                Some(v) => self
                    .resolve(v)?
                    .as_ref()
                    .and_then(number)
                    .filter(|n| *n <= max)
                    .ok_or_else(|| {
                        format!("{id} {name}.RetryPolicy.{key} is not 0..={max}: {v:?}")
                    }),
            }
        };
        Ok(Schedule {
            function: function.binary.clone(),
            timezone: scalar("ScheduleExpressionTimezone")?.unwrap_or_else(|| "UTC".to_owned()),
            retry_policy: RetryPolicy {
                maximum_retry_attempts: bound("MaximumRetryAttempts", 185, 185)?,
                maximum_event_age_s: bound("MaximumEventAgeInSeconds", 86_400, 86_400)?,
            },
            lambda_retries,
            dead_letter_queue,
            name,
            expression,
            input,
        })
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

/// `!GetAtt X.Attr` or `!GetAtt [X, Attr]`: the logical id `X` (locally a
/// resource's name is its id).
fn get_att(inner: &Value) -> Result<Option<Value>, String> {
    let target = match inner {
        Value::String(s) => s.split('.').next().map(str::to_owned),
        Value::Sequence(parts) => parts.first().and_then(Value::as_str).map(str::to_owned),
        _ => None,
    };
    target
        .map(|t| Some(Value::String(t)))
        .ok_or_else(|| format!("cannot resolve !GetAtt {inner:?}"))
}

/// An intrinsic function's name (`Ref`, `If`, `Sub`, ...) and argument, in
/// YAML's short form (`!If [...]`) or the long one (`Fn::If: [...]`, `Ref: X`);
/// `None` for any other value.
fn intrinsic(value: &Value) -> Option<(String, &Value)> {
    match value {
        Value::Tagged(tagged) => Some((
            tagged.tag.to_string().trim_start_matches('!').to_owned(),
            &tagged.value,
        )),
        Value::Mapping(mapping) if mapping.len() == 1 => {
            let (key, inner) = mapping.iter().next()?;
            let key = key.as_str()?;
            let name = if key == "Ref" {
                key
            } else {
                key.strip_prefix("Fn::")?
            };
            Some((name.to_owned(), inner))
        }
        _ => None,
    }
}

/// A number, whole or not (a YAML number or a numeric string).
fn decimal(value: &Value) -> Option<f64> {
    match value {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse().ok(),
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

/// A function's `FunctionUrlConfig`: the Function URL SAM creates for it
/// (`AWS::Lambda::Url`), served locally by [`crate::function_url`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FunctionUrlConfig {
    /// `AuthType`: who may call the URL.
    pub auth_type: AuthType,
    /// `Cors`: the cross-origin settings, if any.
    pub cors: Option<Cors>,
}

/// A Function URL's `AuthType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthType {
    /// `AWS_IAM`: every request signed with SigV4 for the service `lambda`.
    AwsIam,
    /// `NONE`: anyone may call it.
    None,
}

/// A Function URL's `Cors` (CloudFormation's `AWS::Lambda::Url Cors`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Cors {
    /// `AllowCredentials` (default false).
    pub allow_credentials: bool,
    /// `AllowHeaders`.
    pub allow_headers: Vec<String>,
    /// `AllowMethods` (`GET`, `POST`, ..., or `*`).
    pub allow_methods: Vec<String>,
    /// `AllowOrigins` (`https://www.example.com`, ..., or `*`).
    pub allow_origins: Vec<String>,
    /// `ExposeHeaders`.
    pub expose_headers: Vec<String>,
    /// `MaxAge` in seconds (0 to 86,400).
    pub max_age: Option<u32>,
}

impl Template {
    /// The `FunctionUrlConfig` of `function` (its own, else `Globals.Function`'s);
    /// `None` if it has no Function URL. Values CloudFormation would refuse
    /// (an unknown `AuthType`, `MaxAge` past 86,400, a method not in
    /// Lambda's list) are errors.
    pub fn function_url(&self, function: &Function) -> Result<Option<FunctionUrlConfig>, String> {
        let id = &function.logical_id;
        let own = self
            .doc
            .get("Resources")
            .and_then(|r| r.get(id.as_str()))
            .and_then(|r| r.get("Properties"))
            .and_then(|p| p.get("FunctionUrlConfig"));
        let global = self
            .doc
            .get("Globals")
            .and_then(|g| g.get("Function"))
            .and_then(|f| f.get("FunctionUrlConfig"));
        let Some(config) = own.or(global) else {
            return Ok(None);
        };
        let Some(config) = self.resolve(config)? else {
            return Ok(None);
        };
        let field = |value: &Value, name: &str| -> Result<Option<Value>, String> {
            value.get(name).map_or(Ok(None), |v| self.resolve(v))
        };
        let auth_type = match field(&config, "AuthType")?
            .as_ref()
            .and_then(text)
            .as_deref()
        {
            Some("AWS_IAM") => AuthType::AwsIam,
            Some("NONE") => AuthType::None,
            Some(other) => {
                return Err(format!(
                    "{id}.FunctionUrlConfig.AuthType {other:?} is not AWS_IAM or NONE"
                ));
            }
            None => return Err(format!("{id}.FunctionUrlConfig has no AuthType")),
        };
        let cors = match field(&config, "Cors")? {
            None => None,
            Some(cors) => Some(self.cors(id, &cors)?),
        };
        Ok(Some(FunctionUrlConfig { auth_type, cors }))
    }

    /// A `FunctionUrlConfig.Cors` of function `id`, resolved and checked.
    fn cors(&self, id: &str, cors: &Value) -> Result<Cors, String> {
        let field = |name: &str| -> Result<Option<Value>, String> {
            cors.get(name).map_or(Ok(None), |v| self.resolve(v))
        };
        let list = |name: &str| -> Result<Vec<String>, String> {
            match field(name)? {
                None => Ok(Vec::new()),
                Some(Value::Sequence(items)) => items
                    .iter()
                    .filter_map(|item| self.resolve(item).transpose())
                    .map(|item| {
                        item.and_then(|v| {
                            text(&v)
                                .ok_or_else(|| format!("{id}.FunctionUrlConfig.Cors.{name}: {v:?}"))
                        })
                    })
                    .collect(),
                Some(other) => Err(format!(
                    "{id}.FunctionUrlConfig.Cors.{name} is not a list: {other:?}"
                )),
            }
        };
        let allow_credentials = match field("AllowCredentials")? {
            None => false,
            Some(Value::Bool(b)) => b,
            Some(Value::String(s)) if s == "true" || s == "false" => s == "true",
            Some(other) => {
                return Err(format!(
                    "{id}.FunctionUrlConfig.Cors.AllowCredentials is not a boolean: {other:?}"
                ));
            }
        };
        let max_age = match field("MaxAge")? {
            None => None,
            Some(v) => Some(number(&v).filter(|n| *n <= 86_400).ok_or_else(|| {
                format!("{id}.FunctionUrlConfig.Cors.MaxAge is not 0 to 86400: {v:?}")
            })?),
        };
        let allow_methods = list("AllowMethods")?;
        const METHODS: [&str; 7] = ["GET", "PUT", "HEAD", "POST", "PATCH", "DELETE", "*"];
        if let Some(bad) = allow_methods
            .iter()
            .find(|m| !METHODS.contains(&m.as_str()))
        {
            return Err(format!(
                "{id}.FunctionUrlConfig.Cors.AllowMethods: {bad:?} is not one of {METHODS:?}"
            ));
        }
        Ok(Cors {
            allow_credentials,
            allow_headers: list("AllowHeaders")?,
            allow_methods,
            allow_origins: list("AllowOrigins")?,
            expose_headers: list("ExposeHeaders")?,
            max_age,
        })
    }
}

#[cfg(test)]
mod function_url_tests {
    use super::*;

    #[test]
    fn the_password_hashers_url_is_signed_with_iam() {
        let template =
            Template::load(&crate::workspace_root().join("template.yaml")).expect("template");
        let hasher = template.function("password-hasher").expect("hasher");
        let config = template.function_url(&hasher).expect("valid");
        assert_eq!(
            config.map(|c| c.auth_type),
            Some(AuthType::AwsIam),
            "the hasher's FunctionUrlConfig"
        );
        let worker = template.function("arrow-worker").expect("worker");
        assert_eq!(template.function_url(&worker), Ok(None));
    }

    const WITH_CORS: &str = r#"
Parameters:
  Origin: { Type: String, Default: "https://app.example.com" }
Globals:
  Function:
    FunctionUrlConfig: { AuthType: NONE }
Resources:
  Fn:
    Type: AWS::Serverless::Function
    Metadata: { BuildProperties: { Binary: fn-bin } }
    Properties:
      FunctionUrlConfig:
        AuthType: AWS_IAM
        Cors:
          AllowOrigins: [!Ref Origin, "http://localhost:3000"]
          AllowMethods: [POST, GET]
          AllowHeaders: [content-type, x-custom]
          ExposeHeaders: [x-request-id]
          MaxAge: 300
          AllowCredentials: true
  Other:
    Type: AWS::Serverless::Function
    Metadata: { BuildProperties: { Binary: other-bin } }
"#;

    #[test]
    fn cors_settings_and_globals_are_read() {
        let template = Template::parse(WITH_CORS).expect("parse");
        let function = template.function("fn-bin").expect("fn");
        assert_eq!(
            template.function_url(&function),
            Ok(Some(FunctionUrlConfig {
                auth_type: AuthType::AwsIam,
                cors: Some(Cors {
                    allow_credentials: true,
                    allow_headers: vec!["content-type".into(), "x-custom".into()],
                    allow_methods: vec!["POST".into(), "GET".into()],
                    allow_origins: vec![
                        "https://app.example.com".into(),
                        "http://localhost:3000".into()
                    ],
                    expose_headers: vec!["x-request-id".into()],
                    max_age: Some(300),
                }),
            }))
        );
        let other = template.function("other-bin").expect("other");
        assert_eq!(
            template.function_url(&other),
            Ok(Some(FunctionUrlConfig {
                auth_type: AuthType::None,
                cors: None
            }))
        );
    }

    #[test]
    fn what_cloudformation_refuses_is_an_error() {
        for (from, to, says) in [
            ("AuthType: AWS_IAM", "AuthType: IAM", "AuthType"),
            ("MaxAge: 300", "MaxAge: 86401", "MaxAge"),
            ("[POST, GET]", "[POST, OPTIONS]", "OPTIONS"),
            (
                "AllowCredentials: true",
                "AllowCredentials: yes please",
                "AllowCredentials",
            ),
        ] {
            let text = WITH_CORS.replace(from, to);
            assert_ne!(text, WITH_CORS, "{from}");
            let template = Template::parse(&text).expect("parse");
            let function = template.function("fn-bin").expect("fn");
            let error = template.function_url(&function).expect_err(to);
            assert!(error.contains(says), "{error}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_projects_template() {
        let template =
            Template::load(&crate::workspace_root().join("template.yaml")).expect("template");
        let functions = template.functions().expect("functions");
        let mut binaries: Vec<_> = functions.iter().map(|f| f.binary.clone()).collect();
        binaries.sort();
        // One per crate under functions/ (in a user's project, also the
        // functions `cargo xtask new-function` added).
        let crates =
            std::fs::read_dir(crate::workspace_root().join("functions")).expect("functions/");
        let mut crates: Vec<String> = crates
            .map(|entry| {
                entry
                    .expect("functions/")
                    .file_name()
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
        crates.sort();
        assert_eq!(binaries, crates);
        for f in &functions {
            assert!((128..=10_240).contains(&f.memory_mb), "{f:?}");
            assert!(f.env.iter().any(|(k, _)| k == "MEMORY_RETURN"), "{f:?}");
            let format = f.env.iter().find(|(k, _)| k == "AWS_LAMBDA_LOG_FORMAT");
            assert_eq!(format.map(|(_, v)| v.as_str()), Some("JSON"), "{f:?}");
        }
    }

    #[test]
    fn the_projects_daily_report_schedule() {
        let template =
            Template::load(&crate::workspace_root().join("template.yaml")).expect("template");
        assert_eq!(
            template.schedules(),
            Ok(vec![Schedule {
                function: "arrow-worker".into(),
                name: "DailyReport".into(),
                expression: "cron(15 0 * * ? *)".into(),
                timezone: "UTC".into(),
                input: r#"{"operation": "daily_report", "scheduled_time": "<aws.scheduler.scheduled-time>"}"#.into(),
                retry_policy: RetryPolicy {
                    maximum_retry_attempts: 2,
                    maximum_event_age_s: 86_400,
                },
                lambda_retries: 2,
                dead_letter_queue: Some("ReportsDeadLetterQueue".into()),
            }])
        );
    }

    #[test]
    fn schedules_take_defaults_globals_and_refuse_bad_values() {
        let with = |function_props: &str, event_props: &str| {
            Template::parse(&format!(
                r#"
Globals:
  Function:
    EventInvokeConfig: {{ MaximumRetryAttempts: 1 }}
Resources:
  Dlq: {{ Type: AWS::SQS::Queue }}
  Fn:
    Type: AWS::Serverless::Function
    Metadata: {{ BuildProperties: {{ Binary: b }} }}
    Properties:
      {function_props}
      Events:
        Tick:
          Type: ScheduleV2
          Properties: {{ ScheduleExpression: rate(1 hour), {event_props} }}
        Other: {{ Type: SQS, Properties: {{ Queue: !GetAtt Dlq.Arn }} }}
"#
            ))
            .expect("parse")
            .schedules()
        };
        let plain = with("Timeout: 3", "").expect("defaults");
        assert_eq!(
            plain,
            [Schedule {
                function: "b".into(),
                name: "Tick".into(),
                expression: "rate(1 hour)".into(),
                timezone: "UTC".into(),
                input: "{}".into(),
                retry_policy: RetryPolicy {
                    maximum_retry_attempts: 185,
                    maximum_event_age_s: 86_400,
                },
                lambda_retries: 1,
                dead_letter_queue: None,
            }]
        );
        let own = with(
            "DeadLetterQueue: { Type: SQS, TargetArn: !GetAtt Dlq.Arn }\n      EventInvokeConfig: { MaximumRetryAttempts: 0 }",
            "ScheduleExpressionTimezone: Europe/Paris, RetryPolicy: { MaximumRetryAttempts: 0 }",
        );
        let own = own.expect("valid")[0].clone();
        assert_eq!(own.dead_letter_queue.as_deref(), Some("Dlq"));
        assert_eq!(own.lambda_retries, 0);
        assert_eq!(own.timezone, "Europe/Paris");
        assert_eq!(own.retry_policy.maximum_retry_attempts, 0);
        for (function_props, event_props, error) in [
            ("Timeout: 3", "Input: 'not json'", "Input is not JSON"),
            (
                "Timeout: 3",
                "RetryPolicy: { MaximumRetryAttempts: 186 }",
                "MaximumRetryAttempts is not 0..=185",
            ),
            (
                "EventInvokeConfig: { MaximumRetryAttempts: 3 }",
                "",
                "MaximumRetryAttempts is not 0, 1 or 2",
            ),
            (
                "DeadLetterQueue: { Type: SNS, TargetArn: !Ref Dlq }",
                "",
                "only Type: SQS",
            ),
        ] {
            let result = with(function_props, event_props);
            assert!(
                result.as_ref().is_err_and(|e| e.contains(error)),
                "{function_props} {event_props}: {result:?}"
            );
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

    /// The template's contract for Lambda Managed Instances: subnets given
    /// switch every function to its capacity provider and 2,048 MB.
    const MANAGED: &str = r#"
Parameters:
  ManagedInstancesSubnetIds: { Type: CommaDelimitedList, Default: "" }
  Ratio: { Type: Number, Default: 2 }
  Concurrency: { Type: Number, Default: 4 }
  Memory: { Type: Number, Default: 2048 }
Conditions:
  OnManagedInstances: !Not [!Equals [!Join [",", !Ref ManagedInstancesSubnetIds], ""]]
Globals:
  Function:
    Timeout: 9
    MemorySize: 512
Resources:
  Provider: { Type: AWS::Serverless::CapacityProvider }
  Fn:
    Type: AWS::Serverless::Function
    Metadata: { BuildProperties: { Binary: fn-bin } }
    Properties:
      MemorySize: !If [OnManagedInstances, !Ref Memory, 1769]
      Timeout: !If [OnManagedInstances, 30, !Ref AWS::NoValue]
      CapacityProviderConfig: !If
        - OnManagedInstances
        - Arn: !GetAtt Provider.Arn
          ExecutionEnvironmentMemoryGiBPerVCpu: !Ref Ratio
          PerExecutionEnvironmentMaxConcurrency: !Ref Concurrency
        - !Ref AWS::NoValue
      Environment:
        Variables:
          ALWAYS: "1"
          ONLY_ON_LMI: !If [OnManagedInstances, "yes", !Ref AWS::NoValue]
  Plain:
    Type: AWS::Serverless::Function
    Metadata: { BuildProperties: { Binary: plain } }
    Properties:
      Fn::If: [OnManagedInstances, {}, {}]
"#;

    #[test]
    fn conditions_pick_function_properties_and_the_capacity_provider() {
        let template = Template::parse(MANAGED).expect("parse");
        let on_demand = template.functions_with_capacity().expect("on demand");
        let (f, managed) = &on_demand[0];
        // NoValue leaves Timeout out: Lambda's default, not the Globals' 9.
        assert_eq!((f.memory_mb, f.timeout_s, *managed), (1_769, 3, None));
        assert_eq!(f.env, [("ALWAYS".to_owned(), "1".to_owned())]);
        assert_eq!(on_demand[1].0.memory_mb, 512, "Globals apply");
        let lmi = template
            .clone()
            .with_parameters(&[("ManagedInstancesSubnetIds", "subnet-00000000000000000")])
            .expect("allowed");
        let f = lmi.function("fn-bin").expect("function");
        assert_eq!((f.memory_mb, f.timeout_s), (2_048, 30));
        assert_eq!(f.env.len(), 2, "{:?}", f.env);
        assert_eq!(
            lmi.managed_instances(&f),
            Ok(Some(ManagedInstances {
                max_concurrency: 4,
                memory_gib_per_vcpu: 2
            }))
        );
        assert_eq!(
            lmi.managed_instances(&lmi.function("plain").expect("plain")),
            Ok(None)
        );
    }

    #[test]
    fn the_projects_functions_run_on_managed_instances_with_the_local_parameters() {
        let template =
            Template::load(&crate::workspace_root().join("template.yaml")).expect("template");
        let on_demand = template.functions_with_capacity().expect("on demand");
        assert!(on_demand.iter().all(|(_, managed)| managed.is_none()));
        if template
            .parameters()
            .expect("parameters")
            .iter()
            .all(|p| p.name != crate::managed_instances::SUBNETS_PARAMETER)
        {
            eprintln!("skipped: template.yaml has no Lambda Managed Instances parameters yet");
            return;
        }
        let lmi = template
            .with_parameters(&crate::managed_instances::LOCAL_PARAMETERS)
            .expect("the local parameters are allowed");
        assert_eq!(lmi.check_rules(), Ok(()));
        // The template's functions declare one; a function a user added
        // (`cargo xtask new-function`) runs on demand unless it does too.
        let declaring: Vec<String> = lmi
            .resources("AWS::Serverless::Function")
            .into_iter()
            .filter(|(_, f)| {
                f.get("Properties")
                    .and_then(|p| p.get("CapacityProviderConfig"))
                    .is_some()
            })
            .map(|(id, _)| id)
            .collect();
        assert!(
            !declaring.is_empty(),
            "no function declares a CapacityProviderConfig"
        );
        let on_lmi = lmi.functions_with_capacity().expect("checked");
        for (function, managed) in on_lmi
            .into_iter()
            .filter(|(f, _)| declaring.contains(&f.logical_id))
        {
            let managed = managed.unwrap_or_else(|| panic!("{} on demand", function.logical_id));
            assert!(
                managed.vcpus(function.memory_mb) >= 1.0,
                "{}: {managed} at {} MB",
                function.logical_id,
                function.memory_mb
            );
        }
    }

    #[test]
    fn list_parameters_join_select_and_the_long_form() {
        let template = Template::parse(
            "Parameters:\n  Subnets: { Type: CommaDelimitedList, Default: \"a,b\" }\n  Empty: { Type: CommaDelimitedList, Default: \"\" }\n",
        )
        .expect("parse");
        let resolve = |yaml: &str| {
            let value: Value = serde_norway::from_str(yaml).expect("YAML");
            template.resolve(&value).map(|v| v.and_then(|v| text(&v)))
        };
        assert_eq!(
            resolve("!Join [\"+\", !Ref Subnets]"),
            Ok(Some("a+b".into()))
        );
        assert_eq!(resolve("!Join [\"\", !Ref Empty]"), Ok(Some(String::new())));
        assert_eq!(resolve("!Select [1, !Ref Subnets]"), Ok(Some("b".into())));
        assert_eq!(
            resolve("!Select [2, !Split [\",\", \"x,y,z\"]]"),
            Ok(Some("z".into()))
        );
        assert_eq!(
            resolve("{ \"Fn::Select\": [0, { Ref: Subnets }] }"),
            Ok(Some("a".into()))
        );
        assert!(resolve("!Select [2, !Ref Subnets]").is_err());
        assert!(resolve("!Join [\",\", plain]").is_err());
        // An ordinary map of one key is no intrinsic function.
        assert_eq!(
            resolve("{ Variables: x }").map(|t| t.is_none()),
            Ok(true),
            "kept as a map, not text"
        );
    }

    #[test]
    fn managed_instances_settings_lambda_refuses_are_errors() {
        let lmi = |values: &[(&str, &str)]| {
            let mut all = vec![("ManagedInstancesSubnetIds", "subnet-00000000000000000")];
            all.extend_from_slice(values);
            Template::parse(MANAGED)
                .expect("parse")
                .with_parameters(&all)
                .expect("no declared limits")
                .functions()
        };
        assert!(lmi(&[]).is_ok());
        for (values, refused) in [
            (
                &[("Ratio", "3")][..],
                "ExecutionEnvironmentMemoryGiBPerVCpu is 3",
            ),
            (
                &[("Concurrency", "0")][..],
                "PerExecutionEnvironmentMaxConcurrency is 0",
            ),
            (
                &[("Concurrency", "1601")][..],
                "PerExecutionEnvironmentMaxConcurrency is 1601",
            ),
            (&[("Memory", "1024")][..], "MemorySize is 1024 MB"),
        ] {
            let error = lmi(values).expect_err("Lambda refuses it");
            assert!(error.starts_with("Lambda refuses Fn: "), "{error}");
            assert!(error.contains(refused), "{values:?}: {error}");
        }
        let no_arn = Template::parse(
            "Resources:\n  Fn:\n    Type: AWS::Serverless::Function\n    Metadata: { BuildProperties: { Binary: b } }\n    Properties:\n      MemorySize: 2048\n      CapacityProviderConfig: { PerExecutionEnvironmentMaxConcurrency: 2 }\n",
        )
        .expect("parse");
        assert!(no_arn.functions().unwrap_err().contains("has no Arn"));
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
                maximum_concurrency: Some(5),
            }]
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

    #[test]
    fn parameter_values_the_declaration_forbids_are_errors() {
        let template = Template::parse(MAPPING).expect("parse");
        let parameters = template.parameters().expect("parameters");
        let every: Vec<_> = parameters.iter().map(Parameter::every_value).collect();
        assert_eq!(every[1], Some(vec!["0".into(), "1".into(), "300".into()]));
        assert_eq!(every[0].as_ref().map(Vec::len), Some(10_000));
        assert_eq!(every[2], None);
        for (name, value) in [
            ("Window", "2"),
            ("Batch", "0"),
            ("Batch", "10001"),
            ("Batch", "ten"),
            ("Nope", "1"),
        ] {
            let error = template
                .clone()
                .with_parameters(&[(name, value)])
                .unwrap_err();
            assert!(error.contains(name), "{error}");
        }
    }

    #[test]
    fn rules_refuse_with_the_failed_assertions_description() {
        let template = Template::parse(
            r#"
Parameters:
  Batch: { Type: Number, Default: 10 }
  Window: { Type: Number, Default: 0 }
  Fifo: { Type: String, Default: "false" }
Rules:
  SmallBatches:
    RuleCondition: !Or [!Equals [!Ref Window, 0], !Equals [!Ref Fifo, "true"]]
    Assertions:
      - Assert: !Contains [[1, 2, 10], !Ref Batch]
        AssertDescription: Batches above 10 need a window.
  Always:
    Assertions:
      - Assert: !And [!Not [!Equals [!Ref Batch, 3]], !Equals [a, a]]
        AssertDescription: Never 3.
"#,
        )
        .expect("parse");
        assert_eq!(template.check_rules(), Ok(()));
        let with = |values: &[(&str, &str)]| {
            template
                .clone()
                .with_parameters(values)
                .expect("no declared limits")
                .check_rules()
        };
        assert_eq!(with(&[("Batch", "20"), ("Window", "1")]), Ok(()));
        let small = Err("rule SmallBatches: Batches above 10 need a window.".to_owned());
        assert_eq!(with(&[("Batch", "20")]), small);
        assert_eq!(
            with(&[("Batch", "20"), ("Window", "1"), ("Fifo", "true")]),
            small
        );
        assert_eq!(
            with(&[("Batch", "3"), ("Window", "1")]),
            Err("rule Always: Never 3.".to_owned())
        );
    }

    #[test]
    fn alarms_and_dead_letter_queues_resolve_their_references() {
        let template = Template::parse(
            r#"
Resources:
  Dlq: { Type: AWS::SQS::Queue }
  FnDlq: { Type: AWS::SQS::Queue }
  Q:
    Type: AWS::SQS::Queue
    Properties:
      RedrivePolicy: { deadLetterTargetArn: !GetAtt Dlq.Arn, maxReceiveCount: 3 }
  Fn:
    Type: AWS::Serverless::Function
    Metadata: { BuildProperties: { Binary: b } }
    Properties:
      DeadLetterQueue: { Type: SQS, TargetArn: !GetAtt FnDlq.Arn }
  Topic: { Type: AWS::SNS::Topic }
  Full:
    Type: AWS::CloudWatch::Alarm
    Properties:
      Namespace: AWS/SQS
      MetricName: ApproximateNumberOfMessagesVisible
      Dimensions: [{ Name: QueueName, Value: !GetAtt Dlq.QueueName }]
      Threshold: 0
      AlarmActions: [!Ref Topic]
  Silent:
    Type: AWS::CloudWatch::Alarm
    Properties: { Namespace: AWS/Lambda, MetricName: Errors, Threshold: 1.5 }
"#,
        )
        .expect("parse");
        assert_eq!(
            template.dead_letter_queues(),
            Ok(vec!["Dlq".to_owned(), "FnDlq".to_owned()])
        );
        let alarms = template.alarms().expect("alarms");
        assert_eq!(
            alarms[0],
            Alarm {
                logical_id: "Full".into(),
                namespace: "AWS/SQS".into(),
                metric: "ApproximateNumberOfMessagesVisible".into(),
                dimensions: vec![("QueueName".into(), "Dlq".into())],
                threshold: 0.0,
                actions: vec!["Topic".into()],
            }
        );
        assert!(alarms[1].actions.is_empty() && alarms[1].dimensions.is_empty());
        assert_eq!(alarms[1].threshold, 1.5);
    }

    #[test]
    fn find_in_map_looks_up_keys_given_by_parameters() {
        let template = Template::parse(
            r#"
Parameters:
  Window: { Type: Number, Default: 0, AllowedValues: [0, 60] }
Mappings:
  Visibility:
    "0": { Seconds: 180 }
    "60": { Seconds: 240 }
Resources:
  Q:
    Type: AWS::SQS::Queue
    Properties:
      VisibilityTimeout: !FindInMap [Visibility, !Ref Window, Seconds]
      MessageRetentionPeriod: 1209600
"#,
        )
        .expect("parse");
        let queue = |t: &Template| t.queues().expect("queues")[0].clone();
        assert_eq!(queue(&template).visibility_timeout_s, 180);
        assert_eq!(queue(&template).message_retention_s, 1_209_600);
        let windowed = template
            .with_parameters(&[("Window", "60")])
            .expect("allowed");
        assert_eq!(queue(&windowed).visibility_timeout_s, 240);
        let missing = Template::parse(
            "Resources:\n  Q:\n    Type: AWS::SQS::Queue\n    Properties:\n      VisibilityTimeout: !FindInMap [M, a, b]\n",
        )
        .expect("parse");
        assert!(
            missing
                .queues()
                .unwrap_err()
                .contains("Mappings has no M.a.b")
        );
    }

    #[test]
    fn sub_fills_in_pseudo_parameters_parameters_attributes_and_variables() {
        let template = Template::parse(
            r#"
Parameters:
  Stage: { Type: String, Default: dev }
Resources:
  T: { Type: AWS::DynamoDB::Table }
"#,
        )
        .expect("parse");
        let sub = |yaml: &str| {
            let value: Value = serde_norway::from_str(yaml).expect("YAML");
            template.resolve(&value).map(|v| v.and_then(|v| text(&v)))
        };
        assert_eq!(
            sub(
                r#"!Sub "arn:${AWS::Partition}:states:${AWS::Region}:${AWS::AccountId}:stateMachine:${AWS::StackName}-${Stage}""#
            ),
            Ok(Some(
                "arn:aws:states:us-east-1:123456789012:stateMachine:local-dev".into()
            ))
        );
        assert_eq!(
            sub(r#"!Sub ["${T.Arn}/index/${Index}-${!Literal}", {Index: !Ref Stage}]"#),
            Ok(Some("T/index/dev-${Literal}".into()))
        );
        assert!(sub(r#"!Sub "${Unclosed""#).is_err());
        assert!(sub("!Sub [a, b, c]").is_err());
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

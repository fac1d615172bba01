//! The template's state machines on the local Step Functions (moto, see
//! [`crate::moto`]), and a small client for it: create a state machine, start
//! an execution, wait for its end.
//!
//! Each `AWS::Serverless::StateMachine` is created from its inline
//! `Definition`, named by its logical id. In the definition (and its
//! `DefinitionSubstitutions`), `!GetAtt <Function>.Arn` becomes the local
//! function's ARN (`arn:aws:lambda:us-east-1:123456789012:function:<logical
//! id>`, which the local Lambda Invoke API serves) and `!Ref <Function>` its
//! name (the logical id), as on AWS; any other intrinsic function is an error.

use crate::local_aws::REGION;
use crate::moto::{ACCOUNT_ID, authorization};
use crate::template::Template;
use serde_json::{Map, Value, json};
use std::time::{Duration, Instant};

/// The ARN of the local function with this logical id.
pub fn function_arn(logical_id: &str) -> String {
    format!("arn:aws:lambda:{REGION}:{ACCOUNT_ID}:function:{logical_id}")
}

/// An `AWS::Serverless::StateMachine` of the template, ready to create.
#[derive(Debug, Clone, PartialEq)]
pub struct StateMachine {
    /// Logical id, e.g. `ReportStateMachine`.
    pub logical_id: String,
    /// Its name: `Name` (its `!Sub` resolved with the local stack's values,
    /// as the ARNs the template builds from it are), else the logical id.
    pub name: String,
    /// `Type`: `STANDARD` (the default) or `EXPRESS`.
    pub kind: String,
    /// The definition (Amazon States Language), intrinsics resolved.
    pub definition: Value,
    /// `Tracing.Enabled`: each execution is one X-Ray trace, handed to its
    /// Lambda tasks.
    pub tracing: bool,
}

/// Every state machine of the template (see the module's doc).
pub fn state_machines(template: &Template) -> Result<Vec<StateMachine>, String> {
    let functions: Vec<String> = template
        .functions()?
        .into_iter()
        .map(|f| f.logical_id)
        .collect();
    template
        .resources("AWS::Serverless::StateMachine")
        .into_iter()
        .map(|(logical_id, resource)| {
            let props = resource.get("Properties");
            let prop = |name: &str| props.and_then(|p| p.get(name));
            let at = |what: &str| format!("{logical_id}.{what}");
            let Some(definition) = prop("Definition") else {
                return Err(format!(
                    "{logical_id}: the local stack reads only an inline Definition{}",
                    if prop("DefinitionUri").is_some() {
                        " (not DefinitionUri)"
                    } else {
                        ""
                    }
                ));
            };
            let mut definition = to_json(definition, &functions, &at("Definition"))?;
            if let Some(substitutions) = prop("DefinitionSubstitutions") {
                let substitutions =
                    to_json(substitutions, &functions, &at("DefinitionSubstitutions"))?;
                let substitutions = substitutions
                    .as_object()
                    .ok_or_else(|| format!("{}: not a map", at("DefinitionSubstitutions")))?;
                substitute(&mut definition, substitutions);
            }
            let kind = match prop("Type") {
                None => "STANDARD".to_owned(),
                Some(kind) => kind
                    .as_str()
                    .filter(|k| matches!(*k, "STANDARD" | "EXPRESS"))
                    .ok_or_else(|| format!("{}: {kind:?}", at("Type")))?
                    .to_owned(),
            };
            let name = template
                .text_property(resource, "Name")
                .map_err(|e| at(&e))?
                .unwrap_or_else(|| logical_id.clone());
            let tracing = template.tracing_enabled(resource).map_err(|e| at(&e))?;
            Ok(StateMachine {
                logical_id,
                name,
                kind,
                definition,
                tracing,
            })
        })
        .collect()
}

/// `value` as JSON, its `!GetAtt <Function>.Arn` and `!Ref <Function>`
/// resolved; `at` names where it is, for errors.
fn to_json(value: &serde_norway::Value, functions: &[String], at: &str) -> Result<Value, String> {
    use serde_norway::Value as Yaml;
    Ok(match value {
        Yaml::Null => Value::Null,
        Yaml::Bool(b) => Value::Bool(*b),
        Yaml::Number(n) => {
            if let Some(i) = n.as_i64() {
                json!(i)
            } else if let Some(u) = n.as_u64() {
                json!(u)
            } else {
                n.as_f64()
                    .and_then(serde_json::Number::from_f64)
                    .map(Value::Number)
                    .ok_or_else(|| format!("{at}: {n} is not a JSON number"))?
            }
        }
        Yaml::String(s) => Value::String(s.clone()),
        Yaml::Sequence(items) => Value::Array(
            items
                .iter()
                .enumerate()
                .map(|(i, item)| to_json(item, functions, &format!("{at}[{i}]")))
                .collect::<Result<_, _>>()?,
        ),
        Yaml::Mapping(entries) => {
            let mut object = Map::new();
            for (key, item) in entries {
                let key = key
                    .as_str()
                    .ok_or_else(|| format!("{at}: a key is not a string: {key:?}"))?;
                object.insert(
                    key.to_owned(),
                    to_json(item, functions, &format!("{at}.{key}"))?,
                );
            }
            Value::Object(object)
        }
        Yaml::Tagged(tagged) => Value::String(intrinsic(tagged, functions, at)?),
    })
}

/// The value of `!GetAtt <Function>.Arn` (the local ARN) or `!Ref
/// <Function>` (the name); an error for anything else.
fn intrinsic(
    tagged: &serde_norway::value::TaggedValue,
    functions: &[String],
    at: &str,
) -> Result<String, String> {
    let tag = tagged.tag.to_string();
    let tag = tag.trim_start_matches('!');
    let function = |id: &str| functions.iter().any(|f| f == id);
    let parts: Option<(String, Option<String>)> = match &tagged.value {
        serde_norway::Value::String(s) => Some(match s.split_once('.') {
            Some((id, attribute)) => (id.to_owned(), Some(attribute.to_owned())),
            None => (s.clone(), None),
        }),
        serde_norway::Value::Sequence(items) => match items.as_slice() {
            [id, attribute] => id
                .as_str()
                .zip(attribute.as_str())
                .map(|(id, attribute)| (id.to_owned(), Some(attribute.to_owned()))),
            _ => None,
        },
        _ => None,
    };
    match (tag, parts) {
        ("GetAtt", Some((id, Some(attribute)))) if function(&id) && attribute == "Arn" => {
            Ok(function_arn(&id))
        }
        ("Ref", Some((id, None))) if function(&id) => Ok(id),
        _ => Err(format!(
            "{at}: the local stack resolves only !GetAtt <Function>.Arn and !Ref <Function> \
             in a state machine, not !{tag} {:?}",
            tagged.value
        )),
    }
}

/// Replace each `${name}` of `substitutions` in every string of `value`.
fn substitute(value: &mut Value, substitutions: &Map<String, Value>) {
    match value {
        Value::String(text) => {
            for (name, replacement) in substitutions {
                let replacement = match replacement {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                *text = text.replace(&format!("${{{name}}}"), &replacement);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| substitute(v, substitutions)),
        Value::Object(entries) => entries
            .values_mut()
            .for_each(|v| substitute(v, substitutions)),
        _ => {}
    }
}

/// A state machine created on the local Step Functions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalStateMachine {
    /// Its logical id.
    pub logical_id: String,
    /// Its ARN.
    pub arn: String,
}

/// Create every state machine of the template with `client`.
pub fn create_state_machines(
    template: &Template,
    client: &Client,
) -> Result<Vec<LocalStateMachine>, String> {
    state_machines(template)?
        .iter()
        .map(|machine| {
            Ok(LocalStateMachine {
                logical_id: machine.logical_id.clone(),
                arn: client.create_state_machine(machine)?,
            })
        })
        .collect()
}

/// How an execution ended (or stands).
#[derive(Debug, Clone, PartialEq)]
pub struct Execution {
    /// `RUNNING`, `SUCCEEDED`, `FAILED`, `TIMED_OUT` or `ABORTED`.
    pub status: String,
    /// The output of a succeeded execution (JSON; a string if it is not).
    pub output: Option<Value>,
    /// The error name of a failed one (e.g. a function's `errorType`).
    pub error: Option<String>,
    /// Its cause (for a function error, the function's error JSON).
    pub cause: Option<String>,
}

impl Execution {
    /// Whether it succeeded.
    pub fn succeeded(&self) -> bool {
        self.status == "SUCCEEDED"
    }
}

/// A client of the Step Functions API (JSON 1.0 protocol) at a local endpoint.
pub struct Client {
    endpoint: String,
    agent: ureq::Agent,
}

impl Client {
    /// A client for the Step Functions at `endpoint` (`http://127.0.0.1:PORT`).
    pub fn new(endpoint: &str) -> Self {
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(30)))
            .build()
            .into();
        Self {
            endpoint: endpoint.to_owned(),
            agent,
        }
    }

    /// `AWSStepFunctions.<action>` with `request`; the answer, or the error
    /// type and message Step Functions answered.
    pub fn call(&self, action: &str, request: &Value) -> Result<Value, String> {
        let response = self
            .agent
            .post(&self.endpoint)
            .header("content-type", "application/x-amz-json-1.0")
            .header("x-amz-target", format!("AWSStepFunctions.{action}"))
            .header("authorization", authorization("states"))
            .send(request.to_string())
            .map_err(|e| format!("{action}: {e}"))?;
        let status = response.status().as_u16();
        let text = response
            .into_body()
            .read_to_string()
            .map_err(|e| format!("{action}: {e}"))?;
        let answer: Value = serde_json::from_str(&text)
            .map_err(|e| format!("{action}: HTTP {status}, not JSON ({e}): {text:.200}"))?;
        if status == 200 {
            Ok(answer)
        } else {
            Err(format!(
                "{action}: HTTP {status} {}: {}",
                answer["__type"].as_str().unwrap_or("?"),
                answer["message"]
                    .as_str()
                    .or_else(|| answer["Message"].as_str())
                    .unwrap_or(&text)
            ))
        }
    }

    /// Create `machine` (as its name); its ARN.
    pub fn create_state_machine(&self, machine: &StateMachine) -> Result<String, String> {
        let answer = self.call(
            "CreateStateMachine",
            &json!({
                "name": machine.name,
                "definition": machine.definition.to_string(),
                "roleArn": format!("arn:aws:iam::{ACCOUNT_ID}:role/{}Role", machine.logical_id),
                "type": machine.kind,
                "tracingConfiguration": {"enabled": machine.tracing},
            }),
        )?;
        text_field(&answer, "stateMachineArn", "CreateStateMachine")
    }

    /// Start an execution of the state machine `state_machine_arn` with
    /// `input`, named `name` (else a UUID, as Step Functions names it); its ARN.
    pub fn start_execution(
        &self,
        state_machine_arn: &str,
        input: &Value,
        name: Option<&str>,
    ) -> Result<String, String> {
        let mut request = json!({
            "stateMachineArn": state_machine_arn,
            "input": input.to_string(),
        });
        if let Some(name) = name {
            request["name"] = json!(name);
        }
        let answer = self.call("StartExecution", &request)?;
        text_field(&answer, "executionArn", "StartExecution")
    }

    /// Where the execution `execution_arn` stands.
    pub fn describe_execution(&self, execution_arn: &str) -> Result<Execution, String> {
        let answer = self.call(
            "DescribeExecution",
            &json!({ "executionArn": execution_arn }),
        )?;
        let text = |key: &str| answer[key].as_str().map(str::to_owned);
        Ok(Execution {
            status: text_field(&answer, "status", "DescribeExecution")?,
            output: text("output")
                .map(|output| serde_json::from_str(&output).unwrap_or(Value::String(output))),
            error: text("error"),
            cause: text("cause"),
        })
    }

    /// Wait until the execution `execution_arn` ends, at most `timeout`; how
    /// it ended.
    pub fn wait(&self, execution_arn: &str, timeout: Duration) -> Result<Execution, String> {
        let deadline = Instant::now() + timeout;
        loop {
            let execution = self.describe_execution(execution_arn)?;
            if execution.status != "RUNNING" {
                return Ok(execution);
            }
            if Instant::now() >= deadline {
                return Err(format!("{execution_arn} still RUNNING after {timeout:?}"));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

fn text_field(answer: &Value, key: &str, action: &str) -> Result<String, String> {
    answer[key]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| format!("{action}: no {key} in {answer}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn machines(yaml: &str) -> Result<Vec<StateMachine>, String> {
        state_machines(&Template::parse(yaml).expect("template"))
    }

    const FUNCTION: &str = "
  Worker:
    Type: AWS::Serverless::Function
    Metadata:
      BuildProperties:
        Binary: worker
";

    #[test]
    fn a_state_machine_calls_the_local_function_by_its_arn() {
        let template = crate::fixtures::template();
        let machines = state_machines(&template).expect("state machines");
        let [machine] = machines.as_slice() else {
            panic!("one state machine: {machines:?}");
        };
        assert_eq!(machine.logical_id, "FixtureStateMachine");
        assert_eq!(machine.name, "local-fixture-report");
        assert_eq!(machine.kind, "STANDARD");
        assert!(machine.tracing, "Tracing: Active, the default");
        // The reporter starts it by the ARN the template builds from its name.
        let reporter = template.function("fixture-reporter").expect("reporter");
        let (_, arn) = reporter
            .env
            .iter()
            .find(|(name, _)| name == "REPORT_STATE_MACHINE_ARN")
            .expect("the reporter knows the state machine");
        assert_eq!(
            arn,
            &format!("arn:aws:states:{REGION}:{ACCOUNT_ID}:stateMachine:local-fixture-report")
        );
        let arn = function_arn("FixtureReporter");
        assert_eq!(
            arn,
            "arn:aws:lambda:us-east-1:123456789012:function:FixtureReporter"
        );
        let segment =
            &machine.definition["States"]["Segments"]["ItemProcessor"]["States"]["Segment"];
        assert_eq!(segment["Parameters"]["FunctionName"], json!(arn));
        assert_eq!(
            machine.definition["States"]["Merge"]["Parameters"]["FunctionName"],
            json!(arn)
        );
        assert_eq!(segment["Retry"][0]["MaxAttempts"], json!(4));
        let untraced = template
            .with_parameters(&[("Tracing", "PassThrough")])
            .expect("allowed");
        let machines = state_machines(&untraced).expect("state machines");
        assert!(!machines[0].tracing, "Tracing: PassThrough");
    }

    #[test]
    fn function_references_and_substitutions_are_resolved() {
        let machines = machines(&format!(
            "Resources:{FUNCTION}
  Machine:
    Type: AWS::Serverless::StateMachine
    Properties:
      Type: EXPRESS
      DefinitionSubstitutions:
        WorkerArn: !GetAtt [Worker, Arn]
        Seconds: 3
      Definition:
        StartAt: A
        States:
          A:
            Type: Task
            Resource: ${{WorkerArn}}
            TimeoutSeconds: 2.5
            Parameters:
              FunctionName: !Ref Worker
              Note: waits ${{Seconds}} s
            End: true
"
        ))
        .expect("resolved");
        let state = &machines[0].definition["States"]["A"];
        assert_eq!(machines[0].kind, "EXPRESS");
        assert_eq!(state["Resource"], json!(function_arn("Worker")));
        assert_eq!(state["Parameters"]["FunctionName"], json!("Worker"));
        assert_eq!(state["Parameters"]["Note"], json!("waits 3 s"));
        assert_eq!(state["TimeoutSeconds"], json!(2.5));
    }

    #[test]
    fn other_intrinsics_and_definition_files_are_refused_with_their_place() {
        let machine = |definition: &str| {
            machines(&format!(
                "Resources:{FUNCTION}
  Machine:
    Type: AWS::Serverless::StateMachine
    Properties:
{definition}
"
            ))
        };
        for (definition, expected) in [
            (
                "      Definition:\n        StartAt: !Sub '${Worker}'",
                "Machine.Definition.StartAt: the local stack resolves only",
            ),
            (
                "      Definition:\n        A: !GetAtt Worker.Version",
                "Machine.Definition.A:",
            ),
            (
                "      Definition:\n        A: !GetAtt Table.Arn",
                "Machine.Definition.A:",
            ),
            (
                "      Definition:\n        A: [!Ref Elsewhere]",
                "Machine.Definition.A[0]:",
            ),
            (
                "      DefinitionUri: statemachine.asl.json",
                "Machine: the local stack reads only an inline Definition (not DefinitionUri)",
            ),
            ("      Type: FAST\n      Definition: {}", "Machine.Type"),
        ] {
            let error = machine(definition).expect_err(definition);
            assert!(error.starts_with(expected), "{definition}: {error}");
        }
    }
}

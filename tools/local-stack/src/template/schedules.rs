//! The functions' `Type: ScheduleV2` events: the EventBridge Scheduler
//! schedules SAM creates, with the function's asynchronous retries and
//! dead-letter queue (see [`crate::schedule`]).

use super::functions::Function;
use super::{Template, number, text};
use serde_norway::Value;

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_functions_schedule_with_its_retries_and_dead_letter_queue() {
        let template = crate::fixtures::template();
        assert_eq!(
            template.schedules(),
            Ok(vec![Schedule {
                function: "fixture-reporter".into(),
                name: "Nightly".into(),
                expression: "cron(15 0 * * ? *)".into(),
                timezone: "UTC".into(),
                input:
                    r#"{"operation": "report", "scheduled_time": "<aws.scheduler.scheduled-time>"}"#
                        .into(),
                retry_policy: RetryPolicy {
                    maximum_retry_attempts: 2,
                    maximum_event_age_s: 86_400,
                },
                lambda_retries: 2,
                dead_letter_queue: Some("FixtureEventsDeadLetterQueue".into()),
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
}

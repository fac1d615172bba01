//! What the local stack reads of the template's other resources: its
//! CloudWatch alarms, and the properties of any resource it creates (a state
//! machine's `Name` and `Tracing`: see [`crate::step_functions`]; tables and
//! buckets are found with [`Template::resources`]).

use super::{Template, text};
use serde_norway::Value;

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

impl Template {
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
}

#[cfg(test)]
mod tests {
    use super::*;

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
}

//! The intrinsic functions the local stack resolves (`!Ref`, `!Sub`,
//! `!GetAtt`, `!FindInMap`, `!Join`, `!Split`, `!Select`, `!If`) and the
//! conditions `!If` and `Rules` evaluate, with the parameter values of the
//! [`Template`].

use super::{Template, number, text};
use serde_norway::Value;

impl Template {
    /// A resource's property, resolved; `None` if absent or `AWS::NoValue`.
    pub(super) fn property(&self, resource: &Value, name: &str) -> Result<Option<Value>, String> {
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
    pub(super) fn resolve(&self, value: &Value) -> Result<Option<Value>, String> {
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
    pub(super) fn evaluate(&self, definition: &Value) -> Result<bool, String> {
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
    pub(super) fn scalar(&self, value: &Value) -> Option<String> {
        self.resolve(value).ok().flatten().as_ref().and_then(text)
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

#[cfg(test)]
mod tests {
    use super::*;

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
}

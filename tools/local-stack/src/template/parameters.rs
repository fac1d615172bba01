//! The template's parameters, the values a deployment gives them
//! (`--parameter-overrides`) and the `Rules` CloudFormation checks them with.

use super::{Template, text};
use serde_norway::Value;

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
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Parameters with each kind of limit: a range, a list, none.
    const PARAMETERS: &str = r#"
Parameters:
  Batch: { Type: Number, Default: 10, MinValue: 1, MaxValue: 10000 }
  Window: { Type: Number, Default: 0, AllowedValues: [0, 1, 300] }
  Visibility: { Type: Number, Default: 180 }
"#;

    #[test]
    fn parameter_values_the_declaration_forbids_are_errors() {
        let template = Template::parse(PARAMETERS).expect("parse");
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
}

//! Reads `template.yaml`, so local runs use what the template declares (memory,
//! timeout, environment) instead of a second copy of it.
//!
//! Locally every resource's physical name is its logical id: `!Ref OrdersTable`
//! resolves to `"OrdersTable"`, the name the local stack gives that table; a
//! `!Ref` to a parameter resolves to the parameter's `Default`.

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
    /// `Environment.Variables`, with `!Ref X` resolved to `X`.
    pub env: Vec<(String, String)>,
}

/// The parsed template.
#[derive(Debug, Clone)]
pub struct Template {
    doc: Value,
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
        Ok(Self { doc })
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

impl Template {
    /// A plain scalar as text; `!Ref X` as the parameter's default, or as `X`
    /// for a resource.
    fn scalar(&self, value: &Value) -> Option<String> {
        match value {
            Value::String(s) => Some(s.clone()),
            Value::Number(n) => Some(n.to_string()),
            Value::Bool(b) => Some(b.to_string()),
            Value::Tagged(tagged) if tagged.tag == "Ref" => {
                let name = tagged.value.as_str()?;
                match self.doc.get("Parameters").and_then(|p| p.get(name)) {
                    Some(parameter) => self.scalar(parameter.get("Default")?),
                    None => Some(name.to_owned()),
                }
            }
            _ => None,
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
        let mut binaries: Vec<_> = functions.iter().map(|f| f.binary.as_str()).collect();
        binaries.sort();
        assert_eq!(
            binaries,
            ["arrow-worker", "order-processor", "password-hasher"]
        );
        for f in &functions {
            assert!((128..=10_240).contains(&f.memory_mb), "{f:?}");
            assert!(f.env.iter().any(|(k, _)| k == "MEMORY_RETURN"), "{f:?}");
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
}

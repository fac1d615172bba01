//! Reads `template.yaml`, so local runs use what the template declares (memory,
//! timeout, environment) instead of a second copy of it, and checks what AWS
//! would check: parameter values, the `Rules` ([`Template::check_rules`]) and
//! each SQS event source mapping ([`Template::sqs_sources`]).
//!
//! Locally every resource's physical name is its logical id: `!Ref OrdersTable`
//! resolves to `"OrdersTable"`, the name the local stack gives that table; a
//! `!Ref` to a parameter resolves to the value given with
//! [`Template::with_parameters`], else to the parameter's `Default`.
//!
//! One module per job, each reading the document this one parses: `intrinsics`
//! (`!Ref`, `!Sub`, `!If` and the other intrinsic functions, conditions),
//! `parameters` (parameter values and `Rules`), `functions` (each function with
//! its settings), `queues` (queues, SQS event sources and their mappings),
//! `function_url` (Function URLs), `schedules` (`ScheduleV2` events) and
//! `resources` (alarms, other resources' properties). Every type is re-exported
//! here: `local_stack::template::X` is the path to use.

mod function_url;
mod functions;
mod intrinsics;
mod parameters;
mod queues;
mod resources;
mod schedules;

pub use function_url::{AuthType, Cors, FunctionUrlConfig};
pub use functions::Function;
pub use parameters::Parameter;
pub use queues::{Queue, Redrive, SqsSource};
pub use resources::Alarm;
pub use schedules::{RetryPolicy, Schedule};

use serde_norway::Value;
use std::path::Path;
use std::sync::Arc;

/// The parsed template.
#[derive(Debug, Clone)]
pub struct Template {
    /// Shared: a template with other parameter values is a cheap copy.
    doc: Arc<Value>,
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
            doc: Arc::new(doc),
            overrides: Vec::new(),
        })
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

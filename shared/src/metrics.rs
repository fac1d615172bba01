//! CloudWatch metrics as Embedded Metric Format (EMF) log lines: one JSON line
//! per invocation on stdout, which CloudWatch Logs turns into metrics. No API
//! call, no client, nothing to flush.
//!
//! ```
//! let mut m = shared::metrics::Emf::new("OrderSystem", "order-processor");
//! m.count("RecordsProcessed", 10);
//! m.bytes("Rss", 12 << 20);
//! let line = m.to_line(1_700_000_000_000);
//! assert!(line.contains("\"RecordsProcessed\":10"));
//! ```

use serde_json::{Map, Value, json};

/// Units CloudWatch understands that these metrics use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// A count.
    Count,
    /// Bytes.
    Bytes,
    /// Milliseconds.
    Milliseconds,
}

impl Unit {
    fn as_str(self) -> &'static str {
        match self {
            Unit::Count => "Count",
            Unit::Bytes => "Bytes",
            Unit::Milliseconds => "Milliseconds",
        }
    }
}

/// One EMF document: a namespace, the `service` dimension, and metric values.
#[derive(Debug, Clone)]
pub struct Emf {
    namespace: String,
    service: String,
    metrics: Vec<(String, f64, Unit)>,
}

impl Emf {
    /// Metrics in `namespace` with dimension `service` (the function's name).
    pub fn new(namespace: impl Into<String>, service: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
            service: service.into(),
            metrics: Vec::new(),
        }
    }

    /// Add a metric.
    pub fn add(&mut self, name: impl Into<String>, value: f64, unit: Unit) -> &mut Self {
        self.metrics.push((name.into(), value, unit));
        self
    }

    /// Add a count.
    pub fn count(&mut self, name: impl Into<String>, value: u64) -> &mut Self {
        self.add(name, value as f64, Unit::Count)
    }

    /// Add a size in bytes.
    pub fn bytes(&mut self, name: impl Into<String>, value: u64) -> &mut Self {
        self.add(name, value as f64, Unit::Bytes)
    }

    /// The document as one JSON line, stamped `timestamp_ms` (Unix epoch ms).
    pub fn to_line(&self, timestamp_ms: u64) -> String {
        let definitions: Vec<Value> = self
            .metrics
            .iter()
            .map(|(name, _, unit)| json!({"Name": name, "Unit": unit.as_str()}))
            .collect();
        let mut root = Map::new();
        root.insert(
            "_aws".into(),
            json!({
                "Timestamp": timestamp_ms,
                "CloudWatchMetrics": [{
                    "Namespace": self.namespace,
                    "Dimensions": [["service"]],
                    "Metrics": definitions,
                }],
            }),
        );
        root.insert("service".into(), json!(self.service));
        for (name, value, _) in &self.metrics {
            root.insert(name.clone(), json!(value));
        }
        Value::Object(root).to_string()
    }

    /// Print the document on stdout, where Lambda sends it to CloudWatch Logs.
    pub fn emit(&self) {
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        println!("{}", self.to_line(now_ms));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn document_follows_the_emf_specification() {
        let mut m = Emf::new("OrderSystem", "order-processor");
        m.count("RecordsFailed", 2)
            .bytes("Rss", 1024)
            .add("InitMs", 3.5, Unit::Milliseconds);
        let doc: Value = serde_json::from_str(&m.to_line(42)).expect("JSON");
        assert_eq!(doc["_aws"]["Timestamp"], 42);
        let directive = &doc["_aws"]["CloudWatchMetrics"][0];
        assert_eq!(directive["Namespace"], "OrderSystem");
        assert_eq!(directive["Dimensions"], json!([["service"]]));
        assert_eq!(
            directive["Metrics"][1],
            json!({"Name": "Rss", "Unit": "Bytes"})
        );
        // Every dimension and metric named in the directive has a value at the root.
        assert_eq!(doc["service"], "order-processor");
        assert_eq!(doc["RecordsFailed"], 2.0);
        assert_eq!(doc["Rss"], 1024.0);
        assert_eq!(doc["InitMs"], 3.5);
    }
}

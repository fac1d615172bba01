//! checkov (the pinned version from `tools`) on `template.yaml`. A check the
//! template does not meet on purpose is skipped in the template itself, next to
//! the resource, with the reason (`Metadata: checkov: skip:`).

use crate::tools;
use serde_json::Value;
use std::path::Path;
use std::process::Command;

/// The failed checks of `template` as `CHECK_ID resource: name`; empty if clean.
pub fn failed_checks(template: &Path) -> Result<Vec<String>, String> {
    let mut command = Command::new(tools::checkov_venv().join("bin").join("checkov"));
    command
        .arg("--file")
        .arg(template)
        .args([
            "--framework",
            "cloudformation",
            "--output",
            "json",
            "--quiet",
            "--skip-download",
        ])
        .env("BC_SKIP_MAPPING", "TRUE");
    let output = command
        .output()
        .map_err(|e| format!("{}: {e}", tools::describe(&command)))?;
    let report: Value = serde_json::from_slice(&output.stdout).map_err(|e| {
        format!(
            "checkov printed no JSON report ({e}): {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    })?;
    Ok(failures(&report))
}

/// The failed checks of a checkov JSON report (one report or a list of them).
pub fn failures(report: &Value) -> Vec<String> {
    let reports = match report {
        Value::Array(list) => list.iter().collect(),
        single => vec![single],
    };
    reports
        .into_iter()
        .flat_map(|r| {
            r["results"]["failed_checks"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .map(|check| {
            format!(
                "{} {}: {}",
                check["check_id"].as_str().unwrap_or("?"),
                check["resource"].as_str().unwrap_or("?"),
                check["check_name"].as_str().unwrap_or("?")
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_are_read_from_one_report_or_many() {
        let failed = serde_json::json!({"results": {"failed_checks": [
            {"check_id": "CKV_AWS_116", "resource": "AWS::Serverless::Function.F", "check_name": "DLQ"}
        ]}});
        assert_eq!(
            failures(&failed),
            vec!["CKV_AWS_116 AWS::Serverless::Function.F: DLQ"]
        );
        let clean = serde_json::json!({"results": {"failed_checks": []}});
        assert!(failures(&clean).is_empty());
        assert_eq!(failures(&serde_json::json!([clean, failed])).len(), 1);
    }
}

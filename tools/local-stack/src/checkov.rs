//! checkov (the pinned version from `tools`) on `template.yaml`. A check the
//! template does not meet on purpose is skipped in the template itself, next to
//! the resource, with the reason (`Metadata: checkov: skip:`).

use crate::tools;
use serde_json::Value;
use std::path::Path;
use std::process::Command;

/// The failed checks of `templates`, all read by one checkov run (its start,
/// loading every check, is most of its time), as `FILE: CHECK_ID resource:
/// name`, and how many it could not parse; empty if all are clean.
pub fn failed_checks(templates: &[&Path]) -> Result<Vec<String>, String> {
    let mut command = Command::new(tools::checkov_venv().join("bin").join("checkov"));
    for template in templates {
        command.arg("--file").arg(template);
    }
    command
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

/// The failed checks, and how many templates checkov could not parse, of a
/// checkov JSON report (one report or a list of them).
pub fn failures(report: &Value) -> Vec<String> {
    let reports = match report {
        Value::Array(list) => list.iter().collect(),
        single => vec![single],
    };
    reports
        .into_iter()
        .flat_map(|r| {
            let failed = r["results"]["failed_checks"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .map(|check| {
                    format!(
                        "{}: {} {}: {}",
                        check["file_path"].as_str().unwrap_or("?"),
                        check["check_id"].as_str().unwrap_or("?"),
                        check["resource"].as_str().unwrap_or("?"),
                        check["check_name"].as_str().unwrap_or("?")
                    )
                });
            let unparsed = r["summary"]["parsing_errors"].as_u64().unwrap_or(0);
            let unparsed = (unparsed > 0).then(|| {
                format!("{unparsed} template(s) checkov could not parse (run checkov on each file for why)")
            });
            failed.chain(unparsed).collect::<Vec<_>>()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_are_read_from_one_report_or_many() {
        let failed = serde_json::json!({"results": {"failed_checks": [
            {"file_path": "/t.json", "check_id": "CKV_AWS_116",
             "resource": "AWS::Serverless::Function.F", "check_name": "DLQ"}
        ]}});
        assert_eq!(
            failures(&failed),
            vec!["/t.json: CKV_AWS_116 AWS::Serverless::Function.F: DLQ"]
        );
        let clean = serde_json::json!({"results": {"failed_checks": []}});
        assert!(failures(&clean).is_empty());
        assert_eq!(failures(&serde_json::json!([clean, failed])).len(), 1);
        let unparsed = serde_json::json!({"results": {"failed_checks": []},
            "summary": {"parsing_errors": 1}});
        assert_eq!(
            failures(&unparsed),
            vec!["1 template(s) checkov could not parse (run checkov on each file for why)"]
        );
    }
}

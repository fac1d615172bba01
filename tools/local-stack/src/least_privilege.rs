//! Least privilege, checked on what CloudFormation receives: `template.yaml`
//! after SAM's transform (samtranslator, from the pinned aws-sam-cli), so the
//! roles SAM generates are checked too, not only the statements written here.
//!
//! A finding is an IAM grant wider than it has to be: an AWS managed policy
//! attached to a role (the Lambda ones allow their actions on every resource),
//! an action or resource with a wildcard, or `NotAction`/`NotResource`. One
//! wildcard is as narrow as S3 allows and passes: the objects under a named
//! key prefix of one of the template's buckets (`${Bucket.Arn}/partials/*`).

use crate::tools;
use serde_json::Value;
use std::path::Path;
use std::process::Command;

/// Transform a template with samtranslator, offline: code locations replaced
/// by a placeholder (as `sam validate` does), no managed-policy lookups.
const TRANSFORM: &str = r#"
import json, sys
from samtranslator.translator.transform import transform
from samtranslator.yaml_helper import yaml_parse

class NoLookups:
    def load(self):
        return {}

with open(sys.argv[1]) as f:
    template = yaml_parse(f.read())
for resource in template.get("Resources", {}).values():
    if resource.get("Type") == "AWS::Serverless::Function":
        resource.setdefault("Properties", {})["CodeUri"] = "s3://bucket/key"
print(json.dumps(transform(template, {}, NoLookups())))
"#;

/// `template` after the SAM transform, as JSON.
pub fn transformed(template: &Path) -> Result<Value, String> {
    let mut command = Command::new(tools::venv_bin().join("python"));
    command
        .arg("-c")
        .arg(TRANSFORM)
        .arg(template)
        .env("AWS_DEFAULT_REGION", crate::local_aws::REGION);
    let output = command
        .output()
        .map_err(|e| format!("{}: {e}", tools::describe(&command)))?;
    if !output.status.success() {
        return Err(format!(
            "the SAM transform failed: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    serde_json::from_slice(&output.stdout).map_err(|e| format!("the SAM transform's output: {e}"))
}

/// Every grant in `template` (a transformed template) wider than needed.
pub fn findings(template: &Value) -> Vec<String> {
    let mut found = Vec::new();
    let resources = template["Resources"].as_object().into_iter().flatten();
    for (name, resource) in resources {
        let properties = &resource["Properties"];
        match resource["Type"].as_str() {
            Some("AWS::IAM::Role") => {
                for arn in properties["ManagedPolicyArns"]
                    .as_array()
                    .into_iter()
                    .flatten()
                {
                    found.push(format!(
                        "{name}: managed policy {arn} (grants on every resource)"
                    ));
                }
                for policy in properties["Policies"].as_array().into_iter().flatten() {
                    let label = format!("{name}/{}", policy["PolicyName"].as_str().unwrap_or("?"));
                    check_document(&label, &policy["PolicyDocument"], &mut found);
                }
            }
            Some("AWS::IAM::Policy" | "AWS::IAM::ManagedPolicy") => {
                check_document(name, &properties["PolicyDocument"], &mut found);
            }
            _ => {}
        }
    }
    found
}

/// Actions that name no resource (their only `Resource` is `"*"`): sending
/// trace segments and telemetry to X-Ray.
const TAKE_NO_RESOURCE: &[&str] = &["xray:PutTraceSegments", "xray:PutTelemetryRecords"];

fn check_document(label: &str, document: &Value, found: &mut Vec<String>) {
    let statements = match &document["Statement"] {
        Value::Array(list) => list.clone(),
        single => vec![single.clone()],
    };
    for (i, statement) in statements.iter().enumerate() {
        let at = format!("{label} statement {i}");
        for key in ["NotAction", "NotResource"] {
            if !statement[key].is_null() {
                found.push(format!("{at}: {key} grants everything else"));
            }
        }
        for action in strings(&statement["Action"]) {
            if action.contains('*') {
                found.push(format!("{at}: action {action}"));
            }
        }
        let resourceless = !strings(&statement["Action"]).is_empty()
            && strings(&statement["Action"])
                .iter()
                .all(|action| TAKE_NO_RESOURCE.contains(&action.as_str()));
        for resource in strings(&statement["Resource"]) {
            if resource.contains('*')
                && !is_key_prefix(&resource)
                && !(resourceless && resource == "*")
            {
                found.push(format!("{at}: resource {resource}"));
            }
        }
    }
}

/// The literal strings of a value: itself, a list's, and the format string of
/// `Fn::Sub` (`Ref`/`Fn::GetAtt` name one resource and are never wildcards).
/// Whether `resource` is `${<LogicalId>.Arn}/<prefix>/*`: the objects under
/// one key prefix of one bucket, the wildcard only at the end.
fn is_key_prefix(resource: &str) -> bool {
    let Some(rest) = resource.strip_prefix("${") else {
        return false;
    };
    let Some((logical, path)) = rest.split_once(".Arn}/") else {
        return false;
    };
    let Some(prefix) = path.strip_suffix("/*") else {
        return false;
    };
    !logical.is_empty()
        && logical.chars().all(|c| c.is_ascii_alphanumeric())
        && !prefix.is_empty()
        && !prefix.contains(['*', '?', '$'])
}

fn strings(value: &Value) -> Vec<String> {
    match value {
        Value::String(s) => vec![s.clone()],
        Value::Array(list) => list.iter().flat_map(strings).collect(),
        Value::Object(map) => match map.get("Fn::Sub") {
            Some(Value::String(s)) => vec![s.clone()],
            Some(Value::Array(parts)) => parts.first().map(strings).unwrap_or_default(),
            _ => Vec::new(),
        },
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn role(managed: Value, statements: Value) -> Value {
        json!({"Resources": {"FnRole": {"Type": "AWS::IAM::Role", "Properties": {
            "ManagedPolicyArns": managed,
            "Policies": [{"PolicyName": "p", "PolicyDocument": {"Statement": statements}}]
        }}}})
    }

    #[test]
    fn scoped_statements_pass() {
        let template = role(
            json!([]),
            json!([{"Effect": "Allow", "Action": ["dynamodb:PutItem"],
                    "Resource": {"Fn::GetAtt": ["OrdersTable", "Arn"]}}]),
        );
        assert_eq!(findings(&template), Vec::<String>::new());
        let objects = role(
            json!([]),
            json!([{"Effect": "Allow", "Action": ["s3:GetObject"],
                    "Resource": [{"Fn::Sub": "${Bucket.Arn}/partials/*"}]}]),
        );
        assert_eq!(findings(&objects), Vec::<String>::new());
    }

    #[test]
    fn only_actions_that_name_no_resource_may_take_every_resource() {
        let xray = json!({"Effect": "Allow", "Resource": "*",
            "Action": ["xray:PutTraceSegments", "xray:PutTelemetryRecords"]});
        assert_eq!(
            findings(&role(json!([]), json!([xray]))),
            Vec::<String>::new()
        );
        let mut mixed = xray.clone();
        mixed["Action"] = json!(["xray:PutTraceSegments", "xray:GetTraceSummaries"]);
        let mut wider = xray;
        wider["Resource"] = json!("arn:aws:xray:*");
        for statement in [mixed, wider] {
            assert_eq!(findings(&role(json!([]), json!([statement]))).len(), 1);
        }
    }

    #[test]
    fn only_a_named_key_prefix_of_one_bucket_may_end_in_a_wildcard() {
        for wide in [
            "${Bucket.Arn}/*",
            "${Bucket.Arn}*",
            "${Bucket.Arn}/a*/*",
            "${Bucket.Arn}/${Prefix}/*",
            "arn:aws:s3:::bucket/partials/*",
            "${Bucket.Arn}/partials/*/x",
        ] {
            assert!(!is_key_prefix(wide), "{wide}");
        }
        assert!(is_key_prefix("${Bucket.Arn}/partials/*"));
        assert!(is_key_prefix("${Bucket.Arn}/a/b/*"));
    }

    #[test]
    fn wildcards_managed_policies_and_not_keys_are_found() {
        let template = role(
            json!(["arn:aws:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole"]),
            json!([
                {"Effect": "Allow", "Action": "logs:*", "Resource": "*"},
                {"Effect": "Allow", "Action": "lambda:InvokeFunction",
                 "Resource": {"Fn::Sub": ["arn:${AWS::Partition}:lambda:${AWS::Region}:${AWS::AccountId}:function:${f}*", {"f": {"Ref": "Fn"}}]}},
                {"Effect": "Allow", "NotAction": "iam:*", "Resource": {"Ref": "X"}}
            ]),
        );
        let found = findings(&template);
        assert_eq!(found.len(), 5, "{found:#?}");
        assert!(found[0].contains("AWSLambdaBasicExecutionRole"));
        assert!(found.iter().any(|f| f.contains("action logs:*")));
        assert!(found.iter().any(|f| f.contains("function:${f}*")));
        assert!(found.iter().any(|f| f.contains("NotAction")));
    }
}

//! `template.yaml` as CloudFormation deploys it, with given parameter
//! values: the `!If`s AWS::LanguageExtensions resolves first, then the SAM
//! transform. For checks of what a deployment grants and creates.

use local_stack::template::Template;
use local_stack::{least_privilege, workspace_root};
use serde_json::{Value, json};
use serde_norway::Value as Yaml;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The default deployment: every function on demand.
pub const ON_DEMAND: &[(&str, &str)] = &[];

/// A deployment on Lambda Managed Instances.
pub const MANAGED_INSTANCES: &[(&str, &str)] = &[
    (
        "ManagedInstancesSubnetIds",
        "subnet-0123456789abcdef0,subnet-0fedcba9876543210",
    ),
    ("ManagedInstancesSecurityGroupIds", "sg-0123456789abcdef0"),
];

/// `template.yaml` with these parameter values, as the SAM transform receives
/// it: what AWS::LanguageExtensions does first that the transform depends on
/// (every `!If` resolved with the parameters, `AWS::NoValue` dropped), written
/// to a file of its own. The parameters' defaults become the values, so
/// checkov and the transform see them too.
pub fn resolved(overrides: &[(&str, &str)], label: &str) -> PathBuf {
    let path = workspace_root().join("template.yaml");
    // Refuses a name the template lacks or a value it does not allow.
    Template::load(&path)
        .and_then(|t| t.with_parameters(overrides))
        .expect("the parameter values");
    let text = std::fs::read_to_string(&path).expect("template.yaml");
    let mut doc: Yaml = serde_norway::from_str(&text).expect("template.yaml parses");
    let mut values = BTreeMap::new();
    for (name, declaration) in doc["Parameters"].as_mapping().expect("parameters") {
        let name = name.as_str().expect("parameter name").to_owned();
        let given = overrides.iter().find(|(n, _)| *n == name).map(|(_, v)| *v);
        let value = match given {
            Some(v) => v.to_owned(),
            None => scalar(&declaration["Default"]).expect("a default"),
        };
        values.insert(name, value);
    }
    let conditions = doc["Conditions"].clone();
    let holds = |name: &str| condition(&conditions, &values, &conditions[name]);
    for section in ["Globals", "Resources", "Outputs"] {
        if let Some(value) = doc.get(section).map(|v| resolve_ifs(v, &holds)) {
            doc[section] = value.unwrap_or(Yaml::Null);
        }
    }
    for (name, value) in &values {
        doc["Parameters"][name.as_str()]["Default"] = Yaml::String(value.clone());
    }
    doc["Transform"] = Yaml::String("AWS::Serverless-2016-10-31".to_owned());
    // Tests run in parallel threads of one process: one file per call.
    static CALLS: AtomicUsize = AtomicUsize::new(0);
    let call = CALLS.fetch_add(1, Ordering::Relaxed);
    // JSON (a YAML PyYAML reads as CloudFormation does: no `2010-09-09` date).
    let out = workspace_root().join("target").join("tmp").join(format!(
        "template-{label}-{}-{call}.json",
        std::process::id()
    ));
    if let Some(dir) = out.parent() {
        std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    }
    std::fs::write(&out, to_json(&doc).to_string()).expect("write");
    out
}

/// A template in JSON: each short-form intrinsic function (`!Ref`,
/// `!GetAtt A.B`, `!Sub`, ...) in its long form.
fn to_json(value: &Yaml) -> Value {
    match value {
        Yaml::Null => Value::Null,
        Yaml::Bool(b) => Value::Bool(*b),
        Yaml::Number(n) => serde_json::to_value(n).expect("a number"),
        Yaml::String(s) => Value::String(s.clone()),
        Yaml::Sequence(list) => Value::Array(list.iter().map(to_json).collect()),
        Yaml::Mapping(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (scalar(k).expect("a key"), to_json(v)))
                .collect(),
        ),
        Yaml::Tagged(tagged) => {
            let tag = tagged.tag.to_string();
            let name = tag.trim_start_matches('!');
            let inner = match (name, &tagged.value) {
                ("GetAtt", Yaml::String(path)) => {
                    let (resource, attribute) = path.split_once('.').expect("!GetAtt A.B");
                    json!([resource, attribute])
                }
                (_, inner) => to_json(inner),
            };
            let key = match name {
                "Ref" | "Condition" => name.to_owned(),
                _ => format!("Fn::{name}"),
            };
            json!({ key: inner })
        }
    }
}

/// `template.yaml` deployed with these parameter values, after the SAM
/// transform: what CloudFormation creates.
pub fn deployed(overrides: &[(&str, &str)]) -> Value {
    let label = if overrides.is_empty() {
        "on-demand"
    } else {
        "managed-instances"
    };
    let path = resolved(overrides, label);
    let template = least_privilege::transformed(&path);
    let _ = std::fs::remove_file(&path);
    template.expect("the SAM transform")
}

/// `value` with each `!If` replaced by its chosen branch and `!Ref
/// AWS::NoValue` dropped (`None` where it is dropped).
fn resolve_ifs(value: &Yaml, holds: &dyn Fn(&str) -> bool) -> Option<Yaml> {
    match value {
        Yaml::Tagged(tagged) if tagged.tag == "If" => {
            let parts = tagged
                .value
                .as_sequence()
                .expect("!If [condition, then, else]");
            let name = parts[0].as_str().expect("!If names a condition");
            resolve_ifs(&parts[if holds(name) { 1 } else { 2 }], holds)
        }
        Yaml::Tagged(tagged)
            if tagged.tag == "Ref" && tagged.value.as_str() == Some("AWS::NoValue") =>
        {
            None
        }
        Yaml::Tagged(tagged) => {
            let mut tagged = tagged.clone();
            tagged.value = resolve_ifs(&tagged.value, holds).unwrap_or(Yaml::Null);
            Some(Yaml::Tagged(tagged))
        }
        Yaml::Mapping(map) => Some(Yaml::Mapping(
            map.iter()
                .filter_map(|(k, v)| Some((k.clone(), resolve_ifs(v, holds)?)))
                .collect(),
        )),
        Yaml::Sequence(list) => Some(Yaml::Sequence(
            list.iter().filter_map(|v| resolve_ifs(v, holds)).collect(),
        )),
        other => Some(other.clone()),
    }
}

/// A condition of the template (`!Equals`, `!Not`, `!And`, `!Or`,
/// `!Condition`) with these parameter values.
fn condition(all: &Yaml, values: &BTreeMap<String, String>, definition: &Yaml) -> bool {
    let Yaml::Tagged(tagged) = definition else {
        panic!("not a condition: {definition:?}");
    };
    let operands = tagged
        .value
        .as_sequence()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let text = |operand: &Yaml| match operand {
        Yaml::Tagged(r) if r.tag == "Ref" => {
            let name = r.value.as_str().expect("!Ref of a name");
            values
                .get(name)
                .cloned()
                .unwrap_or_else(|| panic!("no parameter {name}"))
        }
        literal => scalar(literal).unwrap_or_else(|| panic!("not a scalar: {literal:?}")),
    };
    let tag = tagged.tag.to_string();
    match (tag.trim_start_matches('!'), operands) {
        ("Equals", [a, b]) => text(a) == text(b),
        ("Not", [inner]) => !condition(all, values, inner),
        ("And", all_of) => all_of.iter().all(|c| condition(all, values, c)),
        ("Or", any_of) => any_of.iter().any(|c| condition(all, values, c)),
        ("Condition", _) => {
            let name = tagged.value.as_str().expect("!Condition name");
            condition(all, values, &all[name])
        }
        (other, _) => panic!("a condition this test cannot evaluate: !{other}"),
    }
}

pub fn scalar(value: &Yaml) -> Option<String> {
    match value {
        Yaml::String(s) => Some(s.clone()),
        Yaml::Number(n) => Some(n.to_string()),
        Yaml::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// The template's resources of `kind`, by logical id.
pub fn of_type<'a>(template: &'a Value, kind: &str) -> Vec<(&'a String, &'a Value)> {
    template["Resources"]
        .as_object()
        .expect("resources")
        .iter()
        .filter(|(_, r)| r["Type"] == kind)
        .collect()
}

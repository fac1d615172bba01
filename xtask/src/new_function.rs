//! `cargo xtask new-function NAME`: a working function added to the project,
//! as ARCHITECTURE.md ("Adding a function") describes it (the `cargo lambda new`
//! of this template):
//!
//! - the crate `functions/NAME/` (the workspace's `functions/*` glob adds it):
//!   `main.rs` wiring only, `config.rs` (one setting, `GREETING`), `error.rs`
//!   (`InvalidRequest`), `handler.rs` (`{"name": …}` in, `{"message": …}` out),
//!   with unit tests, and its `README.md`;
//! - in `template.yaml`, each block after the last of its kind: the function,
//!   its log group and its role (writing its own log group, nothing else), its
//!   `Errors` alarm on the topic the other functions' alarms notify, and its
//!   name in `Outputs`; every other line is kept as it is;
//! - a sample event, `events/NAME/hello.json`, and what its answer must hold,
//!   `events/NAME/hello.expect.json`;
//! - its entry in `Cargo.lock` (`cargo update --workspace --offline`).
//!
//! NAME is kebab-case and new: everything is checked before anything is
//! written, and a failure after that (the lock file) undoes what was written.
//! The generated text is in `xtask/templates/new-function/`, with `@name@`
//! (kebab-case), `@lib@` (the Rust crate name) and `@Pascal@` (the logical
//! ids' prefix) replaced.

use crate::command::update_workspace_lock;
use crate::template_text::{Entry, entries, entry_key, indent};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The longest NAME: it becomes a crate, a binary and CloudFormation logical ids.
pub const MAX_NAME_LEN: usize = 40;

/// The crate's files: (path inside `functions/NAME/`, template).
const CRATE_FILES: [(&str, &str); 7] = [
    (
        "Cargo.toml",
        include_str!("../templates/new-function/Cargo.toml.tmpl"),
    ),
    (
        "src/main.rs",
        include_str!("../templates/new-function/main.rs.tmpl"),
    ),
    (
        "src/lib.rs",
        include_str!("../templates/new-function/lib.rs.tmpl"),
    ),
    (
        "src/config.rs",
        include_str!("../templates/new-function/config.rs.tmpl"),
    ),
    (
        "src/error.rs",
        include_str!("../templates/new-function/error.rs.tmpl"),
    ),
    (
        "src/handler.rs",
        include_str!("../templates/new-function/handler.rs.tmpl"),
    ),
    (
        "README.md",
        include_str!("../templates/new-function/README.md.tmpl"),
    ),
];

const FUNCTION: &str = include_str!("../templates/new-function/template/function.yaml.tmpl");
const LOG_GROUP: &str = include_str!("../templates/new-function/template/log-group.yaml.tmpl");
const ROLE: &str = include_str!("../templates/new-function/template/role.yaml.tmpl");
const ALARM: &str = include_str!("../templates/new-function/template/alarm.yaml.tmpl");
const OUTPUT: &str = include_str!("../templates/new-function/template/output.yaml.tmpl");
/// The line of [`ALARM`] the sibling alarm's `AlarmActions` and `OKActions` replace.
const ACTIONS: &str = "@actions@";

/// The sample event, and the part of the answer it must hold: `GREETING` is
/// `Hello` in the generated template.
const SAMPLE_EVENT: &str = "{\n  \"name\": \"World\"\n}\n";
const SAMPLE_EXPECTATION: &str =
    "{\n  \"answer_includes\": {\n    \"message\": \"Hello, World\"\n  }\n}\n";

/// Names a package may not have: Rust's keywords (a lib name is an
/// identifier), the crates every crate can name, and what cargo or Windows
/// refuse as a package name.
const RESERVED: &[&str] = &[
    "abstract",
    "as",
    "async",
    "await",
    "become",
    "box",
    "break",
    "const",
    "continue",
    "crate",
    "do",
    "dyn",
    "else",
    "enum",
    "extern",
    "false",
    "final",
    "fn",
    "for",
    "gen",
    "if",
    "impl",
    "in",
    "let",
    "loop",
    "macro",
    "match",
    "mod",
    "move",
    "mut",
    "override",
    "priv",
    "pub",
    "ref",
    "return",
    "self",
    "static",
    "struct",
    "super",
    "trait",
    "true",
    "try",
    "type",
    "typeof",
    "union",
    "unsafe",
    "unsized",
    "use",
    "virtual",
    "where",
    "while",
    "yield",
    "std",
    "core",
    "alloc",
    "proc_macro",
    "test",
    "build",
    "deps",
    "examples",
    "incremental",
    "con",
    "prn",
    "aux",
    "nul",
    "com1",
    "com2",
    "com3",
    "com4",
    "com5",
    "com6",
    "com7",
    "com8",
    "com9",
    "lpt1",
    "lpt2",
    "lpt3",
    "lpt4",
    "lpt5",
    "lpt6",
    "lpt7",
    "lpt8",
    "lpt9",
];

/// Add function `name` to the project at `root`: the crate, its resources in
/// `template.yaml`, its sample event, its `Cargo.lock` entry. Returns the
/// files written (under `root`). Refuses, writing nothing, a name that is not
/// kebab-case or is taken (a crate, a folder, a resource).
pub fn create(root: &Path, name: &str) -> Result<Vec<PathBuf>, String> {
    check_name(name, &taken_crates(root)?)?;
    let names = Names::new(name);
    let crate_dir = format!("functions/{name}");
    let events_dir = format!("events/{name}");
    for dir in [&crate_dir, &events_dir] {
        if root.join(dir).exists() {
            return Err(format!("`{dir}` already exists: choose another name"));
        }
    }
    for parent in ["functions", "events"] {
        if !root.join(parent).is_dir() {
            return Err(format!(
                "{} has no `{parent}/` folder: is it this project's root?",
                root.display()
            ));
        }
    }
    let template = read(&root.join("template.yaml"))?;
    let new_template = add_to_template(&template, &names)?;
    let mut files: Vec<(String, String)> = CRATE_FILES
        .iter()
        .map(|(path, text)| (format!("{crate_dir}/{path}"), names.render(text)))
        .collect();
    files.push((format!("{events_dir}/hello.json"), SAMPLE_EVENT.into()));
    files.push((
        format!("{events_dir}/hello.expect.json"),
        SAMPLE_EXPECTATION.into(),
    ));
    files.push(("template.yaml".into(), new_template));

    let lock = root.join("Cargo.lock");
    let lock_before = std::fs::read_to_string(&lock).ok();
    let written = write_all(root, &[&crate_dir, &events_dir], &files).and_then(|mut written| {
        update_workspace_lock(root).map_err(|e| format!("{e}, so `{name}` could not be locked"))?;
        if std::fs::read_to_string(&lock).ok() != lock_before {
            written.push(lock.clone());
        }
        Ok(written)
    });
    written.map_err(|error| {
        // Undo: the two folders were checked absent, so they are this run's.
        let mut undo = vec![
            remove_dir(&root.join(&crate_dir)),
            remove_dir(&root.join(&events_dir)),
            write(&root.join("template.yaml"), &template),
        ];
        undo.push(match &lock_before {
            Some(text) => write(&lock, text),
            None => std::fs::remove_file(&lock).or(Ok(())),
        });
        let undo: Vec<String> = undo
            .into_iter()
            .filter_map(Result::err)
            .map(|e| e.to_string())
            .collect();
        if undo.is_empty() {
            format!("{error} (nothing was left written)")
        } else {
            format!("{error}; undoing it failed too: {}", undo.join("; "))
        }
    })
}

/// Whether `name` may name a new function: kebab-case (`[a-z][a-z0-9-]*`,
/// no `--`, no trailing `-`), at most [`MAX_NAME_LEN`] characters, not a Rust
/// keyword or reserved name, and not the name of a crate in `taken` (names with
/// `-` as `_`: cargo's lib names).
fn check_name(name: &str, taken: &BTreeSet<String>) -> Result<(), String> {
    let kebab = name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.ends_with('-')
        && !name.contains("--");
    if !kebab {
        return Err(format!(
            "`{name}` is not a kebab-case name: a lowercase letter, then lowercase letters, \
             digits and single hyphens (`[a-z][a-z0-9-]*`), e.g. `image-resizer`"
        ));
    }
    if name.len() > MAX_NAME_LEN {
        return Err(format!(
            "`{name}` is {} characters long; at most {MAX_NAME_LEN}: it names a crate, a binary \
             and CloudFormation resources",
            name.len()
        ));
    }
    let lib = name.replace('-', "_");
    if RESERVED.contains(&lib.as_str()) {
        return Err(format!(
            "`{name}` is a Rust keyword or a name cargo reserves: choose another"
        ));
    }
    if taken.contains(&lib) {
        return Err(format!(
            "a crate named `{name}` is already in the workspace or among its dependencies \
             (Cargo.lock, [workspace.dependencies]): choose another name"
        ));
    }
    Ok(())
}

/// The crates in the way of a new one (`-` as `_`): every package of
/// `Cargo.lock` (the workspace's and their dependencies: `cargo -p NAME` would
/// be ambiguous) and every key of the root `[workspace.dependencies]`.
fn taken_crates(root: &Path) -> Result<BTreeSet<String>, String> {
    let manifest = read(&root.join("Cargo.toml"))?;
    if !manifest.lines().any(|l| l.trim() == "[workspace]") {
        return Err(format!(
            "{} is not a workspace's manifest",
            root.join("Cargo.toml").display()
        ));
    }
    let lock = std::fs::read_to_string(root.join("Cargo.lock")).unwrap_or_default();
    let locked = lock.lines().filter_map(|l| {
        l.strip_prefix("name = \"")
            .and_then(|rest| rest.strip_suffix('"'))
    });
    let mut in_table = false;
    let mut keys = vec![];
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            in_table = line == "[workspace.dependencies]";
        } else if in_table
            && !line.starts_with('#')
            && let Some((key, _)) = line.split_once('=')
        {
            keys.push(key.trim().trim_matches('"'));
        }
    }
    Ok(locked
        .chain(keys)
        .map(|name| name.replace('-', "_"))
        .collect())
}

/// The spellings of a function's name.
struct Names {
    /// Kebab-case: the folder, the package, the binary (`image-resizer`).
    name: String,
    /// The Rust crate name (`image_resizer`).
    lib: String,
    /// The logical ids' prefix (`ImageResizer`).
    pascal: String,
}

impl Names {
    fn new(name: &str) -> Self {
        let pascal = name
            .split('-')
            .map(|part| {
                let mut chars = part.chars();
                chars.next().map_or_else(String::new, |first| {
                    first.to_ascii_uppercase().to_string() + chars.as_str()
                })
            })
            .collect();
        Self {
            name: name.to_owned(),
            lib: name.replace('-', "_"),
            pascal,
        }
    }

    /// `template` with the placeholders replaced.
    fn render(&self, template: &str) -> String {
        template
            .replace("@name@", &self.name)
            .replace("@lib@", &self.lib)
            .replace("@Pascal@", &self.pascal)
    }
}

// ---------------------------------------------------------------- template.yaml

/// `template` with function `name`'s resources added, as `create` adds them.
#[cfg(test)]
pub fn added_to_template(template: &str, name: &str) -> Result<String, String> {
    add_to_template(template, &Names::new(name))
}

/// `template` with function `names`' resources added, each after the last of
/// its kind: the `Errors` alarm after the functions' `Errors` alarms, the log
/// group and role after the roles, the function after the functions, the
/// `…FunctionName` output after the others (if there are any). Refused if one
/// of these logical ids or the function's binary or folder is already there.
fn add_to_template(template: &str, names: &Names) -> Result<String, String> {
    let newline = if template.contains("\r\n") {
        "\r\n"
    } else {
        "\n"
    };
    let lines: Vec<&str> = template.lines().collect();
    refuse_declared(&lines, names)?;
    let mut insertions = blocks_to_insert(&lines, names)?;
    let mut text = insert_blocks(&lines, &mut insertions).join(newline);
    if template.ends_with('\n') {
        text.push_str(newline);
    }
    Ok(text)
}

/// An error if a line of the template declares one of `names`' logical ids,
/// or a function of its binary or folder.
fn refuse_declared(lines: &[&str], names: &Names) -> Result<(), String> {
    let pascal = &names.pascal;
    let ids = [
        "Function",
        "Role",
        "LogGroup",
        "ErrorsAlarm",
        "FunctionName",
    ]
    .map(|suffix| format!("{pascal}{suffix}"));
    for (n, line) in lines.iter().enumerate() {
        let key = (indent(line) == 2).then(|| entry_key(line)).flatten();
        if let Some(id) = ids.iter().find(|id| key == Some(id.as_str())) {
            return Err(format!(
                "template.yaml:{}: `{id}` is already declared: choose another name",
                n + 1
            ));
        }
        let value = line.trim();
        if value == format!("Binary: {}", names.name)
            || value.trim_end_matches('/') == format!("CodeUri: functions/{}", names.name)
        {
            return Err(format!(
                "template.yaml:{}: `{value}`: a function is already declared for `{}`",
                n + 1,
                names.name
            ));
        }
    }
    Ok(())
}

/// `names`' blocks, each with the entry of the template it goes after: the
/// last `Errors` alarm of a function, role, function and `…FunctionName`
/// output (no output block if the template has none).
fn blocks_to_insert<'a>(
    lines: &[&'a str],
    names: &Names,
) -> Result<Vec<(Entry<'a>, String)>, String> {
    let pascal = &names.pascal;
    let resources =
        entries(lines, "Resources").ok_or("template.yaml has no top-level `Resources:` section")?;
    let last_of = |kind: &str, what: &str| {
        resources
            .iter()
            .rev()
            .find(|e| e.kind == Some(kind))
            .copied()
            .ok_or(format!(
                "template.yaml declares no {what} ({kind}) to add {pascal}'s beside"
            ))
    };
    let function = last_of("AWS::Serverless::Function", "function")?;
    let role = last_of("AWS::IAM::Role", "role")?;
    let alarm = last_errors_alarm(lines, &resources)?;
    let actions = alarm_actions(&lines[alarm.start..alarm.end]);
    if actions.is_empty() {
        return Err(format!(
            "template.yaml:{}: {} has no `AlarmActions`: whom should the new alarm notify?",
            alarm.start + 1,
            alarm.key
        ));
    }
    let output = entries(lines, "Outputs").and_then(|outputs| {
        outputs
            .into_iter()
            .rev()
            .find(|e| e.key.ends_with("FunctionName"))
    });

    let alarm_block = names.render(ALARM).replace(ACTIONS, &actions.join("\n"));
    let mut insertions = vec![
        (alarm, alarm_block),
        (
            role,
            format!("{}\n{}", names.render(LOG_GROUP), names.render(ROLE)),
        ),
        (function, names.render(FUNCTION)),
    ];
    if let Some(output) = output {
        insertions.push((output, names.render(OUTPUT)));
    }
    if let Some(last) = last_tracing_role(lines, &resources) {
        let indent = &lines[last.start][..indent(lines[last.start])];
        insertions.push((last, format!("{indent}- !Ref {pascal}Role")));
    }
    Ok(insertions)
}

/// The line naming the last role of the template's `TracingPolicy` (the
/// roles allowed to send traces to X-Ray), which the new role goes after;
/// `None` if the template has no such policy.
fn last_tracing_role<'a>(lines: &[&'a str], resources: &[Entry<'a>]) -> Option<Entry<'a>> {
    let policy = resources.iter().find(|e| e.key == "TracingPolicy")?;
    let last = (policy.start..policy.end).rev().find(|&n| {
        let item = lines[n].trim();
        item.starts_with("- !Ref ") && item.ends_with("Role")
    })?;
    Some(Entry {
        key: lines[last].trim(),
        start: last,
        end: last + 1,
        kind: None,
    })
}

/// The last of `resources` that is a function's `Errors` alarm.
fn last_errors_alarm<'a>(lines: &[&str], resources: &[Entry<'a>]) -> Result<Entry<'a>, String> {
    resources
        .iter()
        .rev()
        .find(|e| {
            let block = &lines[e.start..e.end];
            e.kind == Some("AWS::CloudWatch::Alarm")
                && ["Namespace: AWS/Lambda", "MetricName: Errors"]
                    .iter()
                    .all(|property| block.iter().any(|l| l.trim() == *property))
        })
        .copied()
        .ok_or_else(|| {
            "template.yaml has no `Errors` alarm of a function to add one beside".to_owned()
        })
}

/// `lines` with each block of `insertions` after its entry, separated by a
/// blank line if the entry is from what follows it (at the end, from what
/// precedes it).
fn insert_blocks<'a>(lines: &[&'a str], insertions: &'a mut [(Entry<'_>, String)]) -> Vec<&'a str> {
    // Bottom up, so that the line numbers above stay right.
    insertions.sort_by_key(|(after, _)| std::cmp::Reverse(after.end));
    let mut out = lines.to_vec();
    for (after, block) in &*insertions {
        let blank_at = |n: usize| lines[n].trim().is_empty();
        let spaced = match lines.get(after.end) {
            Some(_) => blank_at(after.end),
            None => after.start > 0 && blank_at(after.start - 1),
        };
        let blank = spaced.then_some("");
        let block = blank.into_iter().chain(block.lines());
        out.splice(after.end..after.end, block);
    }
    out
}

/// The `AlarmActions` and `OKActions` properties of an alarm's lines, with
/// their continuation lines, as they are.
fn alarm_actions(block: &[&str]) -> Vec<String> {
    let mut actions = vec![];
    let mut taking = None;
    for line in block {
        match taking {
            Some(depth) if indent(line) > depth && !line.trim().is_empty() => {
                actions.push((*line).to_owned());
                continue;
            }
            _ => taking = None,
        }
        let property = line.trim_start();
        if property.starts_with("AlarmActions:") || property.starts_with("OKActions:") {
            actions.push((*line).to_owned());
            taking = Some(indent(line));
        }
    }
    actions
}

// ---------------------------------------------------------------- files

/// Create the folders `dirs` (absent) and write `files` (paths relative to
/// `root`); the paths written.
fn write_all(
    root: &Path,
    dirs: &[&str],
    files: &[(String, String)],
) -> Result<Vec<PathBuf>, String> {
    for dir in dirs {
        let path = root.join(dir);
        std::fs::create_dir(&path).map_err(|e| format!("create {}: {e}", path.display()))?;
    }
    let mut written = vec![];
    for (file, text) in files {
        let path = root.join(file);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| format!("create {}: {e}", parent.display()))?;
        }
        write(&path, text).map_err(|e| format!("write {}: {e}", path.display()))?;
        written.push(path);
    }
    Ok(written)
}

fn read(path: &Path) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("read {}: {e}", path.display()))
}

fn write(path: &Path, text: &str) -> std::io::Result<()> {
    std::fs::write(path, text)
}

fn remove_dir(path: &Path) -> std::io::Result<()> {
    match std::fs::remove_dir_all(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn taken() -> BTreeSet<String> {
        [
            "shared",
            "order_processor",
            "tokio",
            "lambda_runtime",
            "hyper",
        ]
        .map(String::from)
        .into()
    }

    #[test]
    fn kebab_case_names_that_are_free_are_accepted() {
        for name in [
            "greeter",
            "image-resizer",
            "a",
            "v2-api",
            "x9",
            "shared-cache",
        ] {
            assert_eq!(check_name(name, &taken()), Ok(()), "{name}");
        }
        assert_eq!(check_name(&"a".repeat(MAX_NAME_LEN), &taken()), Ok(()));
    }

    #[test]
    fn bad_or_taken_names_are_refused_with_the_reason() {
        let refused = |name: &str| check_name(name, &taken()).expect_err(name);
        for bad in [
            "",
            "Greeter",
            "greeter_fn",
            "9lives",
            "-greeter",
            "greeter-",
            "a--b",
            "gréeter",
            "a b",
            "../x",
        ] {
            assert!(refused(bad).contains("is not a kebab-case name"), "{bad}");
        }
        assert!(refused(&"a".repeat(MAX_NAME_LEN + 1)).contains("at most 40"));
        for reserved in ["fn", "self", "test", "std", "proc-macro", "async", "con"] {
            assert!(refused(reserved).contains("reserves"), "{reserved}");
        }
        for taken in [
            "shared",
            "order-processor",
            "tokio",
            "lambda-runtime",
            "hyper",
        ] {
            assert!(
                refused(taken).contains("already in the workspace"),
                "{taken}"
            );
        }
    }

    #[test]
    fn names_are_spelled_for_each_use() {
        let names = Names::new("image-resizer2");
        assert_eq!(
            (names.lib.as_str(), names.pascal.as_str()),
            ("image_resizer2", "ImageResizer2")
        );
        assert_eq!(Names::new("a").pascal, "A");
        assert_eq!(
            names.render("@name@ @lib@ @Pascal@Role"),
            "image-resizer2 image_resizer2 ImageResizer2Role"
        );
    }

    #[test]
    fn every_placeholder_of_the_templates_is_replaced() {
        let names = Names::new("greeter");
        let templates = CRATE_FILES
            .iter()
            .map(|(_, text)| *text)
            .chain([FUNCTION, LOG_GROUP, ROLE, OUTPUT]);
        for template in templates {
            let text = names.render(template);
            assert!(!text.contains('@'), "{text}");
        }
        let alarm = names.render(ALARM);
        assert_eq!(alarm.matches('@').count(), 2, "only {ACTIONS}: {alarm}");
    }

    /// A template shaped like the project's: sections, comments, packed outputs.
    const TEMPLATE: &str = "\
Parameters:
  LogRetentionDays:
    Type: Number

Resources:
  # ---- alarms
  Topic:
    Type: AWS::SNS::Topic

  QueueAlarm:
    Type: AWS::CloudWatch::Alarm
    Properties:
      Namespace: AWS/SQS
      MetricName: ApproximateAgeOfOldestMessage
      AlarmActions: [!Ref Topic]

  HasherErrorsAlarm:
    Type: AWS::CloudWatch::Alarm
    Properties:
      Namespace: AWS/Lambda
      MetricName: Errors
      AlarmActions:
        - !Ref Topic
      OKActions: [!Ref Topic]

  # ---- roles and logs
  HasherLogGroup:
    Type: AWS::Logs::LogGroup

  HasherRole:
    Type: AWS::IAM::Role
    Properties:
      Policies:
        # least privilege
        - PolicyName: p

  # ---- functions
  HasherFunction:
    Type: AWS::Serverless::Function # the only one
    Properties:
      CodeUri: functions/hasher

  # The machine.
  Machine:
    Type: AWS::Serverless::StateMachine

Outputs:
  HasherFunctionName:
    Value: !Ref HasherFunction
  MachineArn:
    Value: !Ref Machine
";

    #[test]
    fn each_block_goes_after_the_last_of_its_kind_and_every_line_stays() {
        let names = Names::new("greeter");
        let text = add_to_template(TEMPLATE, &names).expect("added");
        // Every original line, in order.
        let mut added = text.lines();
        for line in TEMPLATE.lines() {
            assert!(added.any(|l| l == line), "lost or moved: {line:?}");
        }
        let at = |needle: &str| {
            text.find(needle)
                .unwrap_or_else(|| panic!("no {needle:?} in\n{text}"))
        };
        let order = [
            "  HasherErrorsAlarm:",
            "      OKActions: [!Ref Topic]\n\n  GreeterErrorsAlarm:",
            "  # ---- roles and logs",
            "        - PolicyName: p\n\n  GreeterLogGroup:",
            "  GreeterRole:",
            "  # ---- functions",
            "      CodeUri: functions/hasher\n\n  GreeterFunction:",
            "        LogGroup: !Ref GreeterLogGroup\n\n  # The machine.",
            "    Value: !Ref HasherFunction\n  GreeterFunctionName:\n    Value: !Ref GreeterFunction\n  MachineArn:",
        ];
        for pair in order.windows(2) {
            assert!(at(pair[0]) < at(pair[1]), "{pair:?} in\n{text}");
        }
        // The sibling's actions, as they are written there.
        let alarm = &text[at("  GreeterErrorsAlarm:")..at("  # ---- roles and logs")];
        assert!(
            alarm.ends_with(
                "      AlarmActions:\n        - !Ref Topic\n      OKActions: [!Ref Topic]\n\n"
            ),
            "{alarm}"
        );
        assert!(text.ends_with("    Value: !Ref Machine\n"));
        assert_eq!(
            text.lines().count(),
            TEMPLATE.lines().count()
                + [FUNCTION, LOG_GROUP, ROLE, ALARM].map(|t| t.lines().count() + 1).iter().sum::<usize>()
                + 2 // the sibling's three lines of actions for the one placeholder line
                + OUTPUT.lines().count()
        );
    }

    #[test]
    fn a_last_entry_takes_the_spacing_of_the_one_before() {
        let packed = format!("{TEMPLATE}  OtherFunctionName:\n    Value: x\n");
        let text = add_to_template(&packed, &Names::new("greeter")).expect("added");
        assert!(
            text.ends_with(
                "  OtherFunctionName:\n    Value: x\n  GreeterFunctionName:\n    Value: !Ref GreeterFunction\n"
            ),
            "{text}"
        );
    }

    #[test]
    fn the_projects_own_template_takes_a_new_function_and_keeps_every_line() {
        let path = crate::command::workspace_root().join("template.yaml");
        let template = read(&path).expect("template.yaml");
        let text = add_to_template(&template, &Names::new("new-function-test")).expect("added");
        let mut added = text.lines();
        for line in template.lines() {
            assert!(added.any(|l| l == line), "lost or moved: {line:?}");
        }
        for id in ["Function", "Role", "LogGroup", "ErrorsAlarm"] {
            assert!(
                text.contains(&format!("\n  NewFunctionTest{id}:\n")),
                "{id}"
            );
        }
        // Its role may send traces, as the other functions' roles may: the
        // last of the tracing policy's roles.
        assert!(
            text.contains("        - !Ref NewFunctionTestRole\n      PolicyDocument:"),
            "{text}"
        );
    }

    /// The generated Rust is as `cargo fmt` leaves it, whatever the name's length.
    #[test]
    fn the_generated_rust_is_formatted() {
        let names = Names::new(&format!("{}-x", "a".repeat(MAX_NAME_LEN - 2)));
        for (path, template) in CRATE_FILES.iter().filter(|(p, _)| p.ends_with(".rs")) {
            let text = names.render(template);
            let mut rustfmt = std::process::Command::new("rustfmt")
                .args(["--edition", "2024"])
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .spawn()
                .expect("rustfmt");
            let mut stdin = rustfmt.stdin.take().expect("stdin");
            std::io::Write::write_all(&mut stdin, text.as_bytes()).expect("to rustfmt");
            drop(stdin);
            let output = rustfmt.wait_with_output().expect("rustfmt");
            assert!(output.status.success(), "rustfmt {path}");
            assert_eq!(String::from_utf8_lossy(&output.stdout), text, "{path}");
        }
    }

    #[test]
    fn nothing_is_left_written_when_a_step_fails() {
        let root = std::env::temp_dir().join(format!("new-function-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        for dir in ["functions", "events"] {
            std::fs::create_dir_all(root.join(dir)).expect("scratch folders");
        }
        // A workspace without `shared`: cargo cannot lock the new crate.
        let files = [
            ("Cargo.toml", "[workspace]\nmembers = [\"functions/*\"]\n"),
            ("Cargo.lock", "version = 4\n"),
            ("template.yaml", TEMPLATE),
        ];
        for (file, text) in files {
            std::fs::write(root.join(file), text).expect("scratch file");
        }
        let listing = |root: &Path| {
            let mut found = vec![];
            for dir in ["", "functions", "events"] {
                for entry in std::fs::read_dir(root.join(dir)).expect("list").flatten() {
                    let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
                    found.push((entry.path(), text));
                }
            }
            found.sort();
            found
        };
        let before = listing(&root);
        let refused = create(&root, "hasher").expect_err("declared in the template");
        assert!(refused.contains("already declared"), "{refused}");
        assert!(create(&root, "Hasher").is_err());
        let failed = create(&root, "greeter").expect_err("no `shared` to lock");
        assert!(failed.contains("nothing was left written"), "{failed}");
        let after = listing(&root);
        std::fs::remove_dir_all(&root).expect("clean up");
        assert_eq!(before, after);
    }

    #[test]
    fn a_name_already_in_the_template_is_refused() {
        let error = add_to_template(TEMPLATE, &Names::new("hasher")).expect_err("hasher");
        assert!(
            error.starts_with("template.yaml:17: `HasherErrorsAlarm` is already declared"),
            "{error}"
        );
        // Another logical id, but its folder is deployed already.
        let deployed = TEMPLATE.replace("functions/hasher", "functions/greeter/");
        let error = add_to_template(&deployed, &Names::new("greeter")).expect_err("deployed");
        assert!(
            error.contains("a function is already declared for `greeter`"),
            "{error}"
        );
        // No Errors alarm to copy the actions from: refused, not guessed.
        let without_alarm = TEMPLATE.replace("MetricName: Errors", "MetricName: Throttles");
        let error = add_to_template(&without_alarm, &Names::new("greeter")).expect_err("alarm");
        assert!(error.contains("no `Errors` alarm"), "{error}");
    }
}

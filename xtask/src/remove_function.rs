//! `cargo xtask remove-function NAME`: the inverse of `new-function`. It
//! removes the crate `functions/NAME/`, its sample events `events/NAME/` and,
//! from `template.yaml`, the function and what is its alone: the resources
//! named after it (`<Stem>Role`, `<Stem>LogGroup`, `<Stem>ErrorsAlarm`, ...)
//! that it or they name, the outputs that name them, and their entries in
//! shared lists (`- !Ref <Stem>Role` in `TracingPolicy`). What the function
//! used and others may still use (a table, a queue, a parameter) stays, and
//! is listed.
//!
//! Everything is checked before anything is written. It refuses a function
//! that another resource still calls (the state machine calls the Arrow
//! worker), naming each reference, and a crate that another member of the
//! workspace depends on (which would then fail to load).

use crate::command::update_workspace_lock;
use crate::template_text::{Entry, entries, indent};
use std::collections::BTreeSet;
use std::path::Path;

/// What a removal did and left.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Removal {
    /// The new `template.yaml`.
    pub template: String,
    /// Logical ids removed (resources, then outputs).
    pub removed: Vec<String>,
    /// Shared lists the function's resources were taken out of: `(resource, line)`.
    pub unlisted: Vec<(String, String)>,
    /// What the function named and stays: `(id, who else names it)`, empty
    /// when nothing else does any more.
    pub kept: Vec<(String, Vec<String>)>,
}

/// Remove function `name` from the project at `root`; what it removed and
/// kept, for the user.
pub fn remove(root: &Path, name: &str) -> Result<String, String> {
    let crate_dir = root.join("functions").join(name);
    if !crate_dir.join("Cargo.toml").is_file() {
        return Err(format!(
            "functions/{name}/Cargo.toml does not exist: no function crate `{name}`"
        ));
    }
    let dependents = dependents(root, name)?;
    if !dependents.is_empty() {
        return Err(format!(
            "`{name}` is still a dependency of: {}; remove those first, or the workspace will not load",
            dependents.join(", ")
        ));
    }
    let path = root.join("template.yaml");
    let template =
        std::fs::read_to_string(&path).map_err(|e| format!("read {}: {e}", path.display()))?;
    let removal = from_template(&template, name)?;
    std::fs::write(&path, &removal.template)
        .map_err(|e| format!("write {}: {e}", path.display()))?;
    for dir in [crate_dir, root.join("events").join(name)] {
        match std::fs::remove_dir_all(&dir) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(format!("remove {}: {e}", dir.display()));
            }
            _ => {}
        }
    }
    update_workspace_lock(root)?;
    Ok(report(name, &removal))
}

/// The lines telling the user what [`remove`] did.
pub fn report(name: &str, removal: &Removal) -> String {
    let mut out = format!(
        "removed functions/{name}/, events/{name}/ and from template.yaml: {}\n",
        removal.removed.join(", ")
    );
    for (list, line) in &removal.unlisted {
        out.push_str(&format!("  taken out of {list}: `{line}`\n"));
    }
    for (id, users) in &removal.kept {
        if users.is_empty() {
            out.push_str(&format!(
                "kept {id}: nothing else uses it now; delete it if you do not need it\n"
            ));
        } else {
            out.push_str(&format!("kept {id}: still used by {}\n", users.join(", ")));
        }
    }
    out
}

/// `template` without function `name` (its `Binary` or `CodeUri`) and what is
/// its alone; refused if anything else still names it.
pub fn from_template(template: &str, name: &str) -> Result<Removal, String> {
    removal(template, name, false)
}

/// [`from_template`], and what still calls the function goes too, with what
/// is that caller's alone (the state machine that calls the Arrow worker,
/// its role, its alarm): what a user removes by hand ("a state machine that
/// calls it goes too", README).
pub fn with_callers(template: &str, name: &str) -> Result<Removal, String> {
    removal(template, name, true)
}

fn removal(template: &str, name: &str, with_callers: bool) -> Result<Removal, String> {
    let lines: Vec<&str> = template.lines().collect();
    let resources = entries(&lines, "Resources")
        .ok_or("template.yaml has no top-level `Resources:` section")?;
    let outputs = entries(&lines, "Outputs").unwrap_or_default();
    let function = find_function(&lines, &resources, name)?;
    let mut owned = owned(&lines, &resources, function);
    if with_callers {
        owned = and_callers(&lines, &resources, owned, function);
    }
    let names_owned = |line: &str| ids(line).iter().any(|id| is_owned(id, &owned, function));

    let mut drop: BTreeSet<usize> = BTreeSet::new();
    let mut removal = Removal::default();
    let mut callers = vec![];
    for entry in &resources {
        if owned.contains(entry.key) {
            drop.extend(block_with_comments(&lines, entry));
            removal.removed.push(entry.key.to_owned());
            continue;
        }
        for (n, line) in lines.iter().enumerate().take(entry.end).skip(entry.start) {
            if !names_owned(line) {
                continue;
            }
            if is_list_item(line, &ids(line)) {
                drop.insert(n);
                removal
                    .unlisted
                    .push((entry.key.to_owned(), line.trim().to_owned()));
            } else {
                callers.push(format!(
                    "template.yaml:{}: {} names it: `{}`",
                    n + 1,
                    entry.key,
                    line.trim()
                ));
            }
        }
    }
    if !callers.is_empty() {
        return Err(format!(
            "{} is still called by other resources; remove or change them first:\n  {}",
            function.key,
            callers.join("\n  ")
        ));
    }
    for entry in &outputs {
        if (entry.start..entry.end).any(|n| names_owned(lines[n])) {
            drop.extend(block_with_comments(&lines, entry));
            removal.removed.push(entry.key.to_owned());
        }
    }
    removal.kept = kept(&lines, &resources, &outputs, &owned, function, &drop);
    removal.template = without(template, &lines, &drop);
    Ok(removal)
}

/// The function whose `Binary` or `CodeUri` is `name`.
fn find_function<'a>(
    lines: &[&str],
    resources: &[Entry<'a>],
    name: &str,
) -> Result<Entry<'a>, String> {
    resources
        .iter()
        .find(|e| {
            e.kind == Some("AWS::Serverless::Function")
                && lines[e.start..e.end].iter().any(|l| {
                    let value = l.trim();
                    value == format!("Binary: {name}")
                        || value.trim_end_matches('/') == format!("CodeUri: functions/{name}")
                })
        })
        .copied()
        .ok_or_else(|| format!("template.yaml declares no function built from `{name}`"))
}

/// The function and the resources that are its alone: named after it (its
/// logical id less `Function`) and naming it or named by it, or by another
/// of them.
fn owned<'a>(lines: &[&str], resources: &[Entry<'a>], function: Entry<'a>) -> BTreeSet<&'a str> {
    let stem = function
        .key
        .strip_suffix("Function")
        .unwrap_or(function.key);
    let mut owned = BTreeSet::from([function.key]);
    let block_ids = |e: &Entry| -> BTreeSet<String> {
        lines[e.start + 1..e.end]
            .iter()
            .flat_map(|l| ids(l))
            .collect()
    };
    loop {
        let before = owned.len();
        for e in resources.iter().filter(|e| e.key.starts_with(stem)) {
            let names_owned = block_ids(e).iter().any(|id| owned.contains(id.as_str()));
            let named_by_owned = resources
                .iter()
                .filter(|o| owned.contains(o.key))
                .any(|o| block_ids(o).contains(e.key));
            if names_owned || named_by_owned {
                owned.insert(e.key);
            }
        }
        if owned.len() == before {
            return owned;
        }
    }
}

/// `owned` and, until none is left, every resource that names one of them
/// other than in a list of references, with what is its alone.
fn and_callers<'a>(
    lines: &[&str],
    resources: &[Entry<'a>],
    mut owned: BTreeSet<&'a str>,
    function: Entry<'a>,
) -> BTreeSet<&'a str> {
    loop {
        let before = owned.len();
        let callers: Vec<Entry> = resources
            .iter()
            .filter(|e| !owned.contains(e.key))
            .filter(|e| {
                lines[e.start + 1..e.end].iter().any(|line| {
                    let named = ids(line);
                    !is_list_item(line, &named)
                        && named.iter().any(|id| is_owned(id, &owned, function))
                })
            })
            .copied()
            .collect();
        for caller in callers {
            owned.extend(self::owned(lines, resources, caller));
        }
        if owned.len() == before {
            return owned;
        }
    }
}

/// Whether `line` is an item of a list of references naming one id
/// (`- !Ref X`): it goes, its list stays.
fn is_list_item(line: &str, named: &[String]) -> bool {
    let item = line.trim_start();
    (item.starts_with("- !Ref ") || item.starts_with("- !GetAtt ")) && named.len() == 1
}

/// Whether `id` is one of `owned`, or a resource SAM makes for the function
/// (`<Function>Url`, `<Function>Role`, `<Function>Alias…`).
fn is_owned(id: &str, owned: &BTreeSet<&str>, function: Entry) -> bool {
    owned.contains(id) || id.starts_with(function.key)
}

/// Words of a template that are CloudFormation's, never a logical id.
const INTRINSICS: &[&str] = &[
    "Ref",
    "GetAtt",
    "Sub",
    "Join",
    "Select",
    "Split",
    "If",
    "Equals",
    "Not",
    "And",
    "Or",
    "Condition",
    "Fn",
    "Arn",
    "FindInMap",
    "ImportValue",
    "Base64",
    "Cidr",
    "GetAZs",
];

/// The logical ids a line may name: its capitalised alphanumeric words
/// (`!Ref X`, `!GetAtt X.Arn`, `${X}`, `Ref: X`) but CloudFormation's own.
fn ids(line: &str) -> Vec<String> {
    let code = line.split(" #").next().unwrap_or(line);
    code.split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| w.starts_with(|c: char| c.is_ascii_uppercase()) && !INTRINSICS.contains(w))
        .map(str::to_owned)
        .collect()
}

/// The resources and parameters the removed blocks named that stay, each
/// with the resources and outputs still naming it.
fn kept(
    lines: &[&str],
    resources: &[Entry],
    outputs: &[Entry],
    owned: &BTreeSet<&str>,
    function: Entry,
    drop: &BTreeSet<usize>,
) -> Vec<(String, Vec<String>)> {
    let parameters = entries(lines, "Parameters").unwrap_or_default();
    let declared: BTreeSet<&str> = resources.iter().chain(&parameters).map(|e| e.key).collect();
    let named: BTreeSet<String> = drop
        .iter()
        .flat_map(|&n| ids(lines[n]))
        .filter(|id| declared.contains(id.as_str()) && !is_owned(id, owned, function))
        .collect();
    named
        .into_iter()
        .map(|id| {
            let users = resources
                .iter()
                .chain(outputs)
                .filter(|e| e.key != id && !owned.contains(e.key))
                .filter(|e| {
                    (e.start..e.end).any(|n| !drop.contains(&n) && ids(lines[n]).contains(&id))
                })
                .map(|e| e.key.to_owned())
                .collect();
            (id, users)
        })
        .collect()
}

/// The lines of `entry` with the comment lines right above it and one blank
/// line that separated it from the next entry (or the previous one, at the end).
fn block_with_comments(lines: &[&str], entry: &Entry) -> Vec<usize> {
    let mut start = entry.start;
    while start > 0 && indent(lines[start - 1]) == 2 && lines[start - 1].trim().starts_with('#') {
        start -= 1;
    }
    let mut block: Vec<usize> = (start..entry.end).collect();
    if lines.get(entry.end).is_some_and(|l| l.trim().is_empty()) {
        block.push(entry.end);
    } else if start > 0 && lines[start - 1].trim().is_empty() {
        block.push(start - 1);
    }
    block
}

/// `template` without the lines `drop`, in its own line ends.
fn without(template: &str, lines: &[&str], drop: &BTreeSet<usize>) -> String {
    let newline = if template.contains("\r\n") {
        "\r\n"
    } else {
        "\n"
    };
    let kept: Vec<&str> = lines
        .iter()
        .enumerate()
        .filter(|(n, _)| !drop.contains(n))
        .map(|(_, l)| *l)
        .collect();
    let mut text = kept.join(newline);
    if template.ends_with('\n') {
        text.push_str(newline);
    }
    text
}

/// The workspace manifests (outside the function's own folder, which goes
/// with it) that name the crate `name` or a path into its folder: they would
/// fail to load without it.
fn dependents(root: &Path, name: &str) -> Result<Vec<String>, String> {
    let mut found = vec![];
    let mut manifests = vec![root.join("Cargo.toml")];
    for dir in ["functions", "shared", "tools", "tests", "xtask"] {
        collect_manifests(&root.join(dir), &mut manifests);
    }
    let own = root.join("functions").join(name);
    let (folder, inside) = (format!("functions/{name}\""), format!("functions/{name}/"));
    for manifest in manifests.into_iter().filter(|m| !m.starts_with(&own)) {
        let text = std::fs::read_to_string(&manifest)
            .map_err(|e| format!("read {}: {e}", manifest.display()))?;
        let depends = text.lines().any(|l| {
            let l = l.trim();
            l.starts_with(&format!("{name} ")) && l.contains('=') && !l.starts_with('[')
                || l.starts_with(&format!("{name}.workspace"))
                || l.contains(&folder)
                || l.contains(&inside)
        });
        if depends {
            let shown = manifest.strip_prefix(root).unwrap_or(&manifest);
            found.push(shown.display().to_string());
        }
    }
    Ok(found)
}

/// Every `Cargo.toml` under `dir`, build output and hidden folders aside.
fn collect_manifests(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let file_name = entry.file_name();
        let hidden = file_name.to_string_lossy().starts_with('.') || file_name == "target";
        if path.is_dir() && !hidden {
            collect_manifests(&path, out);
        } else if file_name == "Cargo.toml" {
            out.push(path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shipped() -> String {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("..")
            .join("template.yaml");
        std::fs::read_to_string(&path).expect("the shipped template.yaml")
    }

    #[test]
    fn the_hasher_goes_with_its_role_log_group_alarm_url_and_outputs() {
        let template = shipped();
        let removal = from_template(&template, "password-hasher").expect("removed");
        assert_eq!(
            removal.removed,
            [
                "PasswordHasherErrorsAlarm",
                "PasswordHasherLogGroup",
                "PasswordHasherRole",
                "PasswordHasherFunction",
                "PasswordHasherFunctionName",
                "PasswordHasherUrl",
            ]
        );
        assert_eq!(
            removal.unlisted,
            [(
                "TracingPolicy".to_owned(),
                "- !Ref PasswordHasherRole".to_owned()
            )]
        );
        assert!(!removal.template.contains("PasswordHasher"));
        assert!(!removal.template.contains("password-hasher"));
        // The other functions and their resources are untouched.
        for kept in [
            "OrderProcessorFunction",
            "ArrowWorkerRole",
            "- !Ref OrderProcessorRole",
        ] {
            assert!(removal.template.contains(kept), "{kept}");
        }
        assert!(
            !removal.template.contains("\n\n\n"),
            "no doubled blank lines"
        );
        // It was the only user of nothing: what it named stays, still used.
        for (id, users) in &removal.kept {
            assert!(!users.is_empty(), "{id} kept with no user");
        }
    }

    #[test]
    fn the_order_processor_goes_and_its_queue_is_listed_as_kept() {
        let removal = from_template(&shipped(), "order-processor").expect("removed");
        assert!(
            removal
                .removed
                .contains(&"OrderProcessorFunction".to_owned())
        );
        assert!(removal.removed.contains(&"OrderProcessorRole".to_owned()));
        assert!(!removal.template.contains("OrderProcessor"));
        let kept: Vec<&str> = removal.kept.iter().map(|(id, _)| id.as_str()).collect();
        for id in ["OrdersTable", "OrdersQueue", "OrdersDeadLetterQueue"] {
            assert!(kept.contains(&id), "{id} not listed as kept: {kept:?}");
        }
        let report = report("order-processor", &removal);
        assert!(
            report.contains("kept OrdersTable: still used by"),
            "{report}"
        );
    }

    #[test]
    fn by_hand_the_state_machine_that_calls_a_function_goes_with_it() {
        let removal = with_callers(&shipped(), "arrow-worker").expect("removed");
        for id in [
            "ArrowWorkerFunction",
            "ArrowWorkerRole",
            "OrdersReportStateMachine",
            "OrdersReportStateMachineRole",
            "ReportStateMachineFailedAlarm",
            "OrdersReportStateMachineArn",
        ] {
            assert!(
                removal.removed.contains(&id.to_owned()),
                "{id}: {removal:?}"
            );
        }
        assert!(!removal.template.contains("ArrowWorker"));
        assert!(!removal.template.contains("OrdersReportStateMachine"));
        // What others use stays: the other functions, the tables, the bucket.
        for kept in [
            "OrderProcessorFunction",
            "PasswordHasherFunction",
            "ReportsTable:",
            "AnalyticsBucket:",
        ] {
            assert!(removal.template.contains(kept), "{kept}");
        }
        // Nothing the template keeps names what went.
        let gone = from_template(&removal.template, "arrow-worker").expect_err("gone");
        assert!(gone.contains("no function built from"), "{gone}");
        // A function nothing calls goes alike either way.
        assert_eq!(
            with_callers(&shipped(), "password-hasher"),
            from_template(&shipped(), "password-hasher")
        );
    }

    #[test]
    fn a_function_another_resource_calls_is_refused_with_each_reference() {
        let refused = from_template(&shipped(), "arrow-worker").expect_err("refused");
        assert!(
            refused.contains("ArrowWorkerFunction is still called"),
            "{refused}"
        );
        assert!(
            refused.contains("OrdersReportStateMachineRole names it"),
            "{refused}"
        );
        assert!(
            refused.contains("OrdersReportStateMachine names it"),
            "{refused}"
        );
    }

    /// `remove-function` undoes `new-function` in the template, line for line.
    #[test]
    fn a_function_new_function_added_goes_and_leaves_the_template_as_it_was() {
        let template = shipped();
        let added =
            crate::new_function::added_to_template(&template, "image-resizer").expect("added");
        assert_ne!(added, template);
        let removal = from_template(&added, "image-resizer").expect("removed");
        assert_eq!(removal.template, template);
        assert_eq!(
            removal.removed,
            [
                "ImageResizerErrorsAlarm",
                "ImageResizerLogGroup",
                "ImageResizerRole",
                "ImageResizerFunction",
                "ImageResizerFunctionName",
            ]
        );
        let report = report("image-resizer", &removal);
        assert!(report.contains("taken out of TracingPolicy"), "{report}");
    }

    #[test]
    fn an_unknown_function_is_refused() {
        let refused = from_template(&shipped(), "no-such-function").expect_err("refused");
        assert!(refused.contains("no function built from `no-such-function`"));
    }

    #[test]
    fn a_crate_other_members_depend_on_is_named() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        // As shipped, only a function's own folder depends on it (its test,
        // lab and fuzz crates go with it).
        for sample in ["password-hasher", "order-processor", "arrow-worker"] {
            let found = dependents(&root, sample).expect("manifests read");
            assert!(found.is_empty(), "{sample}: {found:?}");
        }
        // A tool that names one, by a path into its folder or by name, is found.
        let scratch = std::env::temp_dir().join(format!("remove-function-{}", std::process::id()));
        let tool = scratch.join("tools").join("probe");
        std::fs::create_dir_all(&tool).expect("scratch");
        std::fs::write(scratch.join("Cargo.toml"), "[workspace]\n").expect("root");
        let manifest = tool.join("Cargo.toml");
        std::fs::write(
            &manifest,
            "[dependencies]\nhelpers = { path = \"../../functions/password-hasher/testkit\" }\n",
        )
        .expect("manifest");
        let by_path = dependents(&scratch, "password-hasher");
        std::fs::write(&manifest, "[dependencies]\narrow-worker.workspace = true\n")
            .expect("manifest");
        let by_name = dependents(&scratch, "arrow-worker");
        let _ = std::fs::remove_dir_all(&scratch);
        assert_eq!(by_path.expect("read"), ["tools/probe/Cargo.toml"]);
        assert_eq!(by_name.expect("read"), ["tools/probe/Cargo.toml"]);
        assert!(
            dependents(&root, "no-such-function")
                .expect("read")
                .is_empty()
        );
    }
}

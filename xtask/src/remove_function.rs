//! `cargo xtask remove-function NAME`: the inverse of `new-function`. It
//! removes the crate `functions/NAME/`, its sample events `events/NAME/` and,
//! from `template.yaml`, the function and what is its alone: the resources
//! named after it (`<Stem>Role`, `<Stem>LogGroup`, `<Stem>ErrorsAlarm`, ...)
//! that it or they name, the outputs that name them, and their entries in
//! shared lists (`- !Ref <Stem>Role` in `TracingPolicy`). What the function
//! used and others may still use (a table, a queue, a parameter) stays, and
//! is listed.
//!
//! Then, from the root `Cargo.toml`, the profile entries of crates the
//! project no longer has (`profiles.rs`), which cargo would warn about on
//! every command. `functions/README.md` stays: it keeps the workspace loading
//! once no function is left.
//!
//! Everything is checked before anything is written. It refuses a function
//! that another resource still calls (the state machine calls the Arrow
//! worker), naming each reference, and a crate that another member of the
//! workspace depends on (which would then fail to load).

use crate::command::update_workspace_lock;
use crate::profiles;
use crate::template_text::{Entry, entries, indent, without};
use std::collections::BTreeSet;
use std::path::{Component, Path};

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
/// kept, for the user. Then the root `Cargo.toml`'s profile entries of the
/// crates that went with it ([`profiles::prune`]).
pub fn remove(root: &Path, name: &str) -> Result<String, String> {
    let crate_dir = root.join("functions").join(name);
    // One folder of `functions/` (not `..`, not a path), holding a crate:
    // never its README.
    let components: Vec<Component> = Path::new(name).components().collect();
    let one_folder = matches!(components[..], [Component::Normal(_)]);
    if !one_folder || !crate_dir.join("Cargo.toml").is_file() {
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
    let pruned = profiles::prune(root).map_err(|e| {
        format!("`{name}` removed, but Cargo.toml's profiles could not be pruned: {e}")
    })?;
    Ok(report(name, &removal) + &profiles::report(&pruned))
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

    /// The shipped template's functions, each with its resources' prefix
    /// (`password-hasher`: `PasswordHasher`).
    fn shipped_functions() -> Vec<(String, String)> {
        let binaries = crate::template_text::function_binaries(&shipped()).expect("functions");
        assert!(!binaries.is_empty(), "the shipped template has functions");
        binaries
            .into_iter()
            .map(|binary| {
                let prefix = binary
                    .split('-')
                    .map(|word| {
                        let mut chars = word.chars();
                        chars.next().map_or_else(String::new, |first| {
                            first.to_uppercase().chain(chars).collect()
                        })
                    })
                    .collect();
                (binary, prefix)
            })
            .collect()
    }

    /// What every removal must leave: no trace of the function, no doubled
    /// blank line, what it named and stays said, and the other functions.
    fn assert_clean(binary: &str, prefix: &str, removal: &Removal) {
        for id in [format!("{prefix}Function"), format!("{prefix}Role")] {
            assert!(removal.removed.contains(&id), "{binary}: {id} not removed");
        }
        assert!(
            !removal.template.contains(prefix),
            "{binary}: {prefix} left"
        );
        assert!(
            !removal.template.contains(&format!("Binary: {binary}")),
            "{binary}"
        );
        assert!(
            !removal.template.contains("\n\n\n"),
            "{binary}: doubled blank lines"
        );
        // What it named and stays is in the template still, and said.
        let said = report(binary, removal);
        for (id, _) in &removal.kept {
            assert!(
                removal.template.contains(&format!("{id}:")),
                "{binary}: {id}"
            );
            assert!(said.contains(id.as_str()), "{binary}: {id} not said");
        }
        // The other functions stay.
        for (other, other_prefix) in shipped_functions() {
            if other != binary && !removal.removed.contains(&format!("{other_prefix}Function")) {
                assert!(
                    removal
                        .template
                        .contains(&format!("{other_prefix}Function:")),
                    "{binary}: {other} went too"
                );
            }
        }
    }

    /// Each function of the shipped template goes with every resource of its
    /// own (named after it: role, log group, alarms, URL, outputs) and is
    /// taken out of the lists it was in; or, where another resource calls
    /// it, is refused naming each reference, and goes with its callers by
    /// hand ([`with_callers`]).
    #[test]
    fn each_shipped_function_goes_with_what_is_its_own_or_is_refused_naming_its_callers() {
        let template = shipped();
        for (binary, prefix) in shipped_functions() {
            let own: Vec<&str> = template
                .lines()
                .filter_map(crate::template_text::entry_key)
                .filter(|key| key.starts_with(&prefix))
                .collect();
            match from_template(&template, &binary) {
                Ok(removal) => {
                    assert_clean(&binary, &prefix, &removal);
                    for id in &own {
                        assert!(
                            removal.removed.iter().any(|r| r == id),
                            "{binary}: {id} kept"
                        );
                    }
                    assert_eq!(with_callers(&template, &binary), Ok(removal), "{binary}");
                }
                Err(refused) => {
                    let function = format!("{prefix}Function is still called");
                    assert!(refused.contains(&function), "{binary}: {refused}");
                    let removal = with_callers(&template, &binary).expect("with its callers");
                    assert_clean(&binary, &prefix, &removal);
                    // Each resource the refusal named went with it.
                    for line in refused.lines().skip(1) {
                        let caller = line.split(": ").nth(1).and_then(|c| c.split(' ').next());
                        let caller = caller.expect("a caller per line");
                        assert!(
                            removal.removed.iter().any(|r| r == caller),
                            "{binary}: {caller} stayed"
                        );
                    }
                    let gone = from_template(&removal.template, &binary).expect_err("gone");
                    assert!(gone.contains("no function built from"), "{gone}");
                }
            }
        }
    }

    /// A resource that another function still uses stays, listed as kept
    /// with who uses it: one function of the shipped template shares one.
    #[test]
    fn what_another_function_uses_is_kept_and_said() {
        let template = shipped();
        let shared = shipped_functions().into_iter().find_map(|(binary, _)| {
            let removal = from_template(&template, &binary).ok()?;
            let kept = removal.kept.iter().find(|(_, users)| !users.is_empty())?;
            let line = format!("kept {}: still used by", kept.0);
            Some((report(&binary, &removal), line))
        });
        let (report, line) = shared.expect("a function sharing a resource");
        assert!(report.contains(&line), "{report}");
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

    /// The root manifest's `members` and `default-members` lines, with only
    /// their entries under `functions/`.
    fn function_members(manifest: &str) -> String {
        let lines = manifest.lines().filter_map(|line| {
            let (key, list) = line.split_once(" = [")?;
            let kept: Vec<&str> = list
                .trim_end_matches(']')
                .split(',')
                .map(str::trim)
                .filter(|member| member.starts_with("\"functions/"))
                .collect();
            ["members", "default-members"]
                .contains(&key)
                .then(|| format!("{key} = [{}]\n", kept.join(", ")))
        });
        lines.collect()
    }

    /// What `remove-function` leaves of `functions/` once every function is
    /// removed (its files: the README) keeps the workspace loading: cargo
    /// reads the root manifest's `functions/*` as a path when it matches
    /// nothing. The README is no function to remove.
    #[test]
    fn with_every_function_removed_the_workspace_still_loads() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let members =
            function_members(&std::fs::read_to_string(root.join("Cargo.toml")).expect("root"));
        assert!(members.contains("\"functions/*\""), "{members}");
        let scratch =
            std::env::temp_dir().join(format!("remove-every-function-{}", std::process::id()));
        let functions = scratch.join("functions");
        std::fs::create_dir_all(&functions).expect("scratch");
        std::fs::write(
            scratch.join("Cargo.toml"),
            format!("[workspace]\nresolver = \"3\"\n{members}"),
        )
        .expect("manifest");
        for entry in std::fs::read_dir(root.join("functions"))
            .expect("functions/")
            .flatten()
        {
            if entry.path().is_file() {
                std::fs::copy(entry.path(), functions.join(entry.file_name())).expect("copy");
            }
        }
        let refused = [remove(&scratch, "README.md"), remove(&scratch, "..")];
        let loaded = pinned_tools::cargo()
            .current_dir(&scratch)
            .args([
                "metadata",
                "--no-deps",
                "--format-version",
                "1",
                "--offline",
            ])
            .output()
            .expect("cargo metadata");
        let readme_kept = functions.join("README.md").is_file();
        let _ = std::fs::remove_dir_all(&scratch);
        assert!(
            loaded.status.success(),
            "{}",
            String::from_utf8_lossy(&loaded.stderr)
        );
        for refusal in refused {
            assert!(refusal.expect_err("refused").contains("no function crate"));
        }
        assert!(readme_kept);
    }

    #[test]
    fn a_crate_other_members_depend_on_is_named() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        // As shipped, only a function's own folder depends on it (its test,
        // lab and fuzz crates go with it).
        for (function, _) in shipped_functions() {
            let found = dependents(&root, &function).expect("manifests read");
            assert!(found.is_empty(), "{function}: {found:?}");
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

//! A user's changes, made the way the README tells a user to make them, in a
//! scratch copy of the project (`target/user-changes/`), then checked there
//! as the project checks itself: a new function (`cargo xtask
//! new-function`), the default features a function declares for the copy (the
//! password hasher: computing with the `bcrypt` crate, its feature
//! `bcrypt-crate`; [`declared_features`]), the error a user meets when an
//! allocator's feature is missing, each function on another allocator, and
//! the samples removed. It knows the functions through the copy's template
//! and their folders only, so it runs as well in a project whose user
//! removed some.
//!
//! The copy builds into this workspace's `target/`, so only its own crates
//! are compiled again. Cargo names a workspace crate's artifacts after its
//! path *inside* the workspace, so the copy's crates would replace this
//! workspace's own; the copy's `.cargo/config.toml` gives each of its members
//! a profile setting of no consequence (255 codegen units instead of 256),
//! which gives them names of their own (`init_check.rs` does the same).

use crate::command::{
    Outcome, cargo, describe, local_stack, run, run_without_warning, sam_local, target_dir,
    workspace_binary, workspace_root,
};
use crate::template_text::function_binaries;
use crate::{init_check, new_function, profiles, remove_function, sam, scaffold};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Where the copy is made, inside this workspace.
const COPY: &str = "target/user-changes";
/// The function `new-function` adds to the copy.
const NEW_FUNCTION: &str = "greeter";
/// Where `sam build` builds the copy's functions, inside the copy.
const BUILD_DIR: &str = "target/sam-build-quick";
/// An allocator as a function declares it, as each function's README tells
/// how: the type `main.rs` names and `shared`'s feature in its `Cargo.toml`
/// (`System` needs none).
type Allocator = (&'static str, Option<&'static str>);

const JEMALLOC: Allocator = ("Jemalloc", Some("jemalloc"));
const SYSTEM: Allocator = ("System", None);
/// What the functions after the first take, in turn.
const IN_TURN: [Allocator; 3] = [
    ("Snmalloc", Some("snmalloc")),
    ("Mimalloc", Some("mimalloc")),
    SYSTEM,
];

/// The allocator of each of `functions` (in the template's order, the order
/// `sam build` builds them in) in the copy. Only `sam build` builds the
/// functions so: no build for the host (the copy's tests, this workspace's)
/// compiles jemalloc, whose C build is the longest of any crate here. The
/// first function `sam build` builds takes it, so that it compiles beside the
/// SDK's crates, and no other; the new function takes `System`; the others
/// snmalloc, mimalloc and `System` in turn. With four functions or more,
/// every allocator is built and run.
fn allocator_mix(functions: &[String]) -> Vec<(&str, Allocator)> {
    let mut others = 0;
    functions
        .iter()
        .map(|function| {
            let allocator = match function.as_str() {
                NEW_FUNCTION => SYSTEM,
                _ if others == 0 => JEMALLOC,
                _ => IN_TURN[(others - 1) % IN_TURN.len()],
            };
            others += usize::from(function != NEW_FUNCTION);
            (function.as_str(), allocator)
        })
        .collect()
}

/// A fresh copy in which every function that declares default features for
/// it ([`declared_features`]) has them, and `new-function` added a function:
/// the new function's format, lints (checked as it builds, as every build of
/// the suite and of `cargo xtask user-changes`:
/// [`lint_while_building`](crate::command::lint_while_building)) and unit
/// tests pass, and so do the copy's other unit tests, the test files of the
/// functions with declared features (built with them) and the copy's tidy and
/// template hygiene tests.
pub fn new_function() -> Result<(), String> {
    let copy = fresh_copy()?;
    for declared in declared_features(&copy)? {
        set_default_features(&declared.dir, &declared.features)?;
    }
    new_function::create(&copy, NEW_FUNCTION)?;
    distinct_artifact_names(&copy)?;
    run(&mut in_copy(&copy, &["fmt", "--all", "--check"]))?;
    run(&mut copy_tests(&copy)?)
}

/// `cargo test` in the copy of [`new_function`]: every member's unit tests,
/// the new function's binary's, the test files of every function with
/// declared features ([`test_files`]), tidy and template hygiene. Lints are
/// checked as this builds (`lint_while_building`), the new function's binary
/// too: no `cargo clippy` and its check build of every dependency. With the
/// whole workspace selected, cargo resolves features as for this workspace's
/// tests (the copy's members are the same, and greeter asks for nothing new),
/// so the copy compiles its own crates only: selecting just the new function
/// and `e2e` resolved tokio without the `test-util` the local stack's tests
/// add, and rebuilt the AWS SDK, hyper and rustls with it (3.5 minutes here).
fn copy_tests(copy: &Path) -> Result<Command, String> {
    let mut tests = vec!["tidy".to_owned(), "template_hygiene".to_owned()];
    for declared in declared_features(copy)? {
        tests.extend(test_files(&declared.dir)?);
    }
    tests.sort();
    tests.dedup();
    let mut args = vec!["test", "--workspace", "--lib", "--bin", NEW_FUNCTION];
    for test in &tests {
        args.extend(["--test", test.as_str()]);
    }
    Ok(in_copy(copy, &args))
}

/// Where the copy's `sam build` puts the functions (the suite's `sam local
/// invoke` step runs them).
pub fn sam_build_dir() -> PathBuf {
    workspace_root().join(COPY).join(BUILD_DIR)
}

/// Default features a function declares for the copy, in its `Cargo.toml`:
///
/// ```toml
/// [package.metadata.user-changes]
/// default-features = ["traces", "bcrypt-crate"]
/// ```
///
/// The copy builds it with those (the step after builds it so with `sam
/// build`) and runs its test files ([`test_files`]) on them: the password
/// hasher computes with the `bcrypt` crate there, not its own EksBlowfish.
struct Declared {
    /// The function's folder.
    dir: PathBuf,
    /// Its default features in the copy.
    features: Vec<String>,
}

/// The functions of the project at `root` (the packages of its
/// `functions/<name>/` folders) that declare default features for the copy,
/// from `cargo metadata` (a package's `metadata` table).
fn declared_features(root: &Path) -> Result<Vec<Declared>, String> {
    let metadata = init_check::workspace_metadata(root)?;
    let functions =
        Path::new(metadata["workspace_root"].as_str().unwrap_or_default()).join("functions");
    let mut declared = vec![];
    for package in metadata["packages"].as_array().into_iter().flatten() {
        let manifest = Path::new(package["manifest_path"].as_str().unwrap_or_default());
        let Some(dir) = manifest
            .parent()
            .filter(|dir| dir.parent() == Some(&functions))
        else {
            continue;
        };
        let list = &package["metadata"]["user-changes"]["default-features"];
        if list.is_null() {
            continue;
        }
        let features: Option<Vec<String>> = list
            .as_array()
            .map(|list| list.iter().map(|f| f.as_str().map(str::to_owned)).collect())
            .unwrap_or_default();
        let features = features.ok_or_else(|| {
            format!(
                "{}: `[package.metadata.user-changes] default-features` is not a list of feature names",
                manifest.display()
            )
        })?;
        declared.push(Declared {
            dir: dir.to_owned(),
            features,
        });
    }
    Ok(declared)
}

/// The names of the test files in `crate_dir/tests/` (cargo's names of its
/// integration tests), but its end-to-end flows (those on the generic
/// harness, `testkit`): they start the binaries of the whole workspace,
/// which the copy does not build, and the suite's own `cargo test` runs them.
fn test_files(crate_dir: &Path) -> Result<Vec<String>, String> {
    let dir = crate_dir.join("tests");
    let entries = std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut names = Vec::new();
    for entry in entries {
        let path = entry.map_err(|e| format!("{}: {e}", dir.display()))?.path();
        let end_to_end = || read(&path).is_ok_and(|text| uses_the_harness(&text));
        if path.extension().is_some_and(|ext| ext == "rs") && !end_to_end() {
            names.extend(path.file_stem().map(|s| s.to_string_lossy().into_owned()));
        }
    }
    names.sort();
    Ok(names)
}

/// Whether a test's source names the generic harness (`testkit::`, not a
/// function's own `<name>_testkit::`).
fn uses_the_harness(text: &str) -> bool {
    text.match_indices("testkit::").any(|(at, _)| {
        !text[..at]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_alphanumeric() || c == '_')
    })
}

/// In the copy of [`new_function`], every function on the allocator of
/// [`allocator_mix`], the new one without the tracing exporter: `sam build`
/// of the mix, then every sample event answered by the sam-built functions
/// under the emulator (with the default features they declared for the
/// copy), each served by its allocator, the new one saying it has no tracing
/// built in. The tests are this workspace's own builds, run on the copy
/// (`E2E_PROJECT`): built in the copy, they would compile jemalloc for the
/// host.
pub fn mixed_allocators() -> Result<(), String> {
    let copy = existing_copy()?;
    let template = copy.join("template.yaml");
    let functions = function_binaries(&read(&template)?)?;
    for (function, allocator) in allocator_mix(&functions) {
        switch_allocator(&copy.join("functions").join(function), allocator)?;
    }
    set_default_features(&copy.join("functions").join(NEW_FUNCTION), &[])?;
    let built = sam_build_dir();
    run(sam(&[
        "build",
        "--template-file",
        &template.to_string_lossy(),
        "--build-dir",
        &built.to_string_lossy(),
    ])?
    .env("SAM_BUILD_MODE", "debug")
    .env("CARGO_TARGET_DIR", workspace_root().join("target")))?;
    run(cargo()
        .args([
            "test",
            "--workspace",
            "--test",
            "emulator",
            "--test",
            "allocators",
        ])
        .env(pinned_tools::PROJECT, &copy)
        .env(pinned_tools::BOOTSTRAPS, &built))
}

/// In the copy of [`mixed_allocators`], the samples removed as a user removes
/// them: first one by hand, as the README says (its folders deleted; from
/// `template.yaml`, its resources and those of what calls it:
/// [`remove_function::with_callers`]; from `Cargo.toml`, the profile lines
/// cargo warns about: [`profiles::prune`]); it is the one a state machine
/// calls, which `remove-function` refuses, if there is one. Then every other
/// but the new function with `remove-function`. After each, what is left
/// works: [`what_is_left_works`].
pub fn samples_removed() -> Result<(), String> {
    let copy = existing_copy()?;
    let samples: Vec<String> = function_folders(&copy)?
        .into_iter()
        .filter(|name| name != NEW_FUNCTION)
        .collect();
    let template = read(&copy.join("template.yaml"))?;
    let called = samples
        .iter()
        .find(|name| remove_function::from_template(&template, name).is_err());
    let Some(by_hand) = called.or(samples.first()).cloned() else {
        println!("no sample function is left to remove");
        return Ok(());
    };
    println!("removing {by_hand} by hand");
    let removal = remove_function::with_callers(&template, &by_hand)?;
    write(&copy.join("template.yaml"), &removal.template)?;
    for dir in [copy.join("functions"), copy.join("events")] {
        let dir = dir.join(&by_hand);
        std::fs::remove_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    print!("{}", profiles::report(&profiles::prune(&copy)?));
    what_is_left_works(&copy)?;
    for name in samples.iter().filter(|name| **name != by_hand) {
        println!("cargo xtask remove-function {name}");
        print!("{}", remove_function::remove(&copy, name)?);
    }
    what_is_left_works(&copy)?;
    quick_lab(&copy)
}

/// `cargo xtask lab --quick` on the copy with only the new function left:
/// the first invocation measures it with its sample events, the sections of
/// the probes it has none of say so. This workspace's lab and probes, on the
/// copy's template and its `sam build` (as the emulator tests run).
fn quick_lab(copy: &Path) -> Result<(), String> {
    run(workspace_binary("lab", &["--quick"])?
        .env(pinned_tools::PROJECT, copy)
        .env(pinned_tools::BOOTSTRAPS, sam_build_dir())
        .env("CARGO_TARGET_DIR", target_dir()))?;
    let report = copy.join("target").join("lab-quick").join("BENCHMARKS.md");
    let text = read(&report)?;
    let functions = function_folders(copy)?;
    for function in &functions {
        // A function without a plan is sent its sample events.
        if !text.contains(&format!("`events/{function}/")) {
            return Err(format!(
                "{}: {function}'s sample events are measured nowhere",
                report.display()
            ));
        }
    }
    if !text.contains("Not measured: no function of the template has a `memory` probe") {
        return Err(format!(
            "{}: section 1 does not say why it is empty",
            report.display()
        ));
    }
    Ok(())
}

/// In the copy: `cargo xtask run` (its `sam build` of what is left, then
/// every sample event answered through the local stack), the copy's tidy and
/// template hygiene (cargo warning about no profile entry of a crate gone:
/// [`profiles::UNMATCHED`]), every sample event answered by the sam-built
/// functions under the emulator (this workspace's test builds on the copy),
/// and `sam local invoke` of one sample event per function.
fn what_is_left_works(copy: &Path) -> Result<(), String> {
    let target = workspace_root().join("target");
    run(local_stack(&["run"])?
        .env(pinned_tools::PROJECT, copy)
        .env("CARGO_TARGET_DIR", &target))?;
    run_without_warning(
        &mut in_copy(
            copy,
            &[
                "test",
                "--package",
                "e2e",
                "--test",
                "tidy",
                "--test",
                "template_hygiene",
            ],
        ),
        profiles::UNMATCHED,
    )?;
    // The tools' own unit tests, on what is left (the lab's reads its docs).
    run(&mut in_copy(
        copy,
        &["test", "--package", "xtask", "--package", "lab", "--bins"],
    ))?;
    let built = sam_build_dir();
    run(cargo()
        .args(["test", "--workspace", "--test", "emulator"])
        .env(pinned_tools::PROJECT, copy)
        .env(pinned_tools::BOOTSTRAPS, &built))?;
    if let Outcome::Skipped(why) = sam_local(true, Some(&built), Some(copy))? {
        println!("sam local invoke skipped: {why}");
    }
    Ok(())
}

/// The folders of `copy/functions/` that hold a crate, sorted.
fn function_folders(copy: &Path) -> Result<Vec<String>, String> {
    let dir = copy.join("functions");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.join("Cargo.toml").is_file())
        .filter_map(|path| path.file_name().map(|n| n.to_string_lossy().into_owned()))
        .collect();
    names.sort();
    Ok(names)
}

/// The function in `dir` with `features` as its default features instead of
/// the tracing exporter alone (`traces`), as the functions' READMEs say to
/// drop it (or the hasher's to compute with the `bcrypt` crate).
fn set_default_features(dir: &Path, features: &[String]) -> Result<(), String> {
    let manifest = dir.join("Cargo.toml");
    let text = read(&manifest)?;
    let changed = with_default_features(&text, features)
        .ok_or_else(|| format!("{}: no `{SHIPPED_DEFAULT}`", manifest.display()))?;
    write(&manifest, &changed)
}

/// A function's default features as shipped.
const SHIPPED_DEFAULT: &str = "default = [\"traces\"]";

/// `manifest` with `features` as its default ones, if they are as shipped.
fn with_default_features(manifest: &str, features: &[String]) -> Option<String> {
    let quoted: Vec<String> = features.iter().map(|f| format!("\"{f}\"")).collect();
    let line = format!("default = [{}]", quoted.join(", "));
    manifest
        .contains(SHIPPED_DEFAULT)
        .then(|| manifest.replace(SHIPPED_DEFAULT, &line))
}

/// In the copy of [`new_function`]: the new function declaring jemalloc,
/// whose feature no member of the copy enables, does not compile, and the
/// error names the feature. The build is that step's ([`copy_tests`]), so
/// only the new function compiles again: about a second, where `cargo check
/// --package` of that function alone resolved other features and checked its
/// dependencies anew (29 s).
pub fn allocator_without_feature() -> Result<(), String> {
    let copy = existing_copy()?;
    let main = copy
        .join("functions")
        .join(NEW_FUNCTION)
        .join("src")
        .join("main.rs");
    let text = read(&main)?;
    declare_allocator(&main, "Jemalloc")?;
    let check = expect_failure(
        copy_tests(&copy)?.arg("--no-run"),
        "gated behind the `jemalloc` feature",
    );
    write(&main, &text)?;
    check
}

/// `cargo ARGS` in the copy, building into this workspace's `target/`.
fn in_copy(copy: &Path, args: &[&str]) -> Command {
    let mut command = cargo();
    command
        .current_dir(copy)
        .args(args)
        .env("CARGO_TARGET_DIR", workspace_root().join("target"));
    command
}

/// A fresh copy of every file git knows here (tracked, or new and not
/// ignored), sharing this workspace's pinned tools.
fn fresh_copy() -> Result<PathBuf, String> {
    let root = workspace_root();
    let copy = init_check::fresh_dir(COPY)?;
    for file in scaffold::project_files(&root)? {
        let (from, to) = (root.join(&file), copy.join(&file));
        if !from.is_file() {
            continue; // deleted in the work tree, still in the index
        }
        if let Some(dir) = to.parent() {
            std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        }
        std::fs::copy(&from, &to).map_err(|e| format!("{}: {e}", to.display()))?;
    }
    std::os::unix::fs::symlink(root.join(".tools"), copy.join(".tools"))
        .map_err(|e| format!("{}: {e}", copy.join(".tools").display()))?;
    Ok(copy)
}

/// The copy made by [`new_function`].
fn existing_copy() -> Result<PathBuf, String> {
    let copy = workspace_root().join(COPY);
    if copy.join("functions").join(NEW_FUNCTION).is_dir() {
        Ok(copy)
    } else {
        Err(format!(
            "no {} with the new function: the new-function step runs first",
            copy.display()
        ))
    }
}

/// Give every member of the copy's workspace artifact names of its own (see
/// the module doc).
fn distinct_artifact_names(copy: &Path) -> Result<(), String> {
    let config = copy.join(".cargo").join("config.toml");
    let mut text = read(&config)?;
    text.push_str(
        "\n# A scratch copy: artifact names of its own (see xtask/src/user_changes.rs).\n",
    );
    for member in init_check::workspace_members(copy)? {
        text.push_str(&format!(
            "[profile.dev.package.{member}]\ncodegen-units = 255\n"
        ));
    }
    write(&config, &text)
}

/// Make the function in `crate_dir` declare `allocator`, as a user would:
/// the allocator line of `main.rs`, and the allocator feature on `shared`'s
/// line of `Cargo.toml`.
fn switch_allocator(crate_dir: &Path, (kind, feature): Allocator) -> Result<(), String> {
    declare_allocator(&crate_dir.join("src").join("main.rs"), kind)?;
    let manifest = crate_dir.join("Cargo.toml");
    let text = read(&manifest)?;
    let mut switched = false;
    let lines: Vec<String> = text
        .lines()
        .map(|line| {
            if !(line.starts_with("shared = ") || line.starts_with("shared.workspace")) {
                return line.to_owned();
            }
            switched = true;
            with_allocator_feature(line, feature)
        })
        .collect();
    if !switched {
        return Err(format!("{}: no `shared = ` line", manifest.display()));
    }
    write(&manifest, &(lines.join("\n") + "\n"))
}

/// Make the allocator line of the function's `main` declare `kind`.
fn declare_allocator(main: &Path, kind: &str) -> Result<(), String> {
    let text = read(main)?;
    let (before, rest) = text
        .split_once("shared::global_allocator!(")
        .ok_or_else(|| format!("{}: no allocator line", main.display()))?;
    let (_, after) = rest
        .split_once(')')
        .ok_or_else(|| format!("{}: unclosed allocator line", main.display()))?;
    write(
        main,
        &format!("{before}shared::global_allocator!({kind}){after}"),
    )
}

/// `shared`'s dependency line with `feature` as its only allocator feature.
fn with_allocator_feature(line: &str, feature: Option<&str>) -> String {
    const ALLOCATORS: [&str; 3] = ["mimalloc", "jemalloc", "snmalloc"];
    let Some((head, rest)) = line.split_once("features = [") else {
        return match feature {
            Some(f) => line.replace(
                ".workspace = true",
                &format!(" = {{ workspace = true, features = [\"{f}\"] }}"),
            ),
            None => line.to_owned(),
        };
    };
    let (list, tail) = rest.split_once(']').unwrap_or((rest, ""));
    let mut features: Vec<String> = list
        .split(',')
        .map(|f| f.trim().trim_matches('"').to_owned())
        .filter(|f| !f.is_empty() && !ALLOCATORS.contains(&f.as_str()))
        .collect();
    features.extend(feature.map(str::to_owned));
    let list: Vec<String> = features.iter().map(|f| format!("\"{f}\"")).collect();
    format!("{head}features = [{}]{tail}", list.join(", "))
}

/// Run `command` and require that it fails with `message` in its output.
fn expect_failure(command: &mut Command, message: &str) -> Result<(), String> {
    let output = command
        .output()
        .map_err(|e| format!("{}: {e}", describe(command)))?;
    let text = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() && text.contains(message) {
        Ok(())
    } else {
        Err(format!(
            "{} should fail with {message:?}, but: {}\n{text}",
            describe(command),
            output.status
        ))
    }
}

fn read(path: &Path) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))
}

fn write(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_allocator_feature_is_swapped_and_others_kept() {
        let line = r#"shared = { workspace = true, features = ["aws", "mimalloc"] }"#;
        assert_eq!(
            with_allocator_feature(line, Some("jemalloc")),
            r#"shared = { workspace = true, features = ["aws", "jemalloc"] }"#
        );
        assert_eq!(
            with_allocator_feature(line, None),
            r#"shared = { workspace = true, features = ["aws"] }"#
        );
        assert_eq!(
            with_allocator_feature("shared.workspace = true", Some("snmalloc")),
            r#"shared = { workspace = true, features = ["snmalloc"] }"#
        );
    }

    /// Every function of this project that declares default features for
    /// the copy has them (each a feature of its own) and `default` as
    /// shipped; the test files the copy runs are those not on the generic
    /// harness.
    #[test]
    fn declared_features_are_the_functions_own_and_apply_as_shipped() {
        let root = workspace_root();
        let metadata = init_check::workspace_metadata(&root).expect("cargo metadata");
        let declared = declared_features(&root).expect("declared features");
        for Declared { dir, features } in &declared {
            let manifest = read(&dir.join("Cargo.toml")).expect("its manifest");
            let changed = with_default_features(&manifest, features).unwrap_or_else(|| {
                // Already changed (the copy of a user's changes runs this too).
                let quoted: Vec<String> = features.iter().map(|f| format!("\"{f}\"")).collect();
                let line = format!("default = [{}]", quoted.join(", "));
                assert!(manifest.contains(&line), "{}: {line}", dir.display());
                manifest.clone()
            });
            assert_eq!(
                with_default_features(&changed, &[]),
                None,
                "no longer as shipped"
            );
            let package = metadata["packages"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|p| {
                    p["manifest_path"].as_str().map(Path::new) == Some(&dir.join("Cargo.toml"))
                })
                .expect("its package");
            for feature in features {
                assert!(
                    package["features"][feature].is_array(),
                    "{}: {feature}",
                    dir.display()
                );
            }
            let tests = test_files(dir).expect("its test files");
            for test in &tests {
                let text = read(&dir.join("tests").join(format!("{test}.rs"))).expect("test");
                assert!(!uses_the_harness(&text), "{test}");
            }
        }
        assert!(uses_the_harness("use testkit::fuzz;"));
        assert!(!uses_the_harness("use image_resizer_testkit::fuzz;"));
    }

    fn names(names: &[&str]) -> Vec<String> {
        names.iter().map(|n| (*n).to_owned()).collect()
    }

    #[test]
    fn the_first_function_takes_jemalloc_the_new_one_system_and_four_take_all() {
        let functions = names(&["queue-reader", "hasher", "worker", NEW_FUNCTION]);
        let kinds: Vec<&str> = allocator_mix(&functions)
            .iter()
            .map(|(_, (kind, _))| *kind)
            .collect();
        assert_eq!(kinds, ["Jemalloc", "Snmalloc", "Mimalloc", "System"]);
        let more = names(&["a", "b", NEW_FUNCTION, "c", "d", "e"]);
        let kinds: Vec<&str> = allocator_mix(&more).iter().map(|(_, (k, _))| *k).collect();
        assert_eq!(
            kinds,
            [
                "Jemalloc", "Snmalloc", "System", "Mimalloc", "System", "Snmalloc"
            ]
        );
        let few = names(&[NEW_FUNCTION, "a"]);
        assert_eq!(
            allocator_mix(&few),
            [(NEW_FUNCTION, SYSTEM), ("a", JEMALLOC)]
        );
    }

    /// The template's functions are the crates under `functions/`, in the
    /// template's order.
    #[test]
    fn the_functions_are_read_from_the_template() {
        let root = workspace_root();
        let mut functions =
            function_binaries(&read(&root.join("template.yaml")).expect("template"))
                .expect("its functions");
        functions.sort();
        assert_eq!(functions, function_folders(&root).expect("functions/"));
        let template = "Resources:\n  BFunction:\n    Type: AWS::Serverless::Function\n    \
            Metadata:\n      BuildProperties:\n        Binary: b # the first\n  Queue:\n    \
            Type: AWS::SQS::Queue\n  AFunction:\n    Type: AWS::Serverless::Function\n    \
            Metadata:\n      BuildProperties:\n        Binary: \"a\"\n";
        assert_eq!(function_binaries(template), Ok(names(&["b", "a"])));
    }
}

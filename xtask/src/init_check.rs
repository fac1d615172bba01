//! Starting a project from this template with `sam init`, checked as a user
//! would meet it: from the git repository (how a user starts a project from it) and from
//! the cookiecutter zip (`scaffold`, which also renames the stack).

use crate::command::{cargo, describe, run, workspace_root};
use crate::{sam, scaffold};

/// Start a project from this repository as a user would: build the template zip
/// (`scaffold`), `sam init` a project named `demo` from it, check that
/// every file arrived as the zip holds it (only the stack name rendered), and run
/// the new project's unit tests, reusing this workspace's `target/`.
pub fn from_zip() -> Result<(), String> {
    const WORK: &str = "target/sam-init";
    let root = workspace_root();
    let work = fresh_dir(WORK)?;
    let zip = scaffold::template_zip(&work)?;
    let demo = sam_init(&format!("{WORK}/{}", scaffold::ZIP_NAME), WORK)?;
    for file in ["template.yaml", "Cargo.toml", "Cargo.lock"] {
        if !demo.join(file).is_file() {
            return Err(format!("sam init made no {}", demo.join(file).display()));
        }
    }
    let placeholder = scaffold::stack_name_line(scaffold::PROJECT_DIR);
    let stack_demo = scaffold::stack_name_line("demo");
    for (file, mut expected) in scaffold::project_entries(&zip)? {
        if file == scaffold::RENDERED_FILE {
            expected = String::from_utf8_lossy(&expected)
                .replace(&placeholder, &stack_demo)
                .into_bytes();
        }
        let path = demo.join(&file);
        let actual = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        if actual != expected {
            return Err(format!("{} differs from the template's", path.display()));
        }
    }
    let samconfig = std::fs::read_to_string(demo.join(scaffold::RENDERED_FILE))
        .map_err(|e| format!("{}: {e}", scaffold::RENDERED_FILE))?;
    if !samconfig.contains(&stack_demo) {
        return Err(format!("the new samconfig.toml lacks `{stack_demo}`"));
    }

    // Cargo names a workspace crate's artifacts after its path inside the
    // workspace, not after where the workspace is: built into this `target/`,
    // the new project's crates would replace this workspace's own, with their
    // `CARGO_MANIFEST_DIR` pointing into `target/sam-init`. A profile setting of
    // no consequence (255 codegen units instead of 256) gives them names of their
    // own; the registry crates are still reused.
    let mut test = cargo();
    test.current_dir(&demo)
        .args(["test", "--workspace", "--lib", "--bins"])
        .env("CARGO_TARGET_DIR", root.join("target"));
    for member in workspace_members(&demo)? {
        test.arg("--config")
            .arg(format!("profile.dev.package.{member}.codegen-units=255"));
    }
    run(&mut test)
}

/// The names of the packages of the workspace in `dir`.
pub fn workspace_members(dir: &std::path::Path) -> Result<Vec<String>, String> {
    package_names(&workspace_metadata(dir)?, dir)
}

/// The names of the packages `metadata` (of the workspace in `dir`) lists;
/// an error if none.
pub fn package_names(
    metadata: &serde_json::Value,
    dir: &std::path::Path,
) -> Result<Vec<String>, String> {
    let names: Vec<String> = metadata["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|package| package["name"].as_str().map(str::to_owned))
        .collect();
    if names.is_empty() {
        return Err(format!(
            "cargo metadata lists no package in {}",
            dir.display()
        ));
    }
    Ok(names)
}

/// `cargo metadata --no-deps` of the workspace in `dir`: its own packages.
pub fn workspace_metadata(dir: &std::path::Path) -> Result<serde_json::Value, String> {
    metadata(dir, &["--no-deps"])
}

/// `cargo metadata` of the workspace in `dir` with `flags`.
pub fn metadata(dir: &std::path::Path, flags: &[&str]) -> Result<serde_json::Value, String> {
    let mut command = cargo();
    command
        .current_dir(dir)
        .args(["metadata", "--format-version", "1"])
        .args(flags);
    let output = command
        .output()
        .map_err(|e| format!("{}: {e}", describe(&command)))?;
    if !output.status.success() {
        return Err(format!(
            "{} failed ({}): {}",
            describe(&command),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    serde_json::from_slice(&output.stdout).map_err(|e| format!("cargo metadata: {e}"))
}

/// `sam init --location git+file://<this repository>`, as a user starts a
/// project: the committed tree arrives whole, byte for byte, run bits kept
/// (SAM copies a repository without `cookiecutter.json` as it is). Seconds,
/// no network, no build: a suite step.
pub fn from_git() -> Result<(), String> {
    const WORK: &str = "target/sam-init-git";
    let root = workspace_root();
    fresh_dir(WORK)?;
    let demo = sam_init(&format!("git+file://{}", root.display()), WORK)?;
    // What git holds at HEAD: `MODE blob OBJECT\tPATH`, NUL-separated.
    let listing = git_output(&root, &["ls-tree", "-r", "-z", "HEAD"], None)?;
    let mut expected = Vec::new();
    for entry in listing.split('\0').filter(|e| !e.is_empty()) {
        let (meta, path) = entry
            .split_once('\t')
            .ok_or_else(|| format!("git ls-tree: {entry}"))?;
        let fields: Vec<&str> = meta.split(' ').collect();
        if let [mode, "blob", object] = fields.as_slice() {
            expected.push((*mode, *object, path));
        }
    }
    if expected.is_empty() {
        return Err("git ls-tree HEAD listed no file".into());
    }
    // The objects the copied files would have, computed by git in one call.
    let paths: String = expected
        .iter()
        .map(|(_, _, path)| format!("{}\n", demo.join(path).display()))
        .collect();
    let hashes = git_output(&root, &["hash-object", "--stdin-paths"], Some(&paths))?;
    let mut differing = Vec::new();
    for ((mode, object, path), actual) in expected.iter().zip(hashes.lines()) {
        let executable = std::fs::metadata(demo.join(path))
            .map(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o111 != 0)
            .unwrap_or(false);
        if actual != *object || executable != (*mode == "100755") {
            differing.push(*path);
        }
    }
    if hashes.lines().count() != expected.len() || !differing.is_empty() {
        return Err(format!(
            "sam init from git: {} of {} files missing or different: {}",
            differing.len(),
            expected.len(),
            differing.join(", ")
        ));
    }
    println!(
        "sam init from git: {} files arrived as committed",
        expected.len()
    );
    Ok(())
}

/// `git ARGS` in `dir` (with `input` on standard input): its standard output.
fn git_output(dir: &std::path::Path, args: &[&str], input: Option<&str>) -> Result<String, String> {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let mut command = Command::new("git");
    command
        .current_dir(dir)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped());
    let mut child = command
        .spawn()
        .map_err(|e| format!("{}: {e}", describe(&command)))?;
    if let (Some(text), Some(mut stdin)) = (input, child.stdin.take()) {
        stdin
            .write_all(text.as_bytes())
            .map_err(|e| format!("{}: {e}", describe(&command)))?;
    }
    let output = child
        .wait_with_output()
        .map_err(|e| format!("{}: {e}", describe(&command)))?;
    if !output.status.success() {
        return Err(format!("{} failed: {}", describe(&command), output.status));
    }
    String::from_utf8(output.stdout).map_err(|e| format!("{}: {e}", describe(&command)))
}

/// The folder `dir` of the workspace, emptied.
pub fn fresh_dir(dir: &str) -> Result<std::path::PathBuf, String> {
    let path = workspace_root().join(dir);
    if path.exists() {
        std::fs::remove_dir_all(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(path)
}

/// `sam init` a project named `demo` from `location` into `WORK/out/demo`, its
/// path. With `--location`, `--no-interactive` alone still lets cookiecutter
/// prompt for `project_name`; `--no-input` takes the `--name` given.
fn sam_init(location: &str, work: &str) -> Result<std::path::PathBuf, String> {
    run(&mut sam(&[
        "init",
        "--location",
        location,
        "--name",
        "demo",
        "--no-interactive",
        "--no-input",
        "--output-dir",
        &format!("{work}/out"),
    ])?)?;
    Ok(workspace_root().join(work).join("out").join("demo"))
}

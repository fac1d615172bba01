//! The repository as a `sam init --location` template.
//!
//! `sam init --location` hands the location to cookiecutter, which wants a zip
//! whose first entry is a folder holding `cookiecutter.json` and the project under
//! `{{cookiecutter.project_name}}/`. The repository keeps its normal layout
//! (`template.yaml` at the top), so [`template_zip`] writes that zip from the
//! files git knows about:
//!
//! ```text
//! sam-template/
//!     cookiecutter.json
//!     {{cookiecutter.project_name}}/template.yaml, Cargo.toml, Cargo.lock, …
//! ```
//!
//! Cookiecutter renders every file with Jinja unless `_copy_without_render`
//! lists it, and Jinja would break files that hold `{{` or `{%` for other
//! reasons (Rust format strings do). So `cookiecutter.json` lists every file but
//! one: `samconfig.toml`, whose stack name becomes `{{cookiecutter.project_name}}`
//! while the zip is written (the repository's own `samconfig.toml` stays valid
//! TOML) and is the template's default project name.

use crate::command::workspace_root;
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use zip::CompressionMethod;
use zip::write::{SimpleFileOptions, ZipWriter};

/// The zip's top folder, which cookiecutter treats as the template repository.
pub const TOP_DIR: &str = "sam-template";
/// The folder cookiecutter renders into the project's folder.
pub const PROJECT_DIR: &str = "{{cookiecutter.project_name}}";
/// The zip's file name inside the output folder.
pub const ZIP_NAME: &str = "template.zip";
/// The only file cookiecutter renders; its stack name is the template's default
/// project name.
pub const RENDERED_FILE: &str = "samconfig.toml";

/// The `samconfig.toml` line that names the stack `name`.
pub fn stack_name_line(name: &str) -> String {
    format!("stack_name = \"{name}\"")
}

/// Write [`ZIP_NAME`] into the folder `out` (created if missing) and return its
/// path. It holds every file of the project that git knows about, tracked or
/// new but not ignored, as it is in the working tree.
pub fn template_zip(out: &Path) -> Result<PathBuf, String> {
    let root = workspace_root();
    let files = project_files(&root)?;
    if !files.iter().any(|file| file == RENDERED_FILE) {
        return Err(format!("git does not know {RENDERED_FILE}"));
    }
    let samconfig = root.join(RENDERED_FILE);
    let samconfig =
        std::fs::read(&samconfig).map_err(|e| format!("{}: {e}", samconfig.display()))?;
    let (name, samconfig) = samconfig_template(&samconfig)?;
    std::fs::create_dir_all(out).map_err(|e| format!("{}: {e}", out.display()))?;
    let path = out.join(ZIP_NAME);
    let zip_error = |e: zip::result::ZipError| format!("{}: {e}", path.display());
    let io_error = |e: std::io::Error| format!("{}: {e}", path.display());

    let mut zip = ZipWriter::new(File::create(&path).map_err(io_error)?);
    let options = SimpleFileOptions::default().compression_method(CompressionMethod::Deflated);
    // Cookiecutter requires the top folder to be the zip's first entry.
    zip.add_directory(TOP_DIR, options).map_err(zip_error)?;
    zip.start_file(format!("{TOP_DIR}/cookiecutter.json"), options)
        .map_err(zip_error)?;
    zip.write_all(cookiecutter_json(&files, &name)?.as_bytes())
        .map_err(io_error)?;

    for file in &files {
        let source = root.join(file);
        let bytes = if file == RENDERED_FILE {
            samconfig.as_bytes().to_vec()
        } else {
            std::fs::read(&source).map_err(|e| format!("{}: {e}", source.display()))?
        };
        let mode = source
            .metadata()
            .map_err(|e| format!("{}: {e}", source.display()))?
            .permissions()
            .mode();
        let permissions = if mode & 0o111 != 0 { 0o755 } else { 0o644 };
        zip.start_file(
            format!("{TOP_DIR}/{PROJECT_DIR}/{file}"),
            options.unix_permissions(permissions),
        )
        .map_err(zip_error)?;
        zip.write_all(&bytes).map_err(io_error)?;
    }
    zip.finish().map_err(zip_error)?;
    Ok(path)
}

/// The project's files in a zip written by [`template_zip`]: path inside the
/// project → contents (`samconfig.toml` as the template, before rendering).
pub fn project_entries(zip: &Path) -> Result<BTreeMap<String, Vec<u8>>, String> {
    let zip_error = |e: zip::result::ZipError| format!("{}: {e}", zip.display());
    let file = File::open(zip).map_err(|e| format!("{}: {e}", zip.display()))?;
    let mut archive = zip::ZipArchive::new(file).map_err(zip_error)?;
    let prefix = format!("{TOP_DIR}/{PROJECT_DIR}/");
    let mut entries = BTreeMap::new();
    for i in 0..archive.len() {
        let mut entry = archive.by_index(i).map_err(zip_error)?;
        let name = entry.name().map_err(zip_error)?.into_owned();
        if let Some(path) = name.strip_prefix(&prefix) {
            let mut bytes = Vec::new();
            entry
                .read_to_end(&mut bytes)
                .map_err(|e| format!("{}: {name}: {e}", zip.display()))?;
            entries.insert(path.to_owned(), bytes);
        }
    }
    Ok(entries)
}

/// Whether `root` is the top folder of a git work tree. A project made by
/// `sam init` is not until `git init`; it may even sit inside another
/// repository's ignored folder, where `git ls-files` would list nothing.
pub fn is_git_work_tree(root: &Path) -> bool {
    let output = Command::new("git")
        .current_dir(root)
        .args(["rev-parse", "--show-toplevel"])
        .output();
    let top = output
        .ok()
        .filter(|output| output.status.success())
        .and_then(|output| String::from_utf8(output.stdout).ok());
    top.is_some_and(|top| {
        let top = Path::new(top.trim_end_matches(['\r', '\n']))
            .canonicalize()
            .ok();
        top.is_some() && top == root.canonicalize().ok()
    })
}

/// The project's files, relative to `root` with `/` separators, sorted: those
/// git tracks plus new ones it does not ignore, less those deleted from the
/// working tree. Paths that cookiecutter would render (`{{`, `{%`, `{#`) are
/// refused.
pub fn project_files(root: &Path) -> Result<Vec<String>, String> {
    if !is_git_work_tree(root) {
        return Err(format!(
            "{} is not the top of a git work tree (`git init && git add -A` first)",
            root.display()
        ));
    }
    let mut command = Command::new("git");
    command.current_dir(root).args([
        "ls-files",
        "-z",
        "--cached",
        "--others",
        "--exclude-standard",
    ]);
    let output = command
        .output()
        .map_err(|e| format!("{}: {e}", crate::command::describe(&command)))?;
    if !output.status.success() {
        return Err(format!(
            "{} failed: {}\n{}",
            crate::command::describe(&command),
            output.status,
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    let listing = String::from_utf8(output.stdout).map_err(|e| format!("git ls-files: {e}"))?;
    let mut files = Vec::new();
    for file in listing.split('\0').filter(|f| !f.is_empty()) {
        if has_jinja_marker(file) {
            return Err(format!("{file}: cookiecutter would render this path"));
        }
        if root.join(file).is_file() {
            files.push(file.to_owned());
        }
    }
    files.sort();
    files.dedup();
    Ok(files)
}

/// `cookiecutter.json`: the default project name, and every file but
/// [`RENDERED_FILE`] copied without rendering.
fn cookiecutter_json(files: &[String], project_name: &str) -> Result<String, String> {
    let verbatim: Vec<String> = files
        .iter()
        .filter(|file| *file != RENDERED_FILE)
        .map(|file| fnmatch_escape(file))
        .collect();
    let json = serde_json::json!({
        "project_name": project_name,
        "_copy_without_render": verbatim,
    });
    serde_json::to_string_pretty(&json).map_err(|e| format!("cookiecutter.json: {e}"))
}

/// The stack name `samconfig.toml` gives (in its one `stack_name = "…"` line),
/// and the file with that name replaced by the project name placeholder.
fn samconfig_template(bytes: &[u8]) -> Result<(String, String), String> {
    let text =
        std::str::from_utf8(bytes).map_err(|e| format!("{RENDERED_FILE}: not UTF-8: {e}"))?;
    if has_jinja_marker(text) {
        return Err(format!(
            "{RENDERED_FILE} contains Jinja syntax that cookiecutter would render"
        ));
    }
    let mut name = None;
    let mut template = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let content = line.trim_end();
        let value = content
            .strip_prefix("stack_name = \"")
            .and_then(|rest| rest.strip_suffix('"'));
        match value {
            Some(value) if name.is_none() => {
                name = Some(value.to_owned());
                template.push_str(&stack_name_line(PROJECT_DIR));
                template.push_str(&line[content.len()..]);
            }
            Some(_) => return Err(format!("{RENDERED_FILE} names the stack twice")),
            None => template.push_str(line),
        }
    }
    let name = name.ok_or(format!("{RENDERED_FILE} has no `stack_name = \"…\"` line"))?;
    Ok((name, template))
}

/// Whether `text` holds the start of a Jinja expression, statement or comment.
fn has_jinja_marker(text: &str) -> bool {
    ["{{", "{%", "{#"]
        .iter()
        .any(|marker| text.contains(marker))
}

/// `path` as an `fnmatch` pattern matching only itself (cookiecutter matches
/// `_copy_without_render` entries with Python's `fnmatch`).
fn fnmatch_escape(path: &str) -> String {
    path.chars()
        .map(|c| match c {
            '*' | '?' | '[' => format!("[{c}]"),
            _ => c.to_string(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh folder under the system's temp dir, removed on drop.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new() -> Self {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos());
            let dir =
                std::env::temp_dir().join(format!("xtask-scaffold-{}-{nanos}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            Self(dir)
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// One entry of the zip.
    struct Entry {
        name: String,
        bytes: Vec<u8>,
        mode: u32,
    }

    /// Every entry of the zip, in the zip's order.
    fn entries(zip: &Path) -> Vec<Entry> {
        let mut archive = zip::ZipArchive::new(File::open(zip).unwrap()).unwrap();
        (0..archive.len())
            .map(|i| {
                let mut entry = archive.by_index(i).unwrap();
                let mut bytes = Vec::new();
                entry.read_to_end(&mut bytes).unwrap();
                Entry {
                    name: entry.name().unwrap().into_owned(),
                    bytes,
                    mode: entry.unix_mode().unwrap_or(0),
                }
            })
            .collect()
    }

    /// The entry named `name`.
    fn entry<'a>(entries: &'a [Entry], name: &str) -> &'a Entry {
        let found = entries.iter().find(|e| e.name == name);
        found.unwrap_or_else(|| panic!("{name} is not in the zip"))
    }

    #[test]
    fn scaffold_zip_is_a_cookiecutter_template_of_the_repository() {
        let root = workspace_root();
        if !is_git_work_tree(&root) {
            // A project fresh from `sam init`: git knows none of its files yet.
            eprintln!("skipped: {} is not a git work tree", root.display());
            return;
        }
        let dir = TempDir::new();
        let zip = template_zip(&dir.0).unwrap();
        let entries = entries(&zip);
        let files = project_files(&root).unwrap();
        let top = format!("{TOP_DIR}/");
        let project = format!("{top}{PROJECT_DIR}/");

        // Cookiecutter's layout: the top folder first, then cookiecutter.json
        // beside the project folder, and nothing else.
        assert_eq!(entries[0].name, top);
        for Entry { name, .. } in &entries[1..] {
            assert!(
                *name == format!("{top}cookiecutter.json") || name.starts_with(&project),
                "{name} is outside {project}"
            );
        }
        assert_eq!(entries.len(), files.len() + 2);

        // cookiecutter.json: the default name, and every file but samconfig.toml verbatim.
        let json = &entry(&entries, &format!("{top}cookiecutter.json")).bytes;
        let config: serde_json::Value = serde_json::from_slice(json).unwrap();
        let samconfig = std::fs::read_to_string(root.join(RENDERED_FILE)).unwrap();
        let (stack_name, _) = samconfig_template(samconfig.as_bytes()).unwrap();
        assert_eq!(config["project_name"], stack_name.as_str());
        let verbatim: Vec<&str> = config["_copy_without_render"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        for file in ["template.yaml", "Cargo.toml", "Cargo.lock", ".ci/run"] {
            assert!(files.iter().any(|f| f == file), "{file} is not in the zip");
        }
        for file in &files {
            assert_eq!(
                verbatim.contains(&fnmatch_escape(file).as_str()),
                file != RENDERED_FILE,
                "{file} in _copy_without_render"
            );
        }

        // Every file arrives byte-identical, except the stack name of samconfig.toml.
        for file in &files {
            let bytes = &entry(&entries, &format!("{project}{file}")).bytes;
            let repo = std::fs::read(root.join(file)).unwrap();
            if file == RENDERED_FILE {
                let placeholder = "stack_name = \"{{cookiecutter.project_name}}\"";
                let template = String::from_utf8(bytes.clone()).unwrap();
                assert!(template.contains(placeholder), "{template}");
                let rendered = template.replace(placeholder, &stack_name_line(&stack_name));
                assert_eq!(rendered.as_bytes(), repo);
            } else {
                assert!(bytes == &repo, "{file} differs from the repository's");
            }
        }
        let template = entry(&entries, &format!("{project}template.yaml"));
        assert_eq!(
            template.bytes,
            std::fs::read(root.join("template.yaml")).unwrap()
        );

        // Executables keep their executable bit; other files do not gain one.
        let run = entry(&entries, &format!("{project}.ci/run"));
        assert_eq!(run.mode & 0o777, 0o755);
        assert_eq!(template.mode & 0o777, 0o644);
    }

    #[test]
    fn scaffold_fnmatch_patterns_are_escaped() {
        assert_eq!(fnmatch_escape("a/b.rs"), "a/b.rs");
        assert_eq!(fnmatch_escape("a[1]*?.rs"), "a[[]1][*][?].rs");
    }

    #[test]
    fn scaffold_samconfig_must_name_the_stack_once() {
        let samconfig = "# stack_name = \"old\"\nx = 1\nstack_name = \"my-orders\"\r\ny = 2\n";
        let (name, template) = samconfig_template(samconfig.as_bytes()).unwrap();
        assert_eq!(name, "my-orders");
        assert_eq!(
            template,
            "# stack_name = \"old\"\nx = 1\nstack_name = \"{{cookiecutter.project_name}}\"\r\ny = 2\n"
        );
        assert!(samconfig_template(b"x = 1\n").is_err());
        assert!(samconfig_template(b"stack_name = \"a\"\nstack_name = \"b\"\n").is_err());
        let jinja = format!("{samconfig}# {{{{ not ours }}}}\n");
        assert!(samconfig_template(jinja.as_bytes()).is_err());
    }
}

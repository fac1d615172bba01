//! Tidy tests: house rules of the workspace, checked mechanically (in the style
//! of rust-analyzer's tidy tests). Each rule is a function from file contents to
//! its offences (`path:line: what`); `planted` feeds each one a bad input, so
//! every rule is known to fail when it should; one `#[test]` per rule runs it on
//! the real tree. Crates and paths come from `cargo metadata` and the file
//! system, never from lists kept here (except the allow-lists and the
//! errorType vocabulary).
//!
//! 1. Functions depend only on `shared` (dev-dependencies: also on dev crates
//!    such as `testkit`, never on another function), and `shared` on no crate of
//!    the workspace but [`WORKSPACE_HACK`] (no code), which depends on none: a
//!    function builds and deploys alone, and dev tooling never ships in a
//!    Lambda zip.
//! 2. Every member takes each dependency (version or path) from the root
//!    `[workspace.dependencies]`: one version of each crate, one place to bump
//!    it. A path into a function's folder (the function, its test-only crates)
//!    is written where it is used: the root table may name none (rule 16).
//! 3. `unsafe` only in the files of [`UNSAFE_ALLOWED`], each use explained by a
//!    `// SAFETY:` comment on its line or the 3 above; no `static mut` at all.
//! 4. Every module of a production crate (`shared`, `functions/*`) serves
//!    production code: test, fuzz and lab helpers belong in dev crates.
//! 5. The paths ARCHITECTURE.md and README.md name exist: docs follow the tree.
//! 6. Every function of template.yaml is a crate under `functions/` with the
//!    binary its build names, and every crate there is deployed.
//! 7. No import cycle between the top-level modules of a production crate: each
//!    module can be read (and moved) knowing only the ones below it.
//! 8. Only a function's `main.rs` (and `shared`) builds SDK clients, thread
//!    pools or runtimes: handlers get them, once per cold start.
//! 9. No function ships a crate of [`NOT_SHIPPED`]: its dependency tree as a
//!    build of that crate alone resolves it (`sam build`), not as the workspace
//!    (where developer tools add features), is checked.
//! 10. Every function's `errorType`s (the string literals `fn error_type`
//!     returns in its `src/error.rs`) are PascalCase, and a concept has one
//!     spelling in every function: that of [`ERROR_TYPE_CONCEPTS`], and never
//!     two names differing only in case, `_` or an `Error`/`Failed` suffix.
//! 11. Every function's settings type is `pub struct Config` in `src/config.rs`,
//!     with `pub fn from_env` (`main` hands it to `shared::start_or_exit`).
//! 12. No function of the tooling (`tools/`, `xtask/`, `tests/`) is longer
//!     than [`MAX_FUNCTION_LINES`] lines, from the line of its `fn` to its
//!     closing brace: a longer one has steps that want names. Those of
//!     [`LONG_FUNCTIONS_ALLOWED`] wait for changes under way.
//! 13. `cargo xtask` compiles in seconds, before any tool is installed:
//!     `xtask` depends on no member but `pinned-tools`, and `pinned-tools` on
//!     no crate at all (the suite installs the tools while the tests build).
//! 14. Every function's build (`sam build` builds each one alone) gives each
//!     crate it shares with another function the same features, so that the
//!     crate is compiled once for all of them: [`WORKSPACE_HACK`] asks for the
//!     union. Those of [`FEATURES_APART`] excepted.
//! 15. The functions' SDK configuration comes from `shared::aws::config_loader`
//!     alone (behaviour version pinned by name, every retry and timeout set):
//!     no other production file names `BehaviorVersion` or loads a
//!     configuration with `aws_config`'s own loaders.
//! 16. Tools know functions only through the template, the binaries and the
//!     sample events: no member but a function's own crates depends on a
//!     function crate, and `[workspace.dependencies]` names none, so that
//!     deleting a function's folder leaves a workspace that loads. The lab
//!     too: a function's probes are in its folder (`functions/<name>/lab/`).
//! 17. The docs name the errors the code has, and only those: every
//!     `errorType` a function's `fn error_type` returns and every failure
//!     class its `fn class` returns is named in its README, whose `errorType`
//!     table rows, "errorType `X`" and failure-class list name none the code
//!     lacks; ARCHITECTURE.md's errors paragraph names only the shared ones
//!     ([`ERROR_TYPE_CONCEPTS`]): a function's own are in its README, and go
//!     when it goes.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use toml::de::{DeTable, DeValue};

/// The only files that may contain `unsafe` (a trailing `/` allows a folder):
/// the allocators' FFI (`allocator/`) and `getrusage` for the memory figures.
const UNSAFE_ALLOWED: &[&str] = &["shared/src/allocator/", "shared/src/memory.rs"];

/// Modules of production crates no production code uses, kept anyway:
/// (lib name, module, why). Empty: nothing needs it today.
const MODULES_NOT_FOR_PRODUCTION: &[(&str, &str, &str)] = &[];

/// Crates no function may ship: (crate, why). Each was measured out of the
/// binaries (BENCHMARKS.md, "First invocation").
const NOT_SHIPPED: &[(&str, &str)] = &[
    (
        "aws-lc-sys",
        "the SDK's default TLS crypto: the functions use ring (shared/src/aws.rs)",
    ),
    (
        "regex",
        "`tracing-subscriber`'s EnvFilter: logging filters with `Targets`",
    ),
];

/// The crate without code through which every function's build asks for the
/// same features of the crates the functions share (rule 14).
const WORKSPACE_HACK: &str = "shared/workspace-hack";

/// Crates the functions may build with other features (rule 14): (crate, why).
const FEATURES_APART: &[(&str, &str)] = &[
    (
        "hyper",
        "HTTP/2 would add 514 KB to a function without the SDK (shared/workspace-hack)",
    ),
    ("hyper-util", "as `hyper`"),
    (
        "base64",
        "the `bcrypt` crate's base64 0.23 comes without the SDK's SIMD feature in a function \
         without the SDK; a few seconds of build",
    ),
];

const DEPENDENCY_TABLES: [&str; 3] = ["dependencies", "dev-dependencies", "build-dependencies"];

/// A package of the workspace, from `cargo metadata`; folders are relative to the root.
#[derive(Default)]
struct Package {
    name: String,
    dir: String,
    manifest: String,
    /// The lib target's name and `src` folder.
    lib: Option<(String, String)>,
    bins: Vec<String>,
    /// (package, kind, key in the manifest) of dependencies on other members.
    members_used: Vec<(String, String, String)>,
    /// The names of all its dependencies, members or not, of every kind.
    dependencies: Vec<String>,
}

struct Source {
    path: String,
    text: String,
}

// ---------------------------------------------------------------- the rules

/// Rule 1.
fn dependency_offences(packages: &[Package]) -> Vec<String> {
    let function = |name: &str| {
        packages
            .iter()
            .any(|p| p.name == name && is_function(&p.dir))
    };
    let mut offences = vec![];
    for p in packages
        .iter()
        .filter(|p| p.name == "shared" || p.dir == WORKSPACE_HACK || is_function(&p.dir))
    {
        for (dep, kind, key) in &p.members_used {
            let allowed = match (p.name.as_str(), kind.as_str()) {
                ("shared", "normal") => packages
                    .iter()
                    .any(|hack| hack.name == *dep && hack.dir == WORKSPACE_HACK),
                ("shared", _) => false,
                _ if p.dir == WORKSPACE_HACK => false,
                (_, "dev") => !function(dep),
                _ => dep == "shared",
            };
            if !allowed {
                let line = key_line(&p.manifest, key);
                offences.push(format!(
                    "{}/Cargo.toml:{line}: `{}` has a {kind} dependency on `{dep}` (a function may \
                     depend on `shared`, in dev also on dev crates; `shared` on no member but \
                     {WORKSPACE_HACK}, which depends on none)",
                    p.dir, p.name
                ));
            }
        }
    }
    offences
}

/// Rule 16: members other than functions depending on a function crate, and
/// the root table naming one (`root_manifest`).
fn tool_offences(packages: &[Package], root_manifest: &str) -> Vec<String> {
    let function_dirs: BTreeMap<&str, &str> = packages
        .iter()
        .filter(|p| in_function_folder(&p.dir))
        .map(|p| (p.name.as_str(), p.dir.as_str()))
        .collect();
    let mut offences = vec![];
    for p in packages.iter().filter(|p| !in_function_folder(&p.dir)) {
        for (dep, kind, key) in &p.members_used {
            if function_dirs.contains_key(dep.as_str()) {
                offences.push(format!(
                    "{}/Cargo.toml:{}: `{}` has a {kind} dependency on the function `{dep}`: tools \
                     know functions through the template, the binaries and the sample events \
                     (what is one function's belongs in its folder)",
                    p.dir,
                    key_line(&p.manifest, key),
                    p.name
                ));
            }
        }
    }
    let in_table = |dir: &str| {
        root_manifest
            .lines()
            .position(|l| l.contains(&format!("path = \"{dir}\"")))
    };
    for (name, dir) in function_dirs {
        if let Some(n) = in_table(dir) {
            offences.push(format!(
                "Cargo.toml:{}: `[workspace.dependencies]` names the function `{name}`: deleting \
                 its folder would leave a workspace that does not load",
                n + 1
            ));
        }
    }
    offences
}

/// Rule 13.
fn xtask_offences(packages: &[Package]) -> Vec<String> {
    let mut offences = vec![];
    for p in packages {
        let heavy: Vec<&String> = match p.name.as_str() {
            "xtask" => p
                .members_used
                .iter()
                .map(|(dep, _, _)| dep)
                .filter(|dep| *dep != "pinned-tools")
                .collect(),
            "pinned-tools" => p.dependencies.iter().collect(),
            _ => continue,
        };
        for dep in heavy {
            offences.push(format!(
                "{}/Cargo.toml: `{}` depends on `{dep}` (`xtask` may depend on no member but \
                 `pinned-tools`, which depends on nothing: `cargo xtask` must build in seconds)",
                p.dir, p.name
            ));
        }
    }
    offences
}

/// Rule 2, on one member's `Cargo.toml`.
/// The folder `to` names, relative to the folder of the manifest `manifest`
/// (both relative to the root), without `.` and `..`.
fn joined(manifest: &str, to: &str) -> String {
    let mut parts: Vec<&str> = manifest.split('/').collect();
    parts.pop();
    for part in to.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            part => parts.push(part),
        }
    }
    parts.join("/")
}

fn manifest_offences(path: &str, manifest: &str) -> Vec<String> {
    let doc = match DeTable::parse(manifest) {
        Ok(doc) => doc.into_inner(),
        Err(e) => return vec![format!("{path}: not valid TOML: {e}")],
    };
    let mut scopes = vec![(String::new(), &doc)];
    for (cfg, target) in table_at(&doc, "target").into_iter().flatten() {
        if let DeValue::Table(target) = target.get_ref() {
            scopes.push((format!("target.{}.", cfg.get_ref()), target));
        }
    }
    let tables = scopes.iter().flat_map(|(prefix, scope)| {
        let tables = DEPENDENCY_TABLES
            .iter()
            .filter_map(|kind| Some((format!("{prefix}{kind}"), table_at(scope, kind)?)));
        tables.collect::<Vec<_>>()
    });
    let mut offences = vec![];
    for (section, table) in tables {
        for (name, spec) in table {
            let why = match spec.get_ref() {
                DeValue::Table(spec) => {
                    let own = ["version", "path", "git", "branch", "tag", "rev", "registry"]
                        .into_iter()
                        .filter(|key| value_at(spec, key).is_some())
                        .collect::<Vec<_>>();
                    let workspace =
                        matches!(value_at(spec, "workspace"), Some(DeValue::Boolean(true)));
                    let into_function_folder = own == ["path"]
                        && matches!(value_at(spec, "path"), Some(DeValue::String(to))
                            if in_function_folder(&joined(path, to)));
                    match (own.is_empty(), workspace) {
                        _ if into_function_folder => continue,
                        (true, true) => continue,
                        (true, false) => "lacks `workspace = true`".to_string(),
                        (false, _) => format!("sets its own {}", own.join(", ")),
                    }
                }
                DeValue::String(version) => format!("pins its own version \"{version}\""),
                _ => "is neither a version nor a table".to_string(),
            };
            let (line, name) = (line_at(manifest, name.span().start), name.get_ref());
            offences.push(format!(
                "{path}:{line}: [{section}] `{name}` {why}: put it in the root \
                 [workspace.dependencies] and write `{name}.workspace = true`"
            ));
        }
    }
    offences
}

/// Rule 3, on one source file; `allowed`: the file is in [`UNSAFE_ALLOWED`].
fn unsafe_offences(path: &str, source: &str, allowed: bool) -> Vec<String> {
    let raw: Vec<&str> = source.lines().collect();
    let mut offences = vec![];
    for (n, line) in code_only(source).lines().enumerate() {
        let words = tokens(line);
        // `&'static mut T` is a reference, not a `static mut`.
        let static_mut = words.starts_with(&["static", "mut"])
            || words
                .windows(3)
                .any(|w| w[0] != "'" && w[1..] == ["static", "mut"]);
        let mut offend = |what: &str| offences.push(format!("{path}:{}: {what}", n + 1));
        if static_mut {
            offend("`static mut` (use an atomic, a `Mutex` or a `OnceLock`)");
        }
        if words.contains(&"unsafe") && !allowed {
            offend("`unsafe` outside the files of UNSAFE_ALLOWED");
        }
        if words.contains(&"unsafe")
            && !raw[n.saturating_sub(3)..=n]
                .iter()
                .any(|l| l.contains("// SAFETY:"))
        {
            offend("`unsafe` without a `// SAFETY:` comment on its line or the 3 above");
        }
    }
    offences
}

/// Rule 4, on one production crate: its lib's name, its `src` folder, its
/// source files, and the sources of its dependents (the functions, for
/// `shared`). A module used only by unused modules is unused.
fn unused_modules(lib: &str, src_dir: &str, own: &[Source], dependents: &[Source]) -> Vec<String> {
    let production = |s: &Source| without_test_modules(&code_only(&s.text));
    let own: Vec<(&str, String)> = own
        .iter()
        .map(|s| {
            (
                s.path
                    .strip_prefix(src_dir)
                    .unwrap_or(&s.path)
                    .trim_start_matches('/'),
                production(s),
            )
        })
        .collect();
    let Some((_, root)) = own.iter().find(|(rel, _)| *rel == "lib.rs") else {
        return vec![format!("{src_dir}/lib.rs: missing")];
    };
    let declared: Vec<(usize, &str)> = root
        .lines()
        .enumerate()
        .filter(|(_, line)| line.trim_end().ends_with(';'))
        .filter_map(|(n, line)| Some((n + 1, declared_module(line)?)))
        .filter(|(_, m)| {
            !MODULES_NOT_FOR_PRODUCTION
                .iter()
                .any(|(l, x, _)| (*l, *x) == (lib, *m))
        })
        .collect();
    let dependents: Vec<String> = dependents.iter().map(production).collect();
    let inside = |rel: &str, module: &str| {
        rel == format!("{module}.rs") || rel.starts_with(&format!("{module}/"))
    };
    let mut unused: BTreeSet<&str> = BTreeSet::new();
    loop {
        let before = unused.len();
        for &(_, module) in &declared {
            let used_by = |(rel, code): &(&str, String)| {
                let prefixes = match *rel {
                    "lib.rs" => vec!["crate", "self"],
                    r if r == "main.rs" || r.starts_with("bin/") => vec![lib],
                    r if !r.contains('/') => vec!["crate", "super"],
                    _ => vec!["crate"],
                };
                !inside(rel, module)
                    && !unused.iter().any(|u| inside(rel, u))
                    && uses_module(code, module, &prefixes, *rel == "lib.rs")
            };
            if !own.iter().any(used_by)
                && !dependents
                    .iter()
                    .any(|code| uses_module(code, module, &[lib], false))
            {
                unused.insert(module);
            }
        }
        if unused.len() == before {
            break;
        }
    }
    let unused = declared
        .iter()
        .filter(|(_, module)| unused.contains(module));
    unused
        .map(|(line, module)| {
            format!(
                "{src_dir}/lib.rs:{line}: module `{module}` is used by no production code \
                 (move it to a dev crate such as testkit or lab-probes)"
            )
        })
        .collect()
}

/// The folders a doc line names that exist (a bare file name in a table row
/// is looked for under them), and whether it names a removed function's (a
/// row about it: its bare names go with it).
fn row_folders<'a>(spans: &[&'a str], tree: &BTreeSet<String>) -> (Vec<&'a str>, bool) {
    let folders: Vec<&str> = spans
        .iter()
        .filter(|t| t.ends_with('/'))
        .map(|t| t.trim_end_matches('/'))
        .collect();
    let removed = folders.iter().any(|f| not_checked(f, tree, &[]));
    let bases = folders.into_iter().filter(|t| tree.contains(*t)).collect();
    (bases, removed)
}

/// Whether the docs' `path` is left alone: generated (git ignores it), or
/// in the folder or the events of a function the user removed, whose lines
/// are theirs to edit ("Make it yours" in the README).
fn not_checked(path: &str, tree: &BTreeSet<String>, generated: &[String]) -> bool {
    let removed_function = ["functions/", "events/"].iter().any(|folder| {
        path.strip_prefix(folder)
            .and_then(|rest| rest.split('/').next())
            .is_some_and(|name| !tree.contains(&format!("functions/{name}")))
    });
    removed_function
        || generated
            .iter()
            .any(|g| path == g || path.starts_with(&format!("{g}/")))
}

/// Rule 5, on one Markdown file. `tree`: every file and folder of the workspace;
/// `generated`: folders builds create (from .gitignore); `libs`: lib name to
/// (`src` folder, `lib.rs`).
fn doc_path_offences(
    doc: &str,
    markdown: &str,
    tree: &BTreeSet<String>,
    generated: &[String],
    libs: &BTreeMap<String, (String, String)>,
) -> Vec<String> {
    let extensions = [".rs", ".toml", ".yaml", ".md", ".json", ".java", ".sh"];
    let under = |base: &str, name: &str| {
        let (exact, nested) = (format!("{base}/{name}"), format!("/{name}"));
        tree.iter()
            .any(|p| *p == exact || (p.starts_with(&format!("{base}/")) && p.ends_with(&nested)))
    };
    let (mut offences, mut fenced) = (vec![], false);
    for (n, line) in markdown.lines().enumerate() {
        fenced ^= line.trim_start().starts_with("```");
        let spans: Vec<&str> = line.split('`').skip(1).step_by(2).map(str::trim).collect();
        let (bases, removed_row) = row_folders(&spans, tree);
        for token in spans.into_iter().filter(|_| !fenced) {
            let mut offend =
                |what: String| offences.push(format!("{doc}:{}: `{token}` {what}", n + 1));
            if let Some((krate, rest)) = token.split_once("::") {
                let item: String = rest
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                let Some((src, lib)) = libs.get(krate) else {
                    continue;
                };
                let module = [format!("{src}/{item}.rs"), format!("{src}/{item}/mod.rs")];
                if !module.iter().any(|m| tree.contains(m))
                    && !tokens(&code_only(lib)).contains(&item.as_str())
                {
                    offend(format!(
                        "names `{item}`, which is no module or item of `{krate}`"
                    ));
                }
                continue;
            }
            let not_a_path =
                token.contains([' ', '<', '*', '{', '$']) || token.starts_with(['-', '/']);
            if not_a_path
                || token.contains("://")
                || !(token.contains('/') || extensions.iter().any(|e| token.ends_with(e)))
            {
                continue; // a command, a pattern, an absolute path, a URL or a word
            }
            let path = match token.rsplit_once(':') {
                Some((path, line)) if line.chars().all(|c| c.is_ascii_digit() || c == '-') => path,
                _ => token,
            };
            let path = path.trim_end_matches('/');
            if not_checked(path, tree, generated) {
                continue;
            }
            let anywhere =
                || !path.contains('/') && tree.iter().any(|p| p.rsplit('/').next() == Some(path));
            let exists = tree.contains(path)
                || (removed_row && !path.contains('/'))
                || bases.iter().any(|b| under(b, path))
                || (bases.is_empty() && anywhere());
            if !exists {
                let row = if bases.is_empty() {
                    String::new()
                } else {
                    format!(" (nor under {bases:?})")
                };
                offend(format!("names no file or folder of the workspace{row}"));
            }
        }
    }
    offences
}

/// Rule 6, on template.yaml; `function_dirs`: the folders under `functions/`.
fn template_offences(
    template: &str,
    packages: &[Package],
    function_dirs: &[String],
) -> Vec<String> {
    let yaml: serde_norway::Value = match serde_norway::from_str(template) {
        Ok(yaml) => yaml,
        Err(e) => return vec![format!("template.yaml: not valid YAML: {e}")],
    };
    let (mut offences, mut deployed) = (vec![], BTreeSet::new());
    for (name, resource) in yaml["Resources"].as_mapping().into_iter().flatten() {
        if resource["Type"].as_str() != Some("AWS::Serverless::Function") {
            continue;
        }
        let name = name.as_str().unwrap_or("?");
        let mut offend = |what: String| {
            offences.push(format!(
                "template.yaml:{}: {name}: {what}",
                key_line(template, name)
            ))
        };
        let code_uri = resource["Properties"]["CodeUri"]
            .as_str()
            .map(|u| u.trim_start_matches("./").trim_end_matches('/'));
        let binary = resource["Metadata"]["BuildProperties"]["Binary"].as_str();
        let Some(code_uri) = code_uri.filter(|u| is_function(u)) else {
            offend(format!(
                "CodeUri {code_uri:?} is not a folder under functions/"
            ));
            continue;
        };
        deployed.insert(code_uri);
        match packages.iter().find(|p| p.dir == code_uri) {
            None => offend(format!(
                "CodeUri `{code_uri}` is not a package of the workspace"
            )),
            Some(p) if binary.is_some_and(|b| p.bins.iter().any(|bin| bin == b)) => {}
            Some(p) => offend(format!(
                "BuildProperties.Binary {binary:?} is not a [[bin]] of `{code_uri}` ({:?})",
                p.bins
            )),
        }
    }
    for dir in function_dirs
        .iter()
        .filter(|d| !deployed.contains(d.as_str()))
    {
        offences.push(format!(
            "{dir}: no function of template.yaml deploys it (CodeUri)"
        ));
    }
    offences
}

// ---------------------------------------------------------------- the real tree

#[test]
fn functions_depend_only_on_shared() {
    assert_none(
        "dependencies between members",
        dependency_offences(&workspace().1),
    );
}

#[test]
fn tools_depend_on_no_function() {
    let (root, packages) = workspace();
    assert_none(
        "tools depending on a function crate",
        tool_offences(&packages, &read(&root.join("Cargo.toml"))),
    );
}

#[test]
fn xtask_builds_in_seconds() {
    assert_none(
        "heavy dependencies of cargo xtask",
        xtask_offences(&workspace().1),
    );
}

#[test]
fn dependency_versions_live_in_the_root_table() {
    let (_, packages) = workspace();
    let offences = packages
        .iter()
        .flat_map(|p| manifest_offences(&format!("{}/Cargo.toml", p.dir), &p.manifest));
    assert_none(
        "dependencies not taken from [workspace.dependencies]",
        offences.collect(),
    );
}

#[test]
fn unsafe_is_explained_and_confined() {
    let (root, packages) = workspace();
    let files: BTreeSet<PathBuf> = packages
        .iter()
        .flat_map(|p| rust_files(&root.join(&p.dir)))
        .collect();
    let (mut offences, mut needed) = (vec![], BTreeSet::<&&str>::new());
    for file in files {
        let (path, source) = (relative(&root, &file), read(&file));
        let allowed = UNSAFE_ALLOWED
            .iter()
            .find(|a| path == **a || (a.ends_with('/') && path.starts_with(**a)));
        if tokens(&code_only(&source)).contains(&"unsafe") {
            needed.extend(allowed);
        }
        offences.extend(unsafe_offences(&path, &source, allowed.is_some()));
    }
    for stale in UNSAFE_ALLOWED.iter().filter(|a| !needed.contains(a)) {
        offences.push(format!(
            "UNSAFE_ALLOWED: `{stale}` has no `unsafe` left: take it off the list"
        ));
    }
    assert_none("unsafe code", offences);
}

#[test]
fn production_modules_serve_production() {
    let (root, packages) = workspace();
    let sources = |dir: &str| -> Vec<Source> {
        let files = rust_files(&root.join(dir));
        files
            .iter()
            .map(|f| Source {
                path: relative(&root, f),
                text: read(f),
            })
            .collect()
    };
    let mut offences = vec![];
    // `shared`'s modules are offered to every function: one that no function
    // of the day uses (a user removed the one that did) is no offence.
    for p in packages.iter().filter(|p| is_function(&p.dir)) {
        let Some((lib, src)) = &p.lib else { continue };
        offences.extend(unused_modules(lib, src, &sources(src), &[]));
    }
    assert_none(
        "modules of production crates that production does not use",
        offences,
    );
}

#[test]
fn architecture_names_real_paths() {
    let (root, packages) = workspace();
    let ignored = read(&root.join(".gitignore"));
    let generated: Vec<String> = ignored
        .lines()
        .filter_map(|l| {
            Some(
                l.trim()
                    .strip_prefix('/')?
                    .trim_end_matches('/')
                    .to_string(),
            )
        })
        .collect();
    let mut tree = BTreeSet::new();
    walk(
        &root,
        &root,
        &|d| d == ".git" || d == "target" || generated.iter().any(|g| g == d),
        &mut tree,
    );
    let libs = packages
        .iter()
        .filter_map(|p| p.lib.clone())
        .map(|(lib, src)| (lib, (src.clone(), read(&root.join(&src).join("lib.rs")))))
        .collect();
    let docs = ["ARCHITECTURE.md", "README.md"];
    let offences = docs
        .iter()
        .flat_map(|doc| doc_path_offences(doc, &read(&root.join(doc)), &tree, &generated, &libs));
    assert_none(
        "paths named by the docs that do not exist",
        offences.collect(),
    );
}

#[test]
fn every_function_in_the_template_is_a_crate() {
    let (root, packages) = workspace();
    let mut function_dirs: Vec<String> = std::fs::read_dir(root.join("functions"))
        .expect("read functions/")
        .filter_map(|e| e.ok().filter(|e| e.path().is_dir()))
        .map(|e| format!("functions/{}", e.file_name().to_string_lossy()))
        .collect();
    function_dirs.sort();
    let offences = template_offences(
        &read(&root.join("template.yaml")),
        &packages,
        &function_dirs,
    );
    assert_none(
        "functions of template.yaml and crates under functions/",
        offences,
    );
}

/// Rule 7, on one production crate: the top-level modules (`src/x.rs`,
/// `src/x/…`) and the `crate::` modules each one names, as cycles `a -> b -> a`.
fn import_cycles(src_dir: &str, own: &[Source]) -> Vec<String> {
    let top = |path: &str| -> Option<String> {
        let rel = path.strip_prefix(src_dir)?.trim_start_matches('/');
        let first = rel.split('/').next()?;
        let name = first.strip_suffix(".rs").unwrap_or(first);
        (!matches!(name, "lib" | "main")).then(|| name.to_owned())
    };
    let modules: BTreeSet<String> = own.iter().filter_map(|s| top(&s.path)).collect();
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for source in own {
        let Some(from) = top(&source.path) else {
            continue;
        };
        let code = without_test_modules(&code_only(&source.text));
        for to in modules.iter().filter(|m| **m != from) {
            if uses_module(&code, to, &["crate"], false) {
                edges.entry(from.clone()).or_default().insert(to.clone());
            }
        }
    }
    // Depth-first search from each module; a path back to it is a cycle.
    let mut cycles = BTreeSet::new();
    for start in &modules {
        let mut stack = vec![vec![start.clone()]];
        while let Some(path) = stack.pop() {
            let last = path.last().cloned().unwrap_or_default();
            for next in edges.get(&last).into_iter().flatten() {
                if next == start {
                    let mut cycle = path.clone();
                    // One name per cycle, whichever module it is found from.
                    let first = cycle.iter().min().cloned().unwrap_or_default();
                    let at = cycle.iter().position(|m| *m == first).unwrap_or(0);
                    cycle.rotate_left(at);
                    cycle.push(first);
                    cycles.insert(cycle.join(" -> "));
                } else if !path.contains(next) {
                    let mut longer = path.clone();
                    longer.push(next.clone());
                    stack.push(longer);
                }
            }
        }
    }
    cycles
        .into_iter()
        .map(|cycle| format!("{src_dir}: modules import each other: {cycle}"))
        .collect()
}

/// What builds an SDK client, a thread pool or a runtime (rule 8).
const CONSTRUCTIONS: &[&[&str]] = &[
    &["aws_config", "::"],
    &["Client", "::", "new"],
    &["Client", "::", "from_conf"],
    &["ThreadPoolBuilder"],
    &["build_global"],
    &["runtime", "::", "Builder"],
    &["Runtime", "::", "new"],
];

/// Rule 8, on one source file of a function other than its `main.rs`.
fn construction_offences(path: &str, source: &str) -> Vec<String> {
    let code = without_test_modules(&code_only(source));
    let mut offences = vec![];
    for (n, line) in code.lines().enumerate() {
        let t = tokens(line);
        for pattern in CONSTRUCTIONS {
            if t.windows(pattern.len()).any(|w| w == *pattern) {
                offences.push(format!(
                    "{path}:{}: `{}` outside main.rs: build clients and pools once, in main",
                    n + 1,
                    pattern.concat()
                ));
            }
        }
    }
    offences
}

/// What loads an SDK configuration other than `shared::aws::config_loader`,
/// or picks a behaviour version (rule 15).
const SDK_CONFIG_LOADERS: &[&[&str]] = &[
    &["BehaviorVersion"],
    &["aws_config", "::", "defaults"],
    &["aws_config", "::", "from_env"],
    &["aws_config", "::", "load_from_env"],
    &["aws_config", "::", "load_defaults"],
];
/// The one production file rule 15 allows them in.
const SDK_CONFIG_HOME: &str = "shared/src/aws.rs";

/// Rule 15, on one production source file.
fn sdk_config_offences(path: &str, source: &str) -> Vec<String> {
    if path == SDK_CONFIG_HOME {
        return vec![];
    }
    let code = without_test_modules(&code_only(source));
    let mut offences = vec![];
    for (n, line) in code.lines().enumerate() {
        let t = tokens(line);
        for pattern in SDK_CONFIG_LOADERS {
            if t.windows(pattern.len()).any(|w| w == *pattern) {
                offences.push(format!(
                    "{path}:{}: `{}`: load the SDK configuration with shared::aws::config_loader (pinned behaviour, explicit retries and timeouts)",
                    n + 1,
                    pattern.concat()
                ));
            }
        }
    }
    offences
}

/// Rule 9, on one function's tree (see [`function_trees`]).
fn shipped_offences(function: &str, tree: &str) -> Vec<String> {
    let shipped: BTreeSet<&str> = tree.lines().filter_map(|l| l.split(' ').next()).collect();
    NOT_SHIPPED
        .iter()
        .filter(|(name, _)| shipped.contains(name))
        .map(|(name, why)| format!("functions/{function}: ships `{name}` ({why})"))
        .collect()
}

/// Rule 14, on each function's `cargo tree --format {p}|{f}` lines (function,
/// tree); `members`: the workspace's packages, whose features differ by design
/// (each function picks its allocator through `shared`'s).
fn feature_offences(trees: &[(String, String)], members: &BTreeSet<String>) -> Vec<String> {
    // crate -> function -> the feature sets that function's build gives it
    // (two where a build-time crate also runs in the binary).
    let mut builds: BTreeMap<String, BTreeMap<&str, BTreeSet<&str>>> = BTreeMap::new();
    for (function, tree) in trees {
        for line in tree.lines() {
            let line = line.trim_end_matches(" (*)");
            let Some((package, features)) = line.split_once('|') else {
                continue;
            };
            let package = package.replace(" (proc-macro)", "");
            let name = package.split(' ').next().unwrap_or_default();
            if members.contains(name) || FEATURES_APART.iter().any(|(apart, _)| *apart == name) {
                continue;
            }
            builds
                .entry(package)
                .or_default()
                .entry(function)
                .or_default()
                .insert(features);
        }
    }
    let mut offences = vec![];
    for (package, by_function) in &builds {
        let alike: BTreeSet<&BTreeSet<&str>> = by_function.values().collect();
        if alike.len() > 1 {
            let each: Vec<String> = by_function
                .iter()
                .map(|(function, sets)| {
                    let sets: Vec<&str> = sets.iter().copied().collect();
                    format!("{function} [{}]", sets.join("] ["))
                })
                .collect();
            offences.push(format!(
                "`{package}` gets other features in each function's build ({}): ask for their \
                 union in {WORKSPACE_HACK}/Cargo.toml, so that `sam build` compiles it once",
                each.join(", ")
            ));
        }
    }
    offences
}

/// Each function's `cargo tree` alone (as `sam build` builds it), for the
/// Lambda target, one `{p}|{f}` line per crate: (function, tree). Rules 9 and
/// 14 read the same trees, so each is asked for once per test binary.
fn function_trees() -> &'static [(String, String)] {
    static TREES: std::sync::OnceLock<Vec<(String, String)>> = std::sync::OnceLock::new();
    TREES.get_or_init(|| {
        let (root, packages) = workspace();
        packages
            .iter()
            .filter(|p| is_function(&p.dir))
            .map(|p| {
                let tree = "tree --locked -e normal,build --prefix none \
                    --target x86_64-unknown-linux-gnu --format {p}|{f} -p";
                let args: Vec<&str> = tree.split_whitespace().chain([p.name.as_str()]).collect();
                (p.name.clone(), cargo_stdout(&root, &args))
            })
            .collect()
    })
}

#[test]
fn functions_ship_none_of_the_crates_measured_out() {
    let offences = function_trees()
        .iter()
        .flat_map(|(function, tree)| shipped_offences(function, tree))
        .collect();
    assert_none("crates measured out of the functions", offences);
}

#[test]
fn functions_build_their_dependencies_alike() {
    let members = workspace().1.into_iter().map(|p| p.name).collect();
    assert_none(
        "crates the functions build with other features",
        feature_offences(function_trees(), &members),
    );
}

#[test]
fn no_module_import_cycle() {
    let (root, packages) = workspace();
    let mut offences = vec![];
    for p in packages
        .iter()
        .filter(|p| p.name == "shared" || is_function(&p.dir))
    {
        let Some((_, src)) = &p.lib else { continue };
        let own: Vec<Source> = rust_files(&root.join(src))
            .iter()
            .map(|f| Source {
                path: relative(&root, f),
                text: read(f),
            })
            .collect();
        offences.extend(import_cycles(src, &own));
    }
    assert_none("import cycles", offences);
}

#[test]
fn clients_and_pools_are_built_in_main() {
    let (root, packages) = workspace();
    let mut offences = vec![];
    for p in packages.iter().filter(|p| is_function(&p.dir)) {
        for file in rust_files(&root.join(&p.dir).join("src")) {
            let path = relative(&root, &file);
            if !path.ends_with("/main.rs") {
                offences.extend(construction_offences(&path, &read(&file)));
            }
        }
    }
    assert_none("clients or pools built outside main.rs", offences);
}

#[test]
fn sdk_configuration_comes_from_shared_aws() {
    let (root, packages) = workspace();
    let mut offences = vec![];
    for p in packages
        .iter()
        .filter(|p| is_function(&p.dir) || p.dir == "shared")
    {
        for file in rust_files(&root.join(&p.dir).join("src")) {
            let path = relative(&root, &file);
            offences.extend(sdk_config_offences(&path, &read(&file)));
        }
    }
    assert_none("SDK configuration loaded outside shared::aws", offences);
}

/// The errorType vocabulary the functions share (rule 10): one spelling per
/// concept, whichever function fails. A function's own error types
/// (`TooManyRows`, `MissingMessageId`) need no entry.
const ERROR_TYPE_CONCEPTS: &[&str] = &[
    "InternalError",
    "InvalidRequest",
    "DeadlineTooShort",
    "DynamoDBError",
    "S3Error",
];

/// The string literals in the body of `fn error_type` of one `error.rs`, with
/// their lines; `None` without such a function.
fn error_type_literals(source: &str) -> Option<Vec<(usize, String)>> {
    literals_of(source, "fn error_type", 0)
}

/// The string literals in the bodies of every `fn class` of `source`.
fn class_literals(source: &str) -> Vec<String> {
    const SIGNATURE: &str = "fn class(";
    let code: Vec<char> = code_only(source).chars().collect();
    let name: Vec<char> = SIGNATURE.chars().collect();
    code.windows(name.len())
        .enumerate()
        .filter(|(_, w)| *w == name.as_slice())
        .filter_map(|(at, _)| literals_of(source, SIGNATURE, at))
        .flatten()
        .map(|(_, literal)| literal)
        .collect()
}

/// The string literals, with their lines, in the body of the first
/// function `signature` (such as `fn error_type`) at or after character
/// `from` of `source`'s code (comments and literals aside); `None` without one.
fn literals_of(source: &str, signature: &str, from: usize) -> Option<Vec<(usize, String)>> {
    // Braces are matched on the code alone, literals read from the text.
    let code: Vec<char> = code_only(source).chars().collect();
    let text: Vec<char> = source.chars().collect();
    let name: Vec<char> = signature.chars().collect();
    let start = from
        + code
            .get(from..)?
            .windows(name.len())
            .position(|w| w == name.as_slice())?;
    let open = start + code[start..].iter().position(|c| *c == '{')?;
    let mut depth = 0;
    let close = (open..code.len()).find(|&i| {
        depth += match code[i] {
            '{' => 1,
            '}' => -1,
            _ => 0,
        };
        depth == 0
    })?;
    let (mut literals, mut i) = (vec![], open);
    while i < close {
        if text[i..].starts_with(&['/', '/']) || text[i..].starts_with(&['/', '*']) {
            let end = if text[i + 1] == '/' { "\n" } else { "*/" };
            let end: Vec<char> = end.chars().collect();
            i += text[i..]
                .windows(end.len())
                .position(|w| w == end.as_slice())
                .map_or(close, |n| n + end.len());
        } else if text[i] == '"' {
            let (mut literal, mut j) = (String::new(), i + 1);
            while j < close && text[j] != '"' {
                j += usize::from(text[j] == '\\');
                literal.extend(text.get(j));
                j += 1;
            }
            let line = text[..i].iter().filter(|c| **c == '\n').count() + 1;
            literals.push((line, literal));
            i = j + 1;
        } else {
            i += 1;
        }
    }
    Some(literals)
}

/// Rule 10, on every function's `src/error.rs`.
fn error_type_offences(sources: &[Source]) -> Vec<String> {
    // The concept a name spells: lower case, letters and digits, without an
    // `Error`/`Failed`/`Failure`/`Exception` suffix.
    let concept = |name: &str| -> String {
        let lower: String = name
            .chars()
            .filter(char::is_ascii_alphanumeric)
            .map(|c| c.to_ascii_lowercase())
            .collect();
        ["error", "failed", "failure", "exception"]
            .iter()
            .find_map(|s| lower.strip_suffix(s).filter(|rest| !rest.is_empty()))
            .unwrap_or(&lower)
            .to_owned()
    };
    let (mut offences, mut spellings) = (vec![], BTreeMap::<String, BTreeSet<_>>::new());
    for source in sources {
        let Some(literals) = error_type_literals(&source.text) else {
            offences.push(format!(
                "{}: no `fn error_type`: each function names its errorTypes there",
                source.path
            ));
            continue;
        };
        if literals.is_empty() {
            offences.push(format!(
                "{}: `fn error_type` returns no string literal",
                source.path
            ));
        }
        for (line, name) in literals {
            let at = format!("{}:{line}", source.path);
            let pascal = name.starts_with(|c: char| c.is_ascii_uppercase())
                && name.chars().all(|c| c.is_ascii_alphanumeric());
            if !pascal {
                offences.push(format!(
                    "{at}: errorType `{name}` is not PascalCase (letters and digits, a capital first: `InvalidRequest`)"
                ));
            }
            let same = |c: &&&str| concept(c) == concept(&name);
            if let Some(spelling) = ERROR_TYPE_CONCEPTS.iter().find(same) {
                if *spelling != name {
                    offences.push(format!(
                        "{at}: errorType `{name}` is spelled `{spelling}` in every function (ERROR_TYPE_CONCEPTS)"
                    ));
                }
                continue;
            }
            spellings
                .entry(concept(&name))
                .or_default()
                .insert((name, at));
        }
    }
    for names in spellings.into_values() {
        let distinct: BTreeSet<&String> = names.iter().map(|(name, _)| name).collect();
        if distinct.len() > 1 {
            let all: Vec<String> = names
                .iter()
                .map(|(name, at)| format!("`{name}` ({at})"))
                .collect();
            offences.push(format!(
                "one errorType spelled {} ways: {}; pick one (and add it to ERROR_TYPE_CONCEPTS)",
                distinct.len(),
                all.join(", ")
            ));
        }
    }
    offences
}

/// Rule 11, on one function's `src/config.rs`.
fn config_offences(path: &str, source: &str) -> Vec<String> {
    let code = without_test_modules(&code_only(source));
    let t = tokens(&code);
    let mut offences = vec![];
    if !t.windows(3).any(|w| w == ["pub", "struct", "Config"]) {
        offences.push(format!(
            "{path}: no `pub struct Config`: every function's settings type is `Config`"
        ));
    }
    // `pub fn from_env` inside an `impl Config { … }` block.
    let in_impl = |from: usize| {
        let mut depth = 0;
        for k in from..t.len() {
            depth += match t[k] {
                "{" => 1,
                "}" => -1,
                _ => 0,
            };
            if depth == 0 {
                return false;
            }
            if t[k..].starts_with(&["pub", "fn", "from_env"]) {
                return true;
            }
        }
        false
    };
    let from_env = (0..t.len())
        .filter(|&i| t[i..].starts_with(&["impl", "Config", "{"]))
        .any(|i| in_impl(i + 2));
    if !from_env {
        offences.push(format!(
            "{path}: no `pub fn from_env` in `impl Config` (`main` starts with `shared::start_or_exit(Config::from_env)`)"
        ));
    }
    offences
}

/// `src/<file>` of every function, or an offence for each one without it.
fn function_files(file: &str) -> (Vec<Source>, Vec<String>) {
    let (root, packages) = workspace();
    let (mut sources, mut offences) = (vec![], vec![]);
    for p in packages.iter().filter(|p| is_function(&p.dir)) {
        let path = format!("{}/src/{file}", p.dir);
        match std::fs::read_to_string(root.join(&path)) {
            Ok(text) => sources.push(Source { path, text }),
            Err(e) => offences.push(format!("{path}: {e} (every function has one)")),
        }
    }
    (sources, offences)
}

/// Rule 17, on one function's README (`path`, `readme`) and the errorTypes
/// and failure classes of its code.
fn documented_error_offences(
    path: &str,
    readme: &str,
    error_types: &BTreeSet<String>,
    classes: &BTreeSet<String>,
) -> Vec<String> {
    let named = backticked(readme);
    let mut offences = vec![];
    for (kind, names) in [("errorType", error_types), ("failure class", classes)] {
        for name in names.iter().filter(|n| !named.contains(*n)) {
            offences.push(format!(
                "{path}: the code's {kind} `{name}` is not named here: say when it happens"
            ));
        }
    }
    for (line, name) in documented_error_types(readme) {
        if !error_types.contains(&name) {
            offences.push(format!(
                "{path}:{line}: errorType `{name}` is not one the code returns"
            ));
        }
    }
    for (line, name) in documented_classes(readme) {
        if !classes.contains(&name) {
            offences.push(format!(
                "{path}:{line}: failure class `{name}` is not one the code returns"
            ));
        }
    }
    offences
}

/// Every backticked word of `text`.
fn backticked(text: &str) -> BTreeSet<String> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

/// The errorTypes `text` documents, with their lines: the first cell of
/// each row of a table whose first header cell is `` `errorType` ``, and a
/// backticked word right after "errorType".
fn documented_error_types(text: &str) -> Vec<(usize, String)> {
    let mut found = vec![];
    let mut in_table = false;
    for (n, line) in text.lines().enumerate() {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        if line.starts_with('|') && cells.get(1) == Some(&"`errorType`") {
            in_table = true;
            continue;
        }
        in_table &= line.starts_with('|');
        let first = cells
            .get(1)
            .and_then(|c| c.strip_prefix('`')?.strip_suffix('`'));
        if in_table && let Some(name) = first.filter(|c| !c.contains('-')) {
            found.push((n + 1, name.to_owned()));
        }
        for (at, _) in line
            .match_indices("errorType` `")
            .chain(line.match_indices("errorType `"))
        {
            let rest = &line[at..];
            let after = rest.split('`').filter(|w| !w.trim().is_empty()).nth(1);
            if let Some(name) = after.filter(|w| w.chars().all(|c| c.is_ascii_alphanumeric())) {
                found.push((n + 1, name.to_owned()));
            }
        }
    }
    found
}

/// The failure classes `text` documents, with their lines: the backticked
/// words of a list item that speaks of "failure classes", to its end.
fn documented_classes(text: &str) -> Vec<(usize, String)> {
    let mut found = vec![];
    let mut in_item = false;
    for (n, line) in text.lines().enumerate() {
        if line.starts_with("- ") || line.trim().is_empty() {
            in_item = line.contains("failure classes");
        }
        if in_item {
            let words = line.split('`').skip(1).step_by(2);
            found.extend(words.map(|w| (n + 1, w.to_owned())));
        }
    }
    found
}

/// Rule 17, on ARCHITECTURE.md's paragraph on errors: the errorTypes it
/// names are the shared ones.
fn architecture_error_offences(architecture: &str) -> Vec<String> {
    let paragraph = architecture
        .split("\n\n")
        .find(|p| p.starts_with("**Errors.**"))
        .unwrap_or_default();
    backticked(paragraph)
        .into_iter()
        .filter(|w| w.starts_with(|c: char| c.is_ascii_uppercase()) && w.chars().all(|c| c.is_ascii_alphanumeric()))
        .filter(|w| !ERROR_TYPE_CONCEPTS.contains(&w.as_str()) && w != "Error" && w != "Diagnostic" && w != "RecordFailure" && w != "Retry")
        .map(|w| format!("ARCHITECTURE.md: errorType `{w}` is one function's: name it in that function's README"))
        .collect()
}

#[test]
fn the_docs_name_the_errors_the_code_has() {
    let (root, packages) = workspace();
    let mut offences = architecture_error_offences(&read(&root.join("ARCHITECTURE.md")));
    for p in packages.iter().filter(|p| is_function(&p.dir)) {
        let dir = root.join(&p.dir);
        let error_types: BTreeSet<String> = std::fs::read_to_string(dir.join("src/error.rs"))
            .ok()
            .and_then(|text| error_type_literals(&text))
            .into_iter()
            .flatten()
            .map(|(_, name)| name)
            .collect();
        let classes: BTreeSet<String> = rust_files(&dir.join("src"))
            .iter()
            .flat_map(|file| class_literals(&read(file)))
            .collect();
        let path = format!("{}/README.md", p.dir);
        offences.extend(documented_error_offences(
            &path,
            &read(&root.join(&path)),
            &error_types,
            &classes,
        ));
    }
    assert_none("errors the docs and the code disagree on", offences);
}

#[test]
fn error_types_follow_one_naming_scheme() {
    let (sources, mut offences) = function_files("error.rs");
    offences.extend(error_type_offences(&sources));
    assert_none("errorType names", offences);
}

#[test]
fn every_function_has_a_config_with_from_env() {
    let (sources, mut offences) = function_files("config.rs");
    for source in &sources {
        offences.extend(config_offences(&source.path, &source.text));
    }
    assert_none("settings types", offences);
}

/// The most lines a function of the tooling may take (rule 12).
const MAX_FUNCTION_LINES: usize = 80;

/// Tooling functions still longer than [`MAX_FUNCTION_LINES`], in files other
/// changes are splitting now: (file, function). Temporary: an entry goes once
/// its function is split, and nothing joins it.
const LONG_FUNCTIONS_ALLOWED: &[(&str, &str)] = &[];

/// The functions with a body in `source`: (line of `fn`, name, lines from
/// there to the closing brace). Strings and comments are not code.
fn function_lengths(source: &str) -> Vec<(usize, String, usize)> {
    let code: Vec<char> = code_only(source).chars().collect();
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let line = |at: usize| code[..at].iter().filter(|c| **c == '\n').count() + 1;
    let mut functions = vec![];
    for at in 0..code.len() {
        // `fn name`, not `fn(` (a pointer type) nor part of a longer word.
        let keyword = code[at..].starts_with(&['f', 'n'])
            && (at == 0 || !ident(code[at - 1]))
            && code.get(at + 2).is_some_and(|c| c.is_whitespace());
        if !keyword {
            continue;
        }
        let name_at = (at + 2..code.len())
            .find(|&i| !code[i].is_whitespace())
            .unwrap_or(code.len());
        let name: String = code[name_at..].iter().take_while(|c| ident(**c)).collect();
        // The body opens at the first `{` outside parentheses and brackets;
        // a `;` there first: a declaration, without a body.
        let mut nesting = 0;
        let open = (name_at..code.len()).find(|&i| {
            nesting += match code[i] {
                '(' | '[' => 1,
                ')' | ']' => -1,
                _ => 0,
            };
            nesting == 0 && matches!(code[i], '{' | ';')
        });
        let Some(open) = open.filter(|&open| !name.is_empty() && code[open] == '{') else {
            continue;
        };
        let mut depth = 0;
        let close = (open..code.len()).find(|&i| {
            depth += match code[i] {
                '{' => 1,
                '}' => -1,
                _ => 0,
            };
            depth == 0
        });
        if let Some(close) = close {
            functions.push((line(at), name, line(close) - line(at) + 1));
        }
    }
    functions
}

/// Rule 12, on one file of the tooling: its functions longer than `max`
/// lines, but those named in `allowed`.
fn long_function_offences(path: &str, source: &str, max: usize, allowed: &[&str]) -> Vec<String> {
    function_lengths(source)
        .into_iter()
        .filter(|(_, name, lines)| *lines > max && !allowed.contains(&name.as_str()))
        .map(|(line, name, lines)| {
            format!(
                "{path}:{line}: `fn {name}` is {lines} lines, more than {max}: split it into steps with names"
            )
        })
        .collect()
}

#[test]
fn tooling_functions_are_at_most_80_lines() {
    let (root, _) = workspace();
    let mut offences = vec![];
    for dir in ["tools", "xtask", "tests"] {
        for file in rust_files(&root.join(dir)) {
            let path = relative(&root, &file);
            let allowed: Vec<&str> = LONG_FUNCTIONS_ALLOWED
                .iter()
                .filter(|(file, _)| *file == path)
                .map(|(_, function)| *function)
                .collect();
            let source = read(&file);
            offences.extend(long_function_offences(
                &path,
                &source,
                MAX_FUNCTION_LINES,
                &allowed,
            ));
        }
    }
    assert_none("tooling functions too long", offences);
}

// ---------------------------------------------------------------- helpers

fn assert_none(rule: &str, offences: Vec<String>) {
    assert!(
        offences.is_empty(),
        "{} offence(s), {rule}:\n  {}\n",
        offences.len(),
        offences.join("\n  ")
    );
}

/// The workspace root and its packages, from `cargo metadata --no-deps`.
fn workspace() -> (PathBuf, Vec<Package>) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent");
    let out = cargo_stdout(dir, &["metadata", "--format-version", "1", "--no-deps"]);
    let meta: serde_json::Value = serde_json::from_str(&out).expect("cargo metadata prints JSON");
    let text = |v: &serde_json::Value| v.as_str().expect("cargo metadata: a string").to_string();
    let list = |v: &serde_json::Value| v.as_array().expect("cargo metadata: a list").clone();
    let root = PathBuf::from(text(&meta["workspace_root"]));
    let names: BTreeSet<String> = list(&meta["packages"])
        .iter()
        .map(|p| text(&p["name"]))
        .collect();
    let packages = list(&meta["packages"]).into_iter().map(|p| {
        let manifest = PathBuf::from(text(&p["manifest_path"]));
        let targets = list(&p["targets"]);
        let of_kind = |kind: &str| {
            let targets = targets
                .iter()
                .filter(|t| list(&t["kind"]).iter().any(|k| k == kind));
            targets
                .map(|t| (text(&t["name"]), PathBuf::from(text(&t["src_path"]))))
                .collect::<Vec<_>>()
        };
        let deps = list(&p["dependencies"]);
        let dependencies = deps.iter().map(|d| text(&d["name"])).collect();
        let members = deps
            .iter()
            .filter(|d| d["path"].is_string() && names.contains(&text(&d["name"])));
        Package {
            name: text(&p["name"]),
            dir: relative(&root, manifest.parent().expect("a manifest is in a folder")),
            manifest: read(&manifest),
            lib: of_kind("lib")
                .pop()
                .map(|(name, src)| (name, relative(&root, src.parent().expect("in src/")))),
            bins: of_kind("bin").into_iter().map(|(name, _)| name).collect(),
            members_used: members
                .map(|d| {
                    let kind = d["kind"].as_str().unwrap_or("normal").to_string();
                    (
                        text(&d["name"]),
                        kind,
                        d["rename"]
                            .as_str()
                            .map_or_else(|| text(&d["name"]), str::to_string),
                    )
                })
                .collect(),
            dependencies,
        }
    });
    let packages = packages.collect();
    (root, packages)
}

/// What `cargo args` prints in `dir`; it must succeed (else its stderr).
fn cargo_stdout(dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new(env!("CARGO"))
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("run cargo {}: {e}", args.join(" ")));
    assert!(
        out.status.success(),
        "cargo {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A function's own crate: `functions/<name>`.
fn is_function(dir: &str) -> bool {
    dir.strip_prefix("functions/")
        .is_some_and(|name| !name.is_empty() && !name.contains('/'))
}

/// A crate inside a function's folder: the function's own, or one of its
/// test-only crates (`functions/<name>/testkit`, `lab`), which go when it goes.
fn in_function_folder(dir: &str) -> bool {
    dir.starts_with("functions/")
}

fn relative(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .to_string_lossy()
        .replace('\\', "/")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

/// Every file and folder under `dir` (relative to `root`), but folders `skip` names.
fn walk(root: &Path, dir: &Path, skip: &dyn Fn(&str) -> bool, out: &mut BTreeSet<String>) {
    for entry in std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .flatten()
    {
        let path = entry.path();
        if path.is_dir() && skip(&entry.file_name().to_string_lossy()) {
            continue;
        }
        out.insert(relative(root, &path));
        if path.is_dir() {
            walk(root, &path, skip, out);
        }
    }
}

/// The `.rs` files under a member's folder, build outputs and tools left out.
fn rust_files(dir: &Path) -> BTreeSet<PathBuf> {
    let mut found = BTreeSet::new();
    walk(dir, dir, &|d| d == "target" || d == ".tools", &mut found);
    found
        .into_iter()
        .filter(|f| f.ends_with(".rs"))
        .map(|f| dir.join(f))
        .collect()
}

fn line_at(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

/// The first line that starts with `key` as a TOML or YAML key (0: none).
fn key_line(text: &str, key: &str) -> usize {
    let is_key = |l: &str| {
        l.trim_start()
            .strip_prefix(key)
            .is_some_and(|r| r.starts_with([' ', '=', '.', ':']))
    };
    let header = format!("dependencies.{key}]");
    text.lines()
        .position(|l| is_key(l) || l.contains(&header))
        .map_or(0, |n| n + 1)
}

fn value_at<'a, 'i>(table: &'a DeTable<'i>, key: &str) -> Option<&'a DeValue<'i>> {
    table
        .iter()
        .find(|(k, _)| k.get_ref() == key)
        .map(|(_, v)| v.get_ref())
}

fn table_at<'a, 'i>(table: &'a DeTable<'i>, key: &str) -> Option<&'a DeTable<'i>> {
    match value_at(table, key)? {
        DeValue::Table(t) => Some(t),
        _ => None,
    }
}

/// `source` with comments and the contents of string and char literals blanked
/// (line breaks kept): what is left is code.
fn code_only(source: &str) -> String {
    let c: Vec<char> = source.chars().collect();
    let ident = |i: usize| c[i].is_alphanumeric() || c[i] == '_';
    let after = |from: usize, pat: &[char]| {
        (from..c.len())
            .find(|&j| c[j..].starts_with(pat))
            .map_or(c.len(), |j| j + pat.len())
    };
    let (mut out, mut i) = (c.clone(), 0);
    while i < c.len() {
        let raw = c[i] == 'r'
            && (i == 0
                || !ident(i - 1)
                || (matches!(c[i - 1], 'b' | 'c') && (i < 2 || !ident(i - 2))));
        let hashes = c[i + 1..].iter().take_while(|c| **c == '#').count();
        let end = if c[i..].starts_with(&['/', '/']) {
            (i..c.len()).find(|&j| c[j] == '\n').unwrap_or(c.len())
        } else if c[i..].starts_with(&['/', '*']) {
            let (mut depth, mut j) = (0, i);
            while j < c.len() {
                let opens = c[j..].starts_with(&['/', '*']);
                if opens || c[j..].starts_with(&['*', '/']) {
                    depth += if opens { 1 } else { -1 };
                    j += 1;
                }
                j += 1;
                if depth == 0 {
                    break;
                }
            }
            j
        } else if raw && c.get(i + 1 + hashes) == Some(&'"') {
            let close: Vec<char> = std::iter::once('"')
                .chain(std::iter::repeat_n('#', hashes))
                .collect();
            after(i + hashes + 2, &close)
        } else if c[i] == '"' {
            let mut j = i + 1;
            while j < c.len() && c[j] != '"' {
                j += if c[j] == '\\' { 2 } else { 1 };
            }
            j + 1
        } else if c[i] == '\'' && c.get(i + 1) == Some(&'\\') {
            after(i + 2, &['\''])
        } else if c[i] == '\'' && c.get(i + 2) == Some(&'\'') {
            i + 3
        } else {
            i + 1 // code, or the quote of a lifetime
        };
        let end = end.clamp(i + 1, c.len());
        if end > i + 1 || c[i] == '"' {
            out[i..end]
                .iter_mut()
                .filter(|ch| **ch != '\n')
                .for_each(|ch| *ch = ' ');
        }
        i = end;
    }
    out.into_iter().collect()
}

/// Identifiers, `::` and single punctuation characters of code.
fn tokens(code: &str) -> Vec<&str> {
    let is_ident = |b: &u8| b.is_ascii_alphanumeric() || *b == b'_';
    let (bytes, mut out, mut i) = (code.as_bytes(), vec![], 0);
    while i < bytes.len() {
        let start = i;
        i += match bytes[i..].iter().take_while(|b| is_ident(b)).count() {
            0 if bytes[i..].starts_with(b"::") => 2,
            0 => code[i..].chars().next().map_or(1, char::len_utf8),
            n => n,
        };
        if !bytes[start].is_ascii_whitespace() {
            out.push(&code[start..i]);
        }
    }
    out
}

/// `code` with every `#[cfg(test)]` module blanked (line numbers kept).
fn without_test_modules(code: &str) -> String {
    let mut lines: Vec<&str> = code.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        let attribute_or_blank = |l: &&str| l.trim().is_empty() || l.trim_start().starts_with("#[");
        let item = lines
            .iter()
            .skip(i + 1)
            .position(|l| !attribute_or_blank(l))
            .map(|k| i + 1 + k);
        let Some(j) = item
            .filter(|&j| lines[i].trim() == "#[cfg(test)]" && declared_module(lines[j]).is_some())
        else {
            i += 1;
            continue;
        };
        let (mut depth, mut end) = (0, j);
        for (k, line) in lines.iter().enumerate().skip(j) {
            depth += line.matches('{').count() as i64 - line.matches('}').count() as i64;
            end = k;
            if depth <= 0 && (line.contains('}') || line.trim_end().ends_with(';')) {
                break;
            }
        }
        lines[i..=end].fill("");
        i = end + 1;
    }
    lines.join("\n")
}

/// The module a `mod x;` / `pub(..) mod x {` line declares.
fn declared_module(line: &str) -> Option<&str> {
    let mut rest = line.trim_start();
    if let Some(after) = rest.strip_prefix("pub") {
        rest = after.trim_start();
        if rest.starts_with('(') {
            rest = &rest[rest.find(')')? + 1..];
        }
    }
    let name = rest.trim_start().strip_prefix("mod ")?.trim_start();
    let len = name
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(name.len());
    (len > 0).then(|| &name[..len])
}

/// Whether `code` names `module` as `prefix::module`, in a `prefix::{.., module}`
/// group, or (in the crate root) as `module::` or `use module`.
fn uses_module(code: &str, module: &str, prefixes: &[&str], crate_root: bool) -> bool {
    let t = tokens(code);
    let mut groups: Vec<Option<&str>> = vec![];
    for (i, &token) in t.iter().enumerate() {
        let back = |n: usize| i.checked_sub(n).map(|k| t[k]);
        let allowed = |p: Option<&str>| p.is_some_and(|p| prefixes.contains(&p));
        match token {
            "{" => groups.push(if back(1) == Some("::") { back(2) } else { None }),
            "}" => drop(groups.pop()),
            _ if token == module => {
                let via_prefix = back(1) == Some("::") && allowed(back(2));
                let in_group =
                    matches!(back(1), Some("{" | ",")) && allowed(groups.last().copied().flatten());
                let bare = crate_root
                    && back(1) != Some("::")
                    && (t.get(i + 1) == Some(&"::") || back(1) == Some("use"));
                if via_prefix || in_group || bare {
                    return true;
                }
            }
            _ => {}
        }
    }
    false
}

// ---------------------------------------------------------------- planted offences

mod planted {
    use super::*;

    #[test]
    fn errors_the_docs_and_the_code_disagree_on_are_reported() {
        let error_types: BTreeSet<String> = ["InvalidRequest", "Busy"].map(String::from).into();
        let classes: BTreeSet<String> = ["schema", "conflict"].map(String::from).into();
        let readme = "## Errors\n\n| `errorType` | when |\n|---|---|\n| `InvalidRequest` | bad |\n\
            | `Gone` | removed |\n\nInvocation error: `errorType` `Vanished`.\n\n\
            - Record failure classes: `schema`,\n  `stale` (dead-lettered).\n- Other: `conflict`.\n";
        let offences =
            documented_error_offences("functions/x/README.md", readme, &error_types, &classes);
        assert_eq!(
            offences,
            [
                "functions/x/README.md: the code's errorType `Busy` is not named here: say when it happens",
                "functions/x/README.md:6: errorType `Gone` is not one the code returns",
                "functions/x/README.md:8: errorType `Vanished` is not one the code returns",
                "functions/x/README.md:11: failure class `stale` is not one the code returns",
            ]
        );
        let architecture = "# A\n\n**Errors.** One scheme: `InvalidRequest`, `DeadlineTooShort`; \
            the worker's `TooManyRows`.\n\nNext.";
        assert_eq!(
            architecture_error_offences(architecture),
            [
                "ARCHITECTURE.md: errorType `TooManyRows` is one function's: name it in that function's README"
            ]
        );
    }

    fn package(name: &str, dir: &str, members_used: &[(&str, &str)]) -> Package {
        let members_used = members_used
            .iter()
            .map(|(d, k)| (d.to_string(), k.to_string(), d.to_string()));
        let manifest = members_used
            .clone()
            .map(|(d, _, _)| format!("{d}.workspace = true\n"))
            .collect();
        Package {
            name: name.into(),
            dir: dir.into(),
            manifest,
            members_used: members_used.collect(),
            ..Default::default()
        }
    }

    #[test]
    fn a_function_depending_on_another_or_on_dev_tooling_is_reported() {
        let packages = [
            package(
                "order-processor",
                "functions/order-processor",
                &[
                    ("shared", "normal"),
                    ("lab", "normal"),
                    ("testkit", "dev"),
                    ("arrow-worker", "dev"),
                ],
            ),
            package(
                "arrow-worker",
                "functions/arrow-worker",
                &[("shared", "build")],
            ),
            package("shared", "shared", &[("testkit", "dev")]),
            package(
                "testkit",
                "testkit",
                &[("shared", "normal"), ("arrow-worker", "normal")],
            ),
        ];
        let offences = dependency_offences(&packages);
        assert_eq!(offences.len(), 3, "{offences:#?}");
        assert!(offences[0].starts_with("functions/order-processor/Cargo.toml:2: `order-processor` has a normal dependency on `lab`"));
        assert!(offences[1].starts_with("functions/order-processor/Cargo.toml:4: `order-processor` has a dev dependency on `arrow-worker`"));
        assert!(
            offences[2]
                .starts_with("shared/Cargo.toml:1: `shared` has a dev dependency on `testkit`")
        );
    }

    #[test]
    fn shared_may_lean_on_the_workspace_hack_and_it_on_nothing() {
        let packages = [
            package("shared", "shared", &[("workspace-hack", "normal")]),
            package("workspace-hack", WORKSPACE_HACK, &[("shared", "normal")]),
        ];
        let offences = dependency_offences(&packages);
        assert_eq!(offences.len(), 1, "{offences:#?}");
        assert!(offences[0].starts_with(
            "shared/workspace-hack/Cargo.toml:1: `workspace-hack` has a normal dependency on `shared`"
        ));
    }

    #[test]
    fn xtask_on_the_local_stack_or_pinned_tools_on_anything_is_reported() {
        let mut pinned = package("pinned-tools", "tools/pinned-tools", &[]);
        pinned.dependencies = vec!["serde".into()];
        let packages = [
            package(
                "xtask",
                "xtask",
                &[("pinned-tools", "normal"), ("local-stack", "normal")],
            ),
            pinned,
            package("lab", "tools/lab", &[("local-stack", "normal")]),
        ];
        let offences = xtask_offences(&packages);
        assert_eq!(offences.len(), 2, "{offences:#?}");
        assert!(offences[0].starts_with("xtask/Cargo.toml: `xtask` depends on `local-stack`"));
        assert!(
            offences[1]
                .starts_with("tools/pinned-tools/Cargo.toml: `pinned-tools` depends on `serde`")
        );
    }

    #[test]
    fn a_crate_built_with_other_features_by_two_functions_is_reported() {
        let tree = |tokio: &str| {
            format!(
                "f v0.1.0 (/w/functions/f)|\nshared v0.1.0 (/w/shared)|aws (*)\n\
                 tokio v1.54.1|{tokio}\nsyn v3.0.9 (proc-macro)|full (*)\n"
            )
        };
        let trees = [
            ("order-processor".to_string(), tree("fs,rt")),
            ("password-hasher".to_string(), tree("rt")),
            ("arrow-worker".to_string(), tree("fs,rt")),
        ];
        let members = ["f", "shared"].map(String::from).into();
        let offences = feature_offences(&trees, &members);
        assert_eq!(offences.len(), 1, "{offences:#?}");
        assert!(offences[0].starts_with(
            "`tokio v1.54.1` gets other features in each function's build (arrow-worker [fs,rt], \
             order-processor [fs,rt], password-hasher [rt])"
        ));
        let alike = [trees[0].clone(), trees[2].clone()];
        assert!(feature_offences(&alike, &members).is_empty());
    }

    #[test]
    fn a_crate_measured_out_is_reported_when_shipped() {
        let tree = "order-processor v0.1.0 (/w/functions/order-processor)\n\
                    aws-lc-sys v0.47.0\nregex-lite v0.1.9\nrustls v0.23.40\n";
        let offences = shipped_offences("order-processor", tree);
        assert_eq!(offences.len(), 1, "{offences:#?}");
        assert!(offences[0].starts_with("functions/order-processor: ships `aws-lc-sys`"));
        assert!(shipped_offences("x", "regex-lite v0.1.9\nring v0.17.14\n").is_empty());
    }

    #[test]
    fn a_version_outside_the_root_table_is_reported() {
        let manifest = "[package]\nname = \"x\"\n\n[dependencies]\nserde.workspace = true\nfoo = \"1\"\n\
            tokio = { workspace = true, features = [\"sync\"] }\nbar = { version = \"2\", workspace = true }\n\n\
            [dev-dependencies]\ntestkit = { path = \"../../tools/testkit\" }\nx-testkit = { path = \"testkit\" }\n\n\
            [target.'cfg(unix)'.dependencies]\nlibc = { optional = true }\n";
        let offences = manifest_offences("functions/x/Cargo.toml", manifest);
        let heads: Vec<&str> = offences
            .iter()
            .filter_map(|o| o.split(": put it").next())
            .collect();
        assert_eq!(
            heads,
            [
                "functions/x/Cargo.toml:8: [dependencies] `bar` sets its own version",
                "functions/x/Cargo.toml:6: [dependencies] `foo` pins its own version \"1\"",
                "functions/x/Cargo.toml:11: [dev-dependencies] `testkit` sets its own path",
                "functions/x/Cargo.toml:15: [target.cfg(unix).dependencies] `libc` lacks `workspace = true`",
            ]
        );
    }

    #[test]
    fn unexplained_or_misplaced_unsafe_and_static_mut_are_reported() {
        let source = "// unsafe in a comment\nconst S: &str = \"unsafe { }\";\nconst R: &str = r#\"unsafe \"#;\n\
            fn f(x: &'static mut u8) -> char {\n    // SAFETY: planted.\n    let _ = unsafe { g() };\n    '\"'\n}\n\
            fn h() {\n    unsafe { g() };\n}\nstatic mut COUNT: u8 = 0;\n#[unsafe(no_mangle)]\nextern \"C\" fn k() {}\n";
        let why = "`unsafe` without a `// SAFETY:` comment on its line or the 3 above";
        assert_eq!(
            unsafe_offences("shared/src/memory.rs", source, true),
            [
                format!("shared/src/memory.rs:10: {why}"),
                "shared/src/memory.rs:12: `static mut` (use an atomic, a `Mutex` or a `OnceLock`)"
                    .into(),
                format!("shared/src/memory.rs:13: {why}"),
            ]
        );
        let elsewhere = unsafe_offences("functions/x/src/handler.rs", source, false);
        let outside: Vec<&String> = elsewhere
            .iter()
            .filter(|o| o.contains("outside the files of UNSAFE_ALLOWED"))
            .collect();
        assert_eq!(outside.len(), 3, "{elsewhere:#?}");
        assert!(outside[0].starts_with("functions/x/src/handler.rs:6: "));
    }

    #[test]
    fn a_module_only_tests_or_unused_modules_use_is_reported() {
        let file = |path: &str, text: &str| Source {
            path: format!("functions/x/src/{path}"),
            text: text.into(),
        };
        let own = [
            file(
                "lib.rs",
                "pub mod handler;\nmod config;\n#[doc(hidden)]\npub mod fuzz_checks;\npub mod sample;\npub mod store;\n\
                #[cfg(test)]\nmod tests {\n    use crate::sample;\n}\n",
            ),
            file(
                "main.rs",
                "use x::{config::Config, handler};\nfn main() { x::store::open(); }\n",
            ),
            file(
                "handler.rs",
                "// crate::sample in a comment\nfn f() { let s = \"crate::fuzz_checks\"; }\n",
            ),
            file("fuzz_checks.rs", "use crate::sample::orders;\n"),
            file("sample.rs", "use crate::handler;\n"),
        ];
        let why =
            "is used by no production code (move it to a dev crate such as testkit or lab-probes)";
        assert_eq!(
            unused_modules("x", "functions/x/src", &own, &[]),
            [
                format!("functions/x/src/lib.rs:4: module `fuzz_checks` {why}"),
                format!("functions/x/src/lib.rs:5: module `sample` {why}"),
            ]
        );
        let shared = [Source {
            path: "shared/src/lib.rs".into(),
            text: "pub mod arena;\npub mod memory;\n".into(),
        }];
        let function = [file("main.rs", "fn main() { shared::arena::start(); }\n")];
        assert_eq!(
            unused_modules("shared", "shared/src", &shared, &function),
            [format!("shared/src/lib.rs:2: module `memory` {why}")]
        );
    }

    #[test]
    fn a_path_the_tree_lacks_is_reported() {
        let tree = [
            "shared",
            "shared/src",
            "shared/src/lib.rs",
            "shared/src/memory.rs",
            "xtask",
            "xtask/src/main.rs",
            "functions/kept",
        ];
        let tree: BTreeSet<String> = tree.iter().map(|p| p.to_string()).collect();
        let libs = BTreeMap::from([(
            "shared".to_string(),
            ("shared/src".to_string(), "pub fn init() {}".to_string()),
        )]);
        let markdown = "`shared/src/lib.rs:12` `xtask/src/gone.rs` `target/x.rs` `https://a/b.md` `cargo xtask run`\n\
            | `shared/` | `memory.rs` `main.rs` |\n```\n`not/checked.rs`\n```\n\
            `shared::memory::snapshot` `shared::init` `shared::invocation::Deadline` `lib.rs` `Init::decide`\n\
            `functions/removed/src/handler.rs` `events/removed/a.json` `functions/kept/src/gone.rs`\n\
            | `functions/removed/` | `scan.rs` |\n";
        assert_eq!(
            doc_path_offences(
                "ARCHITECTURE.md",
                markdown,
                &tree,
                &["target".into()],
                &libs
            ),
            [
                "ARCHITECTURE.md:1: `xtask/src/gone.rs` names no file or folder of the workspace",
                "ARCHITECTURE.md:2: `main.rs` names no file or folder of the workspace (nor under [\"shared\"])",
                "ARCHITECTURE.md:6: `shared::invocation::Deadline` names `invocation`, which is no module or item of `shared`",
                // A removed function's paths are not reported; a present one's are.
                "ARCHITECTURE.md:7: `functions/kept/src/gone.rs` names no file or folder of the workspace",
            ]
        );
    }

    #[test]
    fn a_template_function_without_its_crate_or_binary_is_reported() {
        let template = "Resources:\n  Queue:\n    Type: AWS::SQS::Queue\n  AFunction:\n    Type: AWS::Serverless::Function\n\
            \x20   Metadata:\n      BuildProperties:\n        Binary: a\n    Properties:\n      CodeUri: functions/a/\n\
            \x20     Role: !GetAtt ARole.Arn\n  BFunction:\n    Type: AWS::Serverless::Function\n    Metadata:\n\
            \x20     BuildProperties:\n        Binary: bee\n    Properties:\n      CodeUri: functions/b\n  CFunction:\n\
            \x20   Type: AWS::Serverless::Function\n    Properties:\n      CodeUri: xtask\n";
        let crate_at = |dir: &str, bin: &str| Package {
            dir: dir.into(),
            bins: vec![bin.into()],
            ..Default::default()
        };
        let packages = [crate_at("functions/a", "a"), crate_at("functions/b", "b")];
        let dirs = ["functions/a", "functions/b", "functions/c"].map(String::from);
        assert_eq!(
            template_offences(template, &packages, &dirs),
            [
                "template.yaml:12: BFunction: BuildProperties.Binary Some(\"bee\") is not a [[bin]] of `functions/b` ([\"b\"])",
                "template.yaml:19: CFunction: CodeUri Some(\"xtask\") is not a folder under functions/",
                "functions/c: no function of template.yaml deploys it (CodeUri)",
            ]
        );
    }
    #[test]
    fn an_import_cycle_is_reported() {
        let source = |path: &str, text: &str| Source {
            path: path.into(),
            text: text.into(),
        };
        let own = [
            source(
                "f/src/lib.rs",
                "pub mod answer;\npub mod request;\npub mod query;\n",
            ),
            source("f/src/answer.rs", "use crate::request::Request;\n"),
            source("f/src/request.rs", "use crate::{answer::Answer, query};\n"),
            source(
                "f/src/query.rs",
                "// crate::answer is only named in a comment\n",
            ),
        ];
        assert_eq!(
            import_cycles("f/src", &own),
            ["f/src: modules import each other: answer -> request -> answer"]
        );
        assert!(import_cycles("f/src", &own[..1]).is_empty());
    }

    #[test]
    fn a_client_or_pool_built_in_a_handler_is_reported() {
        let handler = "fn f() {\n    let c = aws_sdk_dynamodb::Client::new(&conf);\n    \
                       rayon::ThreadPoolBuilder::new();\n}\n#[cfg(test)]\nmod tests {\n    \
                       fn t() { Client::new(&x); }\n}\n";
        let offences = construction_offences("functions/f/src/handler.rs", handler);
        assert_eq!(offences.len(), 2, "{offences:?}");
        assert!(offences[0].starts_with("functions/f/src/handler.rs:2:"));
        assert!(
            construction_offences("functions/f/src/handler.rs", "let s = \"Client::new\";")
                .is_empty()
        );
    }

    #[test]
    fn a_tool_depending_on_a_function_is_reported() {
        let package = |name: &str, dir: &str, uses: &[&str]| Package {
            name: name.into(),
            dir: dir.into(),
            manifest: format!(
                "[dev-dependencies]\n{}",
                uses.iter()
                    .map(|u| format!("{u}.workspace = true\n"))
                    .collect::<String>()
            ),
            members_used: uses
                .iter()
                .map(|u| ((*u).into(), "dev".into(), (*u).into()))
                .collect(),
            ..Package::default()
        };
        let packages = [
            package("greeter", "functions/greeter", &["shared"]),
            package("report-tool", "tools/report-tool", &["greeter", "shared"]),
            package("testkit", "tools/testkit", &["order-processor"]),
        ];
        let root = "[workspace.dependencies]\ngreeter = { path = \"functions/greeter\" }\n";
        let offences = tool_offences(&packages, root);
        assert_eq!(offences.len(), 2, "{offences:?}");
        assert!(
            offences[0].starts_with("tools/report-tool/Cargo.toml:2:"),
            "{offences:?}"
        );
        assert!(offences[1].starts_with("Cargo.toml:2:"), "{offences:?}");
        assert!(tool_offences(&packages[..1], "").is_empty());
    }

    #[test]
    fn an_sdk_configuration_loaded_outside_shared_aws_is_reported() {
        let main = "fn main() {\n    let c = aws_config::defaults(BehaviorVersion::latest());\n}\n";
        let offences = sdk_config_offences("functions/f/src/main.rs", main);
        assert_eq!(offences.len(), 2, "{offences:?}");
        assert!(offences[0].starts_with("functions/f/src/main.rs:2:"));
        assert!(sdk_config_offences(SDK_CONFIG_HOME, main).is_empty());
        assert!(
            sdk_config_offences("functions/f/src/main.rs", "shared::aws::config_loader(&S);")
                .is_empty()
        );
    }

    #[test]
    fn error_types_off_the_scheme_are_reported() {
        let source = |path: &str, body: &str| Source {
            path: path.into(),
            text: format!(
                "/// `Internal` in a doc\nimpl Error {{\n    pub fn error_type(&self) -> &'static str {{\n{body}    }}\n}}\n\
                 fn other() -> &'static str {{ \"not_checked\" }}\n"
            ),
        };
        let sources = [
            source(
                "functions/a/src/error.rs",
                "        // \"commented_out\"\n        match self {\n            Error::A => \"InternalError\",\n\
                 \x20           Error::B { .. } => \"too_many_rows\",\n            Error::C => \"S3Failed\",\n\
                 \x20           Error::D => \"Escaped\\\"Quote\",\n        }\n",
            ),
            source(
                "functions/b/src/error.rs",
                "        match self {\n            Error::A => \"Internal\",\n            Error::B => \"TooManyRows\",\n        }\n",
            ),
            Source {
                path: "functions/c/src/error.rs".into(),
                text: "pub enum Error {}\n".into(),
            },
        ];
        assert_eq!(
            error_type_offences(&sources),
            [
                "functions/a/src/error.rs:7: errorType `too_many_rows` is not PascalCase (letters and digits, a capital first: `InvalidRequest`)",
                "functions/a/src/error.rs:8: errorType `S3Failed` is spelled `S3Error` in every function (ERROR_TYPE_CONCEPTS)",
                "functions/a/src/error.rs:9: errorType `Escaped\"Quote` is not PascalCase (letters and digits, a capital first: `InvalidRequest`)",
                "functions/b/src/error.rs:5: errorType `Internal` is spelled `InternalError` in every function (ERROR_TYPE_CONCEPTS)",
                "functions/c/src/error.rs: no `fn error_type`: each function names its errorTypes there",
                "one errorType spelled 2 ways: `TooManyRows` (functions/b/src/error.rs:6), `too_many_rows` (functions/a/src/error.rs:7); pick one (and add it to ERROR_TYPE_CONCEPTS)",
            ]
        );
        let clean = source(
            "functions/d/src/error.rs",
            "        match self {\n            Error::A => \"InternalError\",\n            Error::B => \"DeadlineTooShort\",\n        }\n",
        );
        assert!(error_type_offences(&[clean]).is_empty());
    }

    #[test]
    fn a_settings_type_not_named_config_is_reported() {
        let good = "pub struct Config {\n    pub batch: usize,\n}\n\nimpl Config {\n    /// Read it.\n    \
                    pub fn from_env(env: &dyn Env) -> Result<Self, ConfigError> {\n        todo!()\n    }\n}\n";
        assert!(config_offences("functions/a/src/config.rs", good).is_empty());
        let renamed = good.replace("Config {", "Limits {");
        assert_eq!(
            config_offences("functions/b/src/config.rs", &renamed),
            [
                "functions/b/src/config.rs: no `pub struct Config`: every function's settings type is `Config`",
                "functions/b/src/config.rs: no `pub fn from_env` in `impl Config` (`main` starts with `shared::start_or_exit(Config::from_env)`)",
            ]
        );
        // `from_env` outside the impl, or only in a test module, does not count.
        let outside = "pub struct Config;\nimpl Config {}\npub fn from_env() {}\n#[cfg(test)]\nmod tests {\n    \
                       impl Config {\n        pub fn from_env() {}\n    }\n}\n";
        assert_eq!(
            config_offences("functions/c/src/config.rs", outside).len(),
            1
        );
    }

    #[test]
    fn a_long_tooling_function_is_reported_unless_allowed() {
        let steps = |n: usize| "    step();\n".repeat(n);
        let source = format!(
            "fn short() {{\n{}}}\n\nimpl X {{\n    pub(crate) async fn long(\n        a: u8,\n    ) -> [u8; 2]\n    \
             where\n        u8: Copy,\n    {{\n{}    }}\n}}\ntrait T {{\n    fn declared(&self);\n}}\n\
             const S: &str = \"fn in_a_string() {{\";\n// fn in_a_comment() {{\nfn g(f: fn(u8) -> u8) {{}}\n",
            steps(3),
            steps(4)
        );
        assert_eq!(
            long_function_offences("tools/x.rs", &source, 5, &[]),
            ["tools/x.rs:8: `fn long` is 11 lines, more than 5: split it into steps with names"]
        );
        assert!(long_function_offences("tools/x.rs", &source, 5, &["long"]).is_empty());
        assert!(long_function_offences("tools/x.rs", &source, 11, &[]).is_empty());
    }
}

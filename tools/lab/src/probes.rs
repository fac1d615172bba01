//! The lab's probes: small programs that run the functions' real code and
//! print one JSON line. The generic ones are the examples of
//! `tools/lab/probes`; a function's own are the examples of its lab crate,
//! `functions/<name>/lab/`, each named `<binary>-<kind>` (`order-processor-memory`,
//! `arrow-worker-plan`, ...): the lab finds them through `cargo metadata`
//! and runs the sections their kinds serve for the functions that have
//! them. Built once per allocator, so every allocator runs the same code.

use local_stack::cgroup::Cgroup;
use local_stack::template::Function;
use local_stack::{tools, workspace_root};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The allocator the functions ship with (mimalloc 2.x).
pub const SHIPPED: &str = "mimalloc";
/// The `mimalloc` crate's default build, mimalloc 3.3, measured beside the
/// 2.x the workspace ships (not shipped: open crash reports; see the
/// workspace's `Cargo.toml`). Its probes are built from a copy of the
/// workspace whose `Cargo.toml` drops the `v2` feature.
pub const MIMALLOC_3: &str = "mimalloc-3.3";
/// The allocators a function can declare (the probes' cargo features), and
/// mimalloc 3.3 for comparison.
pub const ALLOCATORS: [&str; 5] = ["system", SHIPPED, MIMALLOC_3, "jemalloc", "snmalloc"];
/// The workspace's `Cargo.toml` selects mimalloc 2.x with these, twice (the
/// `mimalloc` crate and `libmimalloc-sys`).
const V2_FEATURES: &str = r#"features = ["extended", "v2"]"#;
/// What the copy of [`MIMALLOC_3`] has in their place.
const V3_FEATURES: &str = r#"features = ["extended"]"#;
/// The package of the generic probes.
const GENERIC: &str = "lab-probes";
/// Where a function's lab crate is, under the function's folder.
const FUNCTION_LAB: &str = "lab";
/// The Cargo profile of the full lab: release optimisation without fat LTO.
const PROFILE: &str = "lab";

/// Where each allocator's probes are.
#[derive(Debug, Clone)]
pub struct Probes {
    dirs: Vec<(&'static str, PathBuf)>,
    /// Every probe's name, with its package's folder.
    names: Vec<(String, PathBuf)>,
}

pub use local_stack::target_dir;
pub use local_stack::tools::BOOTSTRAPS;

/// The name of `binary`'s probe of `kind`.
pub fn of(binary: &str, kind: &str) -> String {
    format!("{binary}-{kind}")
}

impl Probes {
    /// The suite's own debug builds (default allocator only): `cargo test`
    /// builds examples, so in the suite this compiles nothing new. With
    /// [`BOOTSTRAPS`] set (the lab run on a scratch copy of the project, whose
    /// functions `sam build` built), nothing is built: the probes are this
    /// workspace's, in the shared target folder.
    pub fn debug() -> Result<Self, String> {
        if std::env::var_os(BOOTSTRAPS).is_none() {
            tools::run(local_stack::cargo().args(["test", "--workspace", "--no-run", "--quiet"]))?;
        }
        Ok(Self {
            names: names(&packages()?),
            dirs: vec![("mimalloc", target_dir().join("debug").join("examples"))],
        })
    }

    /// Optimised builds, one per allocator in `allocators`, each copied aside
    /// (the next build overwrites `target/lab/examples`). `progress` hears
    /// each step.
    pub fn optimised(allocators: &[&'static str], progress: &dyn Fn(&str)) -> Result<Self, String> {
        let target = target_dir();
        let packages = packages()?;
        let names = names(&packages);
        let mut dirs = Vec::new();
        for &allocator in allocators {
            progress(&format!("building the probes with {allocator}"));
            let mut build = local_stack::cargo();
            build.args(["build", "--quiet", "--profile", PROFILE, "--examples"]);
            for Package { name: package, .. } in &packages {
                build.args(["--package", package]);
            }
            let feature = if allocator == MIMALLOC_3 {
                SHIPPED
            } else {
                allocator
            };
            let features: Vec<String> = packages
                .iter()
                .map(|package| format!("{}/{feature}", package.name))
                .collect();
            build.args(["--features", &features.join(",")]);
            if allocator == MIMALLOC_3 {
                // Same target directory: only what the feature changes builds again.
                build
                    .arg("--manifest-path")
                    .arg(mimalloc_3_workspace(&target)?.join("Cargo.toml"))
                    .env("CARGO_TARGET_DIR", &target);
            }
            tools::run(&mut build)?;
            let dir = target.join("lab-probes").join(allocator);
            std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            for (probe, _) in &names {
                let from = target.join(PROFILE).join("examples").join(probe);
                std::fs::copy(&from, dir.join(probe))
                    .map_err(|e| format!("{} -> {}: {e}", from.display(), dir.display()))?;
            }
            dirs.push((allocator, dir));
        }
        Ok(Self { dirs, names })
    }

    /// Whether a probe `name` was built.
    pub fn has(&self, name: &str) -> bool {
        self.names.iter().any(|(n, _)| n == name)
    }

    /// The folder of the package of probe `name`, relative to the workspace.
    pub fn folder(&self, name: &str) -> Option<&Path> {
        let (_, dir) = self.names.iter().find(|(n, _)| n == name)?;
        Some(dir.strip_prefix(workspace_root()).unwrap_or(dir))
    }

    /// The functions of `functions`, in their order, that have a probe of `kind`.
    pub fn offering<'a>(
        &self,
        functions: &'a [Function],
        kind: &str,
    ) -> impl Iterator<Item = &'a Function> {
        let kind = kind.to_owned();
        functions
            .iter()
            .filter(move |f| self.has(&of(&f.binary, &kind)))
    }

    /// The allocators built.
    pub fn allocators(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.dirs.iter().map(|(name, _)| *name)
    }

    /// The program `probe` as built with `allocator`.
    pub fn path(&self, allocator: &str, probe: &str) -> Result<PathBuf, String> {
        self.dirs
            .iter()
            .find(|(name, _)| *name == allocator)
            .map(|(_, dir)| dir.join(probe))
            .ok_or_else(|| format!("no probes built with {allocator}"))
    }

    /// Run `probe` as built with `allocator`, with `args` and `env`; its JSON line.
    pub fn run(
        &self,
        allocator: &str,
        probe: &str,
        args: &[String],
        env: &[(&str, &str)],
    ) -> Result<serde_json::Value, String> {
        run_json(Command::new(self.path(allocator, probe)?), args, env)
    }

    /// [`Probes::run`] inside `cgroup` (its CPU quota and memory limit from
    /// the probe's first instruction), or without limits if `None`.
    pub fn run_in(
        &self,
        cgroup: Option<&Cgroup>,
        allocator: &str,
        probe: &str,
        args: &[String],
        env: &[(&str, &str)],
    ) -> Result<serde_json::Value, String> {
        let program = self.path(allocator, probe)?;
        let command = cgroup.map_or_else(|| Command::new(&program), |c| c.command(&program));
        run_json(command, args, env)
    }
}

/// A package of probes.
struct Package {
    name: String,
    /// Its folder.
    dir: PathBuf,
    /// Its examples: the probes.
    examples: Vec<String>,
}

/// Every probe of `packages`, with its package's folder.
fn names(packages: &[Package]) -> Vec<(String, PathBuf)> {
    packages
        .iter()
        .flat_map(|p| p.examples.iter().map(|e| (e.clone(), p.dir.clone())))
        .collect()
}

/// The probe packages and their examples: the generic one and every
/// function's lab crate (`functions/<name>/lab/`), as `cargo metadata` lists them.
fn packages() -> Result<Vec<Package>, String> {
    let mut metadata = local_stack::cargo();
    metadata.args(["metadata", "--no-deps", "--format-version", "1", "--quiet"]);
    let json: serde_json::Value = serde_json::from_str(&stdout(&mut metadata)?)
        .map_err(|e| format!("cargo metadata: {e}"))?;
    // `functions/<name>/lab/Cargo.toml`
    let is_probes = |package: &serde_json::Value| {
        let manifest = Path::new(package["manifest_path"].as_str().unwrap_or_default());
        let folder = manifest.parent();
        let functions = folder.and_then(Path::parent).and_then(Path::parent);
        package["name"] == GENERIC
            || (folder.and_then(Path::file_name) == Some(FUNCTION_LAB.as_ref())
                && functions.and_then(Path::file_name) == Some("functions".as_ref()))
    };
    Ok(json["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|package| is_probes(package))
        .map(|package| {
            let examples = package["targets"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|t| {
                    t["kind"]
                        .as_array()
                        .is_some_and(|k| k.iter().any(|k| k == "example"))
                })
                .filter_map(|t| t["name"].as_str().map(str::to_owned))
                .collect();
            let manifest = Path::new(package["manifest_path"].as_str().unwrap_or_default());
            Package {
                name: package["name"].as_str().unwrap_or_default().to_owned(),
                dir: manifest.parent().unwrap_or(manifest).to_owned(),
                examples,
            }
        })
        .collect())
}

/// Run `command` and parse the last line of its output as JSON.
fn run_json(
    mut command: Command,
    args: &[String],
    env: &[(&str, &str)],
) -> Result<serde_json::Value, String> {
    command
        .args(args)
        .envs(env.iter().copied())
        // Quiet, and the same everywhere: the probes log nothing we need.
        .env("RUST_LOG", "off");
    let stdout = stdout(&mut command)?;
    let line = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(line).map_err(|e| {
        format!(
            "{}: not a JSON line ({e}): {line}",
            tools::describe(&command)
        )
    })
}

/// What `command` printed, or an error naming it with its status and stderr.
fn stdout(command: &mut Command) -> Result<String, String> {
    let output = command
        .output()
        .map_err(|e| format!("{}: {e}", tools::describe(command)))?;
    if !output.status.success() {
        return Err(format!(
            "{} failed ({}): {}",
            tools::describe(command),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// A copy of the workspace under `target` whose `Cargo.toml` builds mimalloc
/// 3.3 (the `mimalloc` crate's default): its manifest's folder.
fn mimalloc_3_workspace(target: &Path) -> Result<PathBuf, String> {
    let root = workspace_root();
    let copy = target.join("lab-mimalloc-3");
    if copy.exists() {
        std::fs::remove_dir_all(&copy).map_err(|e| format!("{}: {e}", copy.display()))?;
    }
    copy_sources(&root, &copy)?;
    let manifest = copy.join("Cargo.toml");
    let text =
        std::fs::read_to_string(&manifest).map_err(|e| format!("{}: {e}", manifest.display()))?;
    if text.matches(V2_FEATURES).count() != 2 {
        return Err(format!(
            "{}: expected `{V2_FEATURES}` on the `mimalloc` and `libmimalloc-sys` lines, to build {MIMALLOC_3} without it",
            root.join("Cargo.toml").display()
        ));
    }
    std::fs::write(&manifest, text.replace(V2_FEATURES, V3_FEATURES))
        .map_err(|e| format!("{}: {e}", manifest.display()))?;
    Ok(copy)
}

/// Copy the workspace's sources from `from` to `to`: everything but build
/// output and hidden folders (`target`, `.git`, `.tools`, ...).
fn copy_sources(from: &Path, to: &Path) -> Result<(), String> {
    std::fs::create_dir_all(to).map_err(|e| format!("{}: {e}", to.display()))?;
    let entries = std::fs::read_dir(from).map_err(|e| format!("{}: {e}", from.display()))?;
    for entry in entries {
        let entry = entry.map_err(|e| format!("{}: {e}", from.display()))?;
        let name = entry.file_name();
        if name == "target" || name.to_string_lossy().starts_with('.') {
            continue;
        }
        let (source, dest) = (entry.path(), to.join(&name));
        let kind = entry
            .file_type()
            .map_err(|e| format!("{}: {e}", source.display()))?;
        if kind.is_dir() {
            copy_sources(&source, &dest)?;
        } else if kind.is_file() {
            std::fs::copy(&source, &dest)
                .map_err(|e| format!("{} -> {}: {e}", source.display(), dest.display()))?;
        }
    }
    Ok(())
}

//! The lab's probes: small programs in `tools/lab/probes/examples/` that run the
//! functions' real code and print one JSON line. Built once per allocator, so
//! every allocator runs the same code.

use local_stack::cgroup::Cgroup;
use local_stack::{tools, workspace_root};
use std::path::PathBuf;
use std::process::Command;

/// The allocators a function can declare (the probes' cargo features).
pub const ALLOCATORS: [&str; 4] = ["system", "mimalloc", "jemalloc", "snmalloc"];
/// The order processor's `DEAD_LETTER_QUEUE_URL` in the probes: checked at
/// cold start, never called (the probes keep dead letters in memory).
pub const DEAD_LETTER_QUEUE_URL: &str =
    "https://sqs.us-east-1.amazonaws.com/123456789012/OrdersDeadLetterQueue";
/// The package of the probes.
const PACKAGE: &str = "lab-probes";
/// The probes, one per function.
const PROBES: [&str; 7] = [
    "lab_export",
    "lab_orders",
    "lab_concurrency",
    "lab_prewarm",
    "lab_bcrypt",
    "lab_hello",
    "lab_tls",
];
/// The Cargo profile of the full lab: release optimisation without fat LTO.
const PROFILE: &str = "lab";

/// Where each allocator's probes are.
#[derive(Debug, Clone)]
pub struct Probes {
    dirs: Vec<(&'static str, PathBuf)>,
}

impl Probes {
    /// The suite's own debug builds (default allocator only): `cargo test`
    /// builds examples, so in the suite this compiles nothing new.
    pub fn debug() -> Result<Self, String> {
        tools::run(local_stack::cargo().args(["test", "--workspace", "--no-run", "--quiet"]))?;
        Ok(Self {
            dirs: vec![(
                "mimalloc",
                workspace_root()
                    .join("target")
                    .join("debug")
                    .join("examples"),
            )],
        })
    }

    /// Optimised builds, one per allocator in `allocators`, each copied aside
    /// (the next build overwrites `target/lab/examples`). `progress` hears
    /// each step.
    pub fn optimised(allocators: &[&'static str], progress: &dyn Fn(&str)) -> Result<Self, String> {
        let target = workspace_root().join("target");
        let mut dirs = Vec::new();
        for &allocator in allocators {
            progress(&format!("building the probes with {allocator}"));
            let mut build = local_stack::cargo();
            build.args([
                "build",
                "--quiet",
                "--profile",
                PROFILE,
                "--examples",
                "--package",
                PACKAGE,
                "--features",
                allocator,
            ]);
            tools::run(&mut build)?;
            let dir = target.join("lab-probes").join(allocator);
            std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            for probe in PROBES {
                let from = target.join(PROFILE).join("examples").join(probe);
                std::fs::copy(&from, dir.join(probe))
                    .map_err(|e| format!("{} -> {}: {e}", from.display(), dir.display()))?;
            }
            dirs.push((allocator, dir));
        }
        Ok(Self { dirs })
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
    let output = command
        .output()
        .map_err(|e| format!("{}: {e}", tools::describe(&command)))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        return Err(format!(
            "{} failed ({}): {}",
            tools::describe(&command),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    let line = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(line).map_err(|e| {
        format!(
            "{}: not a JSON line ({e}): {line}",
            tools::describe(&command)
        )
    })
}

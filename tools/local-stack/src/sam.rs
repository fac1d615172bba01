//! The SAM CLI from the pinned venv, and the builds made with it.

use crate::{tools, workspace_root};
use std::process::Command;

/// Run `sam` from the venv, offline-friendly: no telemetry, a default region.
pub fn sam(args: &[&str]) -> Result<(), String> {
    sam_with(args, &[])
}

/// [`sam`] with extra environment variables.
pub fn sam_with(args: &[&str], env: &[(&str, &str)]) -> Result<(), String> {
    tools::run(command(args).envs(env.iter().copied()))
}

/// The `sam` command of [`sam`], not yet run.
pub fn command(args: &[&str]) -> Command {
    let mut command = Command::new(tools::venv_bin().join("sam"));
    command
        .current_dir(workspace_root())
        .args(args)
        .env("PATH", tools::path_with_venv())
        .env("SAM_CLI_TELEMETRY", "0")
        .env("AWS_DEFAULT_REGION", crate::local_aws::REGION);
    crate::without_cargo_run_variables(&mut command);
    command
}

/// Which build of the functions `sam build` makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Build {
    /// Cargo's dev profile (`SAM_BUILD_MODE=debug`: `cargo lambda build`
    /// without `--release`): minutes from nothing instead of the release
    /// build's fat-LTO link of every function. For trying the application
    /// (`cargo xtask run`), the suite's `sam build` and `sam local invoke` steps.
    Quick,
    /// What `sam build` ships (the release profile, fat LTO): `cargo xtask run
    /// --release`, the lab, `sam deploy`.
    Release,
}

impl Build {
    /// Where this build's `template.yaml` and bootstraps go.
    pub fn dir(self) -> &'static str {
        match self {
            Build::Quick => "target/sam-build-quick",
            Build::Release => X86_64_BUILD_DIR,
        }
    }

    /// Run `sam build` of this kind (x86_64); its folder.
    pub fn run(self) -> Result<std::path::PathBuf, String> {
        tools::install()?;
        let mode: &[(&str, &str)] = match self {
            Build::Quick => &[("SAM_BUILD_MODE", "debug")],
            Build::Release => &[],
        };
        sam_with(&["build", "--build-dir", self.dir()], mode)?;
        Ok(workspace_root().join(self.dir()))
    }
}

/// The x86_64 release bootstrap of the function `binary` (its package's name
/// too) built as `sam build` builds it (`cargo lambda build --release`, into
/// the workspace's `target/`, so sharing its compiled dependencies), with
/// cargo's feature flags `features` (`--no-default-features`): the lab's size
/// of a function without a feature. Where cargo-lambda put it.
pub fn release_bootstrap(binary: &str, features: &[&str]) -> Result<std::path::PathBuf, String> {
    tools::install()?;
    let target = workspace_root().join("target");
    let mut command = Command::new("cargo");
    command
        .current_dir(workspace_root())
        .args([
            "lambda",
            "build",
            "--release",
            "--package",
            binary,
            "--bin",
            binary,
        ])
        .args(features)
        .env("PATH", tools::path_with_venv())
        .env("CARGO_TARGET_DIR", &target);
    crate::without_cargo_run_variables(&mut command);
    tools::run(&mut command)?;
    Ok(target.join("lambda").join(binary).join("bootstrap"))
}

/// Build the release bootstraps of both architectures from the code as it is
/// now (`sam build`, [`build_arm64`]): measuring bootstraps left from older
/// code would report figures of code that is gone. Cargo rebuilds only what
/// changed.
pub fn release_builds() -> Result<(), String> {
    Build::Release.run()?;
    build_arm64()
}

/// Where [`build_arm64`] builds.
pub const ARM64_BUILD_DIR: &str = ".aws-sam/build-arm64";
/// Where `sam build` builds by default (x86_64, the template's default).
pub const X86_64_BUILD_DIR: &str = ".aws-sam/build";

/// Cross-build the three functions for Graviton with `sam build` (cargo-lambda
/// links with zig, which its PyPI package brings), then check that every
/// `bootstrap` is an arm64 Linux executable.
/// `cargo test ARGS` built for arm64 (Debian's cross gcc as linker) and run
/// under `qemu-aarch64`, the packages of [`tools::ARM64_TEST_PACKAGES`]
/// installed first: e.g. the hasher's differential tests on the architecture
/// its lanes are chosen for separately.
pub fn test_arm64(args: &[&str]) -> Result<(), String> {
    tools::install_debian(tools::ARM64_TEST_PACKAGES)?;
    tools::run(Command::new("rustup").args(["target", "add", "aarch64-unknown-linux-gnu"]))?;
    tools::run(
        crate::cargo()
            .args(["test", "--target", "aarch64-unknown-linux-gnu"])
            .args(args)
            .env(
                "CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER",
                "aarch64-linux-gnu-gcc",
            )
            .env("CC_aarch64_unknown_linux_gnu", "aarch64-linux-gnu-gcc")
            .env(
                "CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER",
                "qemu-aarch64 -L /usr/aarch64-linux-gnu",
            ),
    )
}

pub fn build_arm64() -> Result<(), String> {
    tools::install()?;
    tools::run(Command::new("rustup").args(["target", "add", "aarch64-unknown-linux-gnu"]))?;
    sam(&[
        "build",
        "--build-dir",
        ARM64_BUILD_DIR,
        "--parameter-overrides",
        "Architecture=arm64",
    ])?;
    let template = crate::template::Template::load(&workspace_root().join("template.yaml"))?;
    for function in template.functions()? {
        let bootstrap = workspace_root()
            .join(ARM64_BUILD_DIR)
            .join(&function.logical_id)
            .join("bootstrap");
        let bytes =
            std::fs::read(&bootstrap).map_err(|e| format!("{}: {e}", bootstrap.display()))?;
        // ELF magic, then e_machine (little-endian u16 at offset 18): 183 is AArch64.
        let machine = bytes.get(18..20).map(|m| u16::from_le_bytes([m[0], m[1]]));
        if !bytes.starts_with(b"\x7fELF") || machine != Some(183) {
            return Err(format!(
                "{} is not an arm64 ELF executable (e_machine {machine:?})",
                bootstrap.display()
            ));
        }
        println!(
            "{}: arm64 ELF, {:.1} MiB",
            bootstrap.display(),
            bytes.len() as f64 / (1 << 20) as f64
        );
    }
    Ok(())
}

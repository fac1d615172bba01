//! The pinned versions of every tool the project installs, where they live,
//! and their install: a crate of its own, on the standard library alone, so
//! that `cargo xtask tools` (and the suite's first step, while the tests
//! build) installs them without building the local stack.
//!
//! Everything goes under `.tools/` in the workspace (ignored by git); nothing is
//! installed globally. Re-running [`install`] only checks what is present.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The variable naming another copy of this project for the tools to work on
/// instead of the one they were built in: its `template.yaml`, functions and
/// sample events (the suite runs the end-to-end tests built here on a scratch
/// copy's `sam build` this way, with `E2E_BOOTSTRAPS`).
pub const PROJECT: &str = "E2E_PROJECT";

/// The variable naming a `sam build` folder whose bootstraps the end-to-end
/// tests and the quick lab run instead of this workspace's debug builds.
pub const BOOTSTRAPS: &str = "E2E_BOOTSTRAPS";

/// Where cargo builds: `CARGO_TARGET_DIR`, else the workspace's `target/`.
pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| workspace_root().join("target"), PathBuf::from)
}

/// The workspace root (where `template.yaml` lives): this crate is
/// `tools/pinned-tools/` in it, unless [`PROJECT`] names another copy.
pub fn workspace_root() -> PathBuf {
    if let Some(project) = std::env::var_os(PROJECT) {
        return PathBuf::from(project);
    }
    let manifest_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest_dir
        .ancestors()
        .nth(2)
        .map_or(manifest_dir.clone(), PathBuf::from)
}

/// `cargo`, the one running this program if any (`CARGO`), else the one on
/// `PATH`, in the workspace root, without the variables of
/// [`without_cargo_run_variables`].
pub fn cargo() -> Command {
    let mut command = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    command.current_dir(workspace_root());
    without_cargo_run_variables(&mut command);
    command
}

/// Remove from `command`'s environment what `cargo run` and `cargo test` set
/// for the program they start (`CARGO_PKG_NAME`, `CARGO_MANIFEST_DIR`, ...).
/// Build scripts watch some of them (ring's: `CARGO_MANIFEST_DIR`,
/// `CARGO_PKG_NAME`, ...), so a build started from such a program with them
/// would rebuild ring and everything on it (the AWS SDK, the functions)
/// whenever they differ from the last build's. Every build this project
/// starts goes without them (xtask's and the local stack's).
pub fn without_cargo_run_variables(command: &mut Command) {
    const SET_BY_CARGO: [&str; 7] = [
        "CARGO_PKG_",
        "CARGO_MANIFEST_",
        "CARGO_CRATE_",
        "CARGO_BIN_",
        "CARGO_PRIMARY_PACKAGE",
        "CARGO_TARGET_TMPDIR",
        "OUT_DIR",
    ];
    for (name, _) in std::env::vars_os() {
        let text = name.to_string_lossy();
        if SET_BY_CARGO.iter().any(|prefix| text.starts_with(prefix)) {
            command.env_remove(&name);
        }
    }
}

/// aws-sam-cli (PyPI): `sam build`, `sam validate --lint` (cfn-lint), and the
/// Lambda runtime interface emulator binary it ships.
pub const SAM_CLI_VERSION: &str = "1.170.0";
/// cargo-lambda (PyPI): the builder `sam build` runs for `rust-cargolambda`.
pub const CARGO_LAMBDA_VERSION: &str = "1.9.2";
/// checkov (PyPI): policy checks of `template.yaml`, in a venv of its own (its
/// dependencies are not aws-sam-cli's).
pub const CHECKOV_VERSION: &str = "3.3.30";
/// moto (PyPI, Apache-2.0): the local Step Functions (its state-machine
/// interpreter runs executions) and S3, in a venv of its own. Installed with
/// the extras [`MOTO_EXTRAS`].
pub const MOTO_VERSION: &str = "5.2.5";
/// moto's extras: its HTTP server, the Step Functions interpreter's parser, S3.
pub const MOTO_EXTRAS: &str = "server,stepfunctions,s3";
/// DynamoDB Local (Maven Central, `com.amazonaws:DynamoDBLocal`).
pub const DYNAMODB_LOCAL_VERSION: &str = "2.6.1";
/// ElasticMQ, an SQS-compatible server (Maven Central,
/// `org.elasticmq:elasticmq-server_2.13`).
pub const ELASTICMQ_VERSION: &str = "1.6.16";
/// Zipkin (Maven Central, `io.zipkin:zipkin-server`, its `exec` jar): the
/// local trace store and viewer the spans go to.
pub const ZIPKIN_VERSION: &str = "3.6.1";
/// The Maven plugin that copies one jar without a project (Zipkin's).
const MAVEN_DEPENDENCY_PLUGIN: &str = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1";
/// The container engine `sam local invoke` talks to, from Debian's packages
/// (`apt-cache policy` names the versions): podman serves the Docker API, runc
/// runs the containers.
pub const PODMAN_PACKAGES: &[(&str, &str)] = &[
    ("podman", "4.3.1+ds1-8+deb12u1+b3"),
    ("runc", "1.1.5+ds1-1+deb12u1"),
];

/// Debian packages that build for arm64 and run its tests here (`qemu-aarch64`).
pub const ARM64_TEST_PACKAGES: &[(&str, &str)] = &[
    ("qemu-user", "1:7.2+dfsg-7+deb12u18+b3"),
    ("gcc-aarch64-linux-gnu", "4:12.2.0-3"),
    ("libc6-arm64-cross", "2.36-8cross1"),
    ("libc6-dev-arm64-cross", "2.36-8cross1"),
];

/// `.tools/` in the workspace.
pub fn dir() -> PathBuf {
    workspace_root().join(".tools")
}

/// The Python virtual environment holding sam and cargo-lambda.
pub fn venv() -> PathBuf {
    dir().join("venv")
}

/// The venv's `bin/` folder; put it first on `PATH` for `sam` and `cargo lambda`.
pub fn venv_bin() -> PathBuf {
    venv().join("bin")
}

/// The venv holding checkov.
pub fn checkov_venv() -> PathBuf {
    dir().join("checkov-venv")
}

/// The venv holding moto.
pub fn moto_venv() -> PathBuf {
    dir().join("moto-venv")
}

/// The Python of [`moto_venv`].
pub fn moto_python() -> PathBuf {
    moto_venv().join("bin").join("python")
}

/// The launcher that runs moto's server for the local stack (see
/// `tools/local-stack/python/moto_server.py`).
pub fn moto_launcher() -> PathBuf {
    workspace_root().join("tools/local-stack/python/moto_server.py")
}

/// Where DynamoDB Local's jars are copied.
pub fn dynamodb_local_lib() -> PathBuf {
    dir()
        .join(format!("dynamodb-local-{DYNAMODB_LOCAL_VERSION}"))
        .join("lib")
}

/// Where ElasticMQ's jars are copied.
pub fn elasticmq_lib() -> PathBuf {
    dir()
        .join(format!("elasticmq-{ELASTICMQ_VERSION}"))
        .join("lib")
}

/// Zipkin's executable jar.
pub fn zipkin_jar() -> PathBuf {
    dir()
        .join(format!("zipkin-{ZIPKIN_VERSION}"))
        .join(format!("zipkin-server-{ZIPKIN_VERSION}-exec.jar"))
}

/// Where the loopback-only launcher of DynamoDB Local is compiled.
pub fn dynamodb_local_launcher() -> PathBuf {
    dynamodb_local_lib().with_file_name("launcher")
}

/// The runtime interface emulator for this machine's architecture, as shipped
/// inside the aws-sam-cli package.
pub fn emulator() -> Result<PathBuf, String> {
    let arch = match std::env::consts::ARCH {
        "x86_64" => "x86_64",
        "aarch64" => "arm64",
        other => return Err(format!("no runtime interface emulator for {other}")),
    };
    let lib = venv().join("lib");
    let entries = std::fs::read_dir(&lib)
        .map_err(|e| format!("{}: {e} (run `cargo xtask tools`)", lib.display()))?;
    entries
        .filter_map(Result::ok)
        .map(|python| {
            python
                .path()
                .join("site-packages/samcli/local/rapid")
                .join(format!("aws-lambda-rie-{arch}"))
        })
        .find(|path| path.is_file())
        .ok_or_else(|| {
            format!(
                "aws-lambda-rie-{arch} not found under {} (run `cargo xtask tools`)",
                lib.display()
            )
        })
}

/// `Ok` if `path` exists, else an error that says how to install `what`.
pub fn require(path: &std::path::Path, what: &str) -> Result<(), String> {
    if path.exists() {
        Ok(())
    } else {
        Err(format!(
            "{what} is not installed ({} is missing): run `cargo xtask tools`",
            path.display()
        ))
    }
}

/// A `PATH` with the venv first, for `sam` and `cargo lambda`.
pub fn path_with_venv() -> String {
    let mut paths = vec![venv_bin()];
    if let Some(path) = std::env::var_os("PATH") {
        paths.extend(std::env::split_paths(&path));
    }
    std::env::join_paths(paths)
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// A command that builds zig's C++ runtime for Lambda's x86_64 target into
/// zig's cache, at the lowest CPU priority (it is meant for a machine's idle
/// time), as the first `sam build` of a function with C++ in it (snmalloc)
/// builds it at its link: about 85 CPU-seconds on one core, once per machine.
/// It links an empty C program against libc++ with the flags cargo-lambda's
/// zig gives a function's link (`-g -fno-sanitize=all -target
/// x86_64-linux-gnu -m64`, a PIE), so that link finds the runtime in the
/// cache; measured, the hasher on snmalloc linked in 90 s from a cold cache
/// and in 12 s after this. Scratch files go to `dir`.
pub fn zig_cxx_warm_up(dir: &Path) -> Result<Command, String> {
    let cargo_lambda = venv_bin().join("cargo-lambda");
    require(&cargo_lambda, "cargo-lambda")?;
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let source = dir.join("empty.c");
    std::fs::write(&source, "int main(void) { return 0; }\n")
        .map_err(|e| format!("{}: {e}", source.display()))?;
    let mut command = Command::new("nice");
    command
        .args(["-n", "19"])
        .arg(cargo_lambda)
        .args(["zig", "cc", "--", "-g", "-fno-sanitize=all"])
        .args(["-target", "x86_64-linux-gnu", "-m64", "-pie", "-lc++"])
        .arg(&source)
        .arg("-o")
        .arg(dir.join("empty"))
        .env("PATH", path_with_venv());
    Ok(command)
}

/// Install every pinned tool that is missing or at another version. The
/// installs are mostly downloads: the three Python environments and the
/// Maven fetches (one after the other: they share Maven's local repository)
/// run at the same time.
pub fn install() -> Result<(), String> {
    std::fs::create_dir_all(dir()).map_err(|e| format!("{}: {e}", dir().display()))?;
    let moto = format!("moto[{MOTO_EXTRAS}]");
    let sam = [
        ("aws-sam-cli", SAM_CLI_VERSION),
        ("cargo-lambda", CARGO_LAMBDA_VERSION),
    ];
    let checkov = [("checkov", CHECKOV_VERSION)];
    let moto = [(moto.as_str(), MOTO_VERSION)];
    let (sam_venv, checkov_venv, moto_venv) = (venv(), checkov_venv(), moto_venv());
    let results: Vec<Result<(), String>> = std::thread::scope(|scope| {
        let jobs = [
            scope.spawn(|| pip_install(&sam_venv, &sam)),
            scope.spawn(|| pip_install(&checkov_venv, &checkov)),
            scope.spawn(|| pip_install(&moto_venv, &moto)),
            scope.spawn(|| {
                install_dynamodb_local()
                    .and_then(|()| install_elasticmq())
                    .and_then(|()| install_zipkin())
            }),
        ];
        jobs.map(|job| {
            job.join()
                .unwrap_or_else(|_| Err("an install panicked".to_owned()))
        })
        .into_iter()
        .collect()
    });
    results.into_iter().collect()
}

fn installed_pip_version(venv: &Path, package: &str) -> Option<String> {
    let output = Command::new(venv.join("bin").join("pip"))
        .args(["show", "--disable-pip-version-check", package])
        .output()
        .ok()?;
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .find_map(|line| line.strip_prefix("Version: ").map(str::to_owned))
}

/// Make `venv` hold exactly the `wanted` versions (creating it if needed).
/// A package may name extras (`moto[s3]`); only its version is checked.
fn pip_install(venv: &Path, wanted: &[(&str, &str)]) -> Result<(), String> {
    if wanted.iter().all(|(package, version)| {
        let name = package.split('[').next().unwrap_or(package);
        installed_pip_version(venv, name).as_deref() == Some(version)
    }) {
        return Ok(());
    }
    let pip = venv.join("bin").join("pip");
    if !pip.is_file() {
        eprintln!("tools: creating {}", venv.display());
        run(Command::new("python3").arg("-m").arg("venv").arg(venv))?;
    }
    let specs: Vec<String> = wanted
        .iter()
        .map(|(package, version)| format!("{package}=={version}"))
        .collect();
    eprintln!("tools: installing {} (a minute or two)", specs.join(", "));
    run(Command::new(pip)
        .args(["install", "--quiet", "--disable-pip-version-check"])
        .args(specs))
}

fn install_dynamodb_local() -> Result<(), String> {
    let lib = dynamodb_local_lib();
    let jar = lib.join(format!("DynamoDBLocal-{DYNAMODB_LOCAL_VERSION}.jar"));
    fetch_maven(
        "com.amazonaws:DynamoDBLocal",
        DYNAMODB_LOCAL_VERSION,
        &jar,
        "DynamoDB Local",
    )?;
    // The launcher that binds 127.0.0.1 only (see tools/local-stack/java/).
    let source = workspace_root().join("tools/local-stack/java/LoopbackDynamoDbLocal.java");
    let class = dynamodb_local_launcher().join("LoopbackDynamoDbLocal.class");
    let fresh = |from: &Path, to: &Path| {
        let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
        matches!((modified(from), modified(to)), (Some(a), Some(b)) if b >= a)
    };
    if !fresh(&source, &class) {
        run(Command::new("javac")
            .arg("-cp")
            .arg(format!("{}/*", lib.display()))
            .arg("-d")
            .arg(dynamodb_local_launcher())
            .arg(&source))?;
    }
    Ok(())
}

fn install_elasticmq() -> Result<(), String> {
    let jar = elasticmq_lib().join(format!("elasticmq-server_2.13-{ELASTICMQ_VERSION}.jar"));
    fetch_maven(
        "org.elasticmq:elasticmq-server_2.13",
        ELASTICMQ_VERSION,
        &jar,
        "ElasticMQ",
    )
}

/// Zipkin's one jar (it holds its dependencies).
fn install_zipkin() -> Result<(), String> {
    let jar = zipkin_jar();
    if jar.is_file() {
        return Ok(());
    }
    let folder = jar.parent().ok_or("a jar path has a folder")?;
    eprintln!("tools: fetching Zipkin {ZIPKIN_VERSION} from Maven Central");
    run(Command::new("mvn")
        .args(["-q", "-B"])
        .arg(format!("{MAVEN_DEPENDENCY_PLUGIN}:copy"))
        .arg(format!(
            "-Dartifact=io.zipkin:zipkin-server:{ZIPKIN_VERSION}:jar:exec"
        ))
        .arg(format!("-DoutputDirectory={}", folder.display())))?;
    fetched(&jar)
}

/// Install [`PODMAN_PACKAGES`] (see [`install_debian`]). Only for `sam local
/// invoke`: the other tools need no engine.
pub fn install_podman() -> Result<(), String> {
    install_debian(PODMAN_PACKAGES)
}

/// Whether dpkg's `${Status} ${Version}` of a package (`None`: unknown to
/// dpkg) says it is installed at `version`.
fn is_installed(status_and_version: Option<&str>, version: &str) -> bool {
    status_and_version.and_then(|s| s.strip_prefix("install ok installed ")) == Some(version)
}

/// Install `packages` (name, version) with `apt-get` unless they are there at
/// those versions. An error says why they cannot be had (not root, no
/// `apt-get`, apt failed).
pub fn install_debian(packages: &[(&str, &str)]) -> Result<(), String> {
    // The status too: a package removed but not purged keeps its version
    // in dpkg's database ("deinstall ok config-files").
    let installed = |package: &str| {
        Command::new("dpkg-query")
            .args(["--show", "--showformat=${Status} ${Version}", package])
            .output()
            .ok()
            .filter(|output| output.status.success())
            .map(|output| String::from_utf8_lossy(&output.stdout).into_owned())
    };
    let missing: Vec<String> = packages
        .iter()
        .filter(|(package, version)| !is_installed(installed(package).as_deref(), version))
        .map(|(package, version)| format!("{package}={version}"))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|output| output.stdout.trim_ascii() == b"0");
    if !root || Command::new("apt-get").arg("--version").output().is_err() {
        return Err(format!(
            "{} not installed, and installing needs root and apt-get (Debian 12)",
            missing.join(" ")
        ));
    }
    eprintln!("tools: installing {} (apt-get)", missing.join(" "));
    with_retries(|| run(Command::new("apt-get").args(["update", "-qq"])))?;
    with_retries(|| {
        run(Command::new("apt-get")
            .args(["install", "-y", "-qq", "--no-install-recommends"])
            .args(&missing)
            .env("DEBIAN_FRONTEND", "noninteractive"))
    })
}

/// `attempt` until it succeeds, at most 3 times, waiting 5 s then 20 s
/// between tries: a package mirror's failures are often transient.
fn with_retries(mut attempt: impl FnMut() -> Result<(), String>) -> Result<(), String> {
    for wait in [5, 20] {
        match attempt() {
            Ok(()) => return Ok(()),
            Err(e) => {
                eprintln!("tools: {e}; trying again in {wait} s");
                std::thread::sleep(std::time::Duration::from_secs(wait));
            }
        }
    }
    attempt()
}

/// Whether a Maven fetch left `jar` where it was asked to.
fn fetched(jar: &Path) -> Result<(), String> {
    if jar.is_file() {
        Ok(())
    } else {
        Err(format!(
            "{} is missing after the Maven fetch",
            jar.display()
        ))
    }
}

/// Copy `artifact` (`group:name`) at `version` and its dependencies from Maven
/// Central into the folder of `jar`, unless `jar` is already there.
fn fetch_maven(artifact: &str, version: &str, jar: &Path, what: &str) -> Result<(), String> {
    if jar.is_file() {
        return Ok(());
    }
    let lib = jar.parent().ok_or("a jar path has a folder")?;
    let project = lib.parent().unwrap_or(lib).to_path_buf();
    std::fs::create_dir_all(&project).map_err(|e| format!("{}: {e}", project.display()))?;
    let (group, name) = artifact
        .split_once(':')
        .ok_or_else(|| format!("{artifact} is not group:name"))?;
    // A throw-away project whose only job is to have Maven copy the jars.
    let pom = format!(
        r#"<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local</groupId>
  <artifactId>fetch</artifactId>
  <version>1</version>
  <dependencies>
    <dependency>
      <groupId>{group}</groupId>
      <artifactId>{name}</artifactId>
      <version>{version}</version>
    </dependency>
  </dependencies>
</project>
"#
    );
    std::fs::write(project.join("pom.xml"), pom).map_err(|e| format!("pom.xml: {e}"))?;
    eprintln!("tools: fetching {what} {version} from Maven Central");
    run(Command::new("mvn")
        .current_dir(&project)
        .args(["-q", "-B", "dependency:copy-dependencies"])
        .arg(format!("-DoutputDirectory={}", lib.display())))?;
    fetched(jar)
}

/// Run `command`, turning a failure into an error naming it.
pub fn run(command: &mut Command) -> Result<(), String> {
    let status = command
        .status()
        .map_err(|e| format!("{}: {e}", describe(command)))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{} failed: {status}", describe(command)))
    }
}

/// `program arg arg…` for messages.
pub fn describe(command: &Command) -> String {
    std::iter::once(command.get_program())
        .chain(command.get_args())
        .map(|s| Path::new(s).display().to_string())
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_package_counts_as_installed_only_when_dpkg_says_so_at_the_pinned_version() {
        let pinned = "4.3.1+ds1-8+deb12u1+b3";
        assert!(is_installed(
            Some("install ok installed 4.3.1+ds1-8+deb12u1+b3"),
            pinned
        ));
        for other in [
            None,
            // Removed, not purged: dpkg still knows its version.
            Some("deinstall ok config-files 4.3.1+ds1-8+deb12u1+b3"),
            Some("install ok installed 4.3.1+ds1-8"),
            Some("install ok half-configured 4.3.1+ds1-8+deb12u1+b3"),
        ] {
            assert!(!is_installed(other, pinned), "{other:?}");
        }
    }
}

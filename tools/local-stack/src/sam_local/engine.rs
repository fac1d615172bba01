//! The project's own podman: configuration, image store, socket and the
//! locally built Lambda base image, all under `.tools/podman/`.

use super::*;
use crate::process::Guard;
use crate::tools;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The project's own podman: configuration, image store and socket under
/// `.tools/podman/`.
pub(super) struct Engine {
    dir: PathBuf,
}

/// This machine's certificate authorities (Debian's bundle), copied into the
/// base image: Lambda's images hold Amazon Linux's, and a function's TLS
/// client refuses to start without any.
const CA_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";
/// Where Amazon Linux 2023 keeps its bundle, inside the base image.
const AL2023_CA_BUNDLE: &str = "etc/pki/tls/certs/ca-bundle.crt";

impl Engine {
    pub(super) fn new() -> Result<Self, String> {
        let dir = tools::dir().join("podman");
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        // A unix socket path has at most 107 bytes.
        if dir.join("podman.sock").as_os_str().len() > 100 {
            return Err(format!(
                "{} is too long a path for podman's socket",
                dir.display()
            ));
        }
        Ok(Self { dir })
    }

    pub(super) fn socket(&self) -> PathBuf {
        self.dir.join("podman.sock")
    }

    pub(super) fn docker_host(&self) -> String {
        format!("unix://{}", self.socket().display())
    }

    /// Write the configuration: `env` is given to every container.
    pub(super) fn configure(&self, env: &[(&str, &str)]) -> Result<(), String> {
        write(
            &self.dir.join("containers.conf"),
            &containers_conf(&self.dir, env),
        )?;
        write(&self.dir.join("storage.conf"), &storage_conf(&self.dir))
    }

    /// `podman` with this engine's configuration.
    pub(super) fn podman(&self, args: &[&str]) -> Command {
        let mut command = Command::new("podman");
        command
            .args(args)
            .env("CONTAINERS_CONF", self.dir.join("containers.conf"))
            .env("CONTAINERS_STORAGE_CONF", self.dir.join("storage.conf"));
        command
    }

    /// The standard output of `podman ARGS`, or an error with its standard error.
    fn output(&self, args: &[&str]) -> Result<String, String> {
        let mut command = self.podman(args);
        let output = command
            .output()
            .map_err(|e| format!("{}: {e}", tools::describe(&command)))?;
        if output.status.success() {
            Ok(String::from_utf8_lossy(&output.stdout).into_owned())
        } else {
            Err(format!(
                "{} failed: {}",
                tools::describe(&command),
                String::from_utf8_lossy(&output.stderr).trim()
            ))
        }
    }

    /// Remove every container of this engine's store (all are ours: left by
    /// an interrupted run, if any).
    pub(super) fn remove_containers(&self) -> Result<(), String> {
        self.output(&["rm", "--all", "--force"]).map(drop)
    }

    /// Make the base image SAM builds on, unless the one there holds the same
    /// files; a new one makes SAM build its emulation image again.
    pub(super) fn ensure_base_image(&self, bootstraps: &[PathBuf]) -> Result<(), String> {
        let mut programs = Vec::new();
        for program in BASE_PROGRAMS {
            programs.push(which(program)?);
        }
        let mut files = libraries(programs.iter().chain(bootstraps))?;
        // The functions' HTTPS clients trust the system's roots, as on Lambda.
        files.insert(PathBuf::from(CA_BUNDLE));
        let manifest = manifest(&files, &programs)?;
        let manifest_file = self.dir.join("base-image.txt");
        let tag = base_tag();
        let exists = self
            .podman(&["image", "exists", &tag])
            .status()
            .is_ok_and(|s| s.success());
        if exists && std::fs::read_to_string(&manifest_file).ok() == Some(manifest.clone()) {
            return Ok(());
        }
        eprintln!("sam-local: building {tag} from this machine's libraries");
        let rootfs = self.base_rootfs(&files, &programs)?;
        self.import_base_image(&rootfs, &tag)?;
        write(&manifest_file, &manifest)
    }

    /// A fresh root file system for the base image: the folders Lambda has,
    /// `files` at their paths and `programs` in `/bin`.
    fn base_rootfs(
        &self,
        files: &BTreeSet<PathBuf>,
        programs: &[PathBuf],
    ) -> Result<PathBuf, String> {
        let rootfs = self.dir.join("base-rootfs");
        if rootfs.exists() {
            std::fs::remove_dir_all(&rootfs).map_err(|e| format!("{}: {e}", rootfs.display()))?;
        }
        for dir in ["bin", "tmp", "var/task", "var/runtime", "opt"] {
            let dir = rootfs.join(dir);
            std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        }
        let copy = |from: &Path, to: PathBuf| {
            if let Some(parent) = to.parent() {
                std::fs::create_dir_all(parent)
                    .map_err(|e| format!("{}: {e}", parent.display()))?;
            }
            std::fs::copy(from, &to)
                .map(drop)
                .map_err(|e| format!("{} -> {}: {e}", from.display(), to.display()))
        };
        for file in files {
            copy(file, rootfs.join(file.strip_prefix("/").unwrap_or(file)))?;
        }
        for program in programs {
            copy(program, rootfs.join("bin").join(file_name(program)))?;
        }
        // Where Amazon Linux 2023 keeps the same bundle.
        copy(Path::new(CA_BUNDLE), rootfs.join(AL2023_CA_BUNDLE))?;
        Ok(rootfs)
    }

    /// `rootfs` imported as [`BASE_IMAGE`] with Lambda's environment, tagged
    /// `tag`; the emulation images SAM built on the previous one removed.
    fn import_base_image(&self, rootfs: &Path, tag: &str) -> Result<(), String> {
        let tar = self.dir.join("base-rootfs.tar");
        tools::run(
            Command::new("tar")
                .arg("-C")
                .arg(rootfs)
                .arg("-cf")
                .arg(&tar)
                .arg("."),
        )?;
        let tar = tar.to_string_lossy();
        self.output(&[
            "import",
            "--change",
            "ENV=PATH=/usr/local/bin:/usr/bin:/bin",
            "--change",
            "ENV=LAMBDA_TASK_ROOT=/var/task",
            "--change",
            "ENV=LAMBDA_RUNTIME_DIR=/var/runtime",
            "--change",
            "WORKDIR=/var/task",
            &tar,
            BASE_IMAGE,
        ])?;
        self.output(&["tag", BASE_IMAGE, tag])?;
        let stale = self.output(&[
            "images",
            "--quiet",
            "--filter",
            &format!("reference={EMULATION_IMAGES}"),
        ])?;
        for image in stale.split_whitespace() {
            self.output(&["rmi", "--force", image])?;
        }
        Ok(())
    }

    /// The gateway address of the default network: the host as containers
    /// reach it. Starting one container first makes the engine create the
    /// network's bridge.
    pub(super) fn gateway(&self) -> Result<IpAddr, String> {
        self.output(&["run", "--rm", BASE_IMAGE, "/bin/sh", "-c", "true"])?;
        let format = "{{range .Subnets}}{{.Gateway}} {{end}}";
        let gateways = self.output(&["network", "inspect", NETWORK, "--format", format])?;
        gateways
            .split_whitespace()
            .find_map(|gateway| gateway.parse::<Ipv4Addr>().ok())
            .map(IpAddr::V4)
            .ok_or_else(|| format!("network {NETWORK} has no IPv4 gateway: {gateways:?}"))
    }

    /// Start `podman system service` on the socket, in a process group of its
    /// own (stopped when the guard drops), once the socket is there.
    pub(super) fn serve(&self, log: &Path) -> Result<Guard, String> {
        let socket = self.socket();
        if socket.exists() {
            std::fs::remove_file(&socket).map_err(|e| format!("{}: {e}", socket.display()))?;
        }
        let log = std::fs::File::create(log).map_err(|e| format!("{}: {e}", log.display()))?;
        let guard = Guard::spawn(
            "podman system service",
            self.podman(&["system", "service", "--time=0", &self.docker_host()])
                .stdin(Stdio::null())
                .stdout(log.try_clone().map_err(|e| e.to_string())?)
                .stderr(log),
        )?;
        let deadline = Instant::now() + Duration::from_secs(30);
        while !socket.exists() {
            if Instant::now() >= deadline {
                return Err(format!(
                    "podman made no socket {} within 30 s",
                    socket.display()
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(guard)
    }
}

/// The tag SAM asks for on this machine's architecture.
fn base_tag() -> String {
    let arch = if std::env::consts::ARCH == "aarch64" {
        "arm64"
    } else {
        "x86_64"
    };
    format!("{BASE_IMAGE}-{arch}")
}

/// `containers.conf` for the engine in `dir`; `env` goes to every container.
fn containers_conf(dir: &Path, env: &[(&str, &str)]) -> String {
    let path = |name: &str| toml_string(&dir.join(name).to_string_lossy());
    let env: Vec<String> = std::iter::once("PATH=/usr/local/bin:/usr/bin:/bin".to_owned())
        .chain(env.iter().map(|(key, value)| format!("{key}={value}")))
        .map(|pair| toml_string(&pair))
        .collect();
    format!(
        "# The local stack's own podman (sam local invoke); rewritten on each run.\n\
         [containers]\n\
         default_ulimits = [\"nofile=4096:4096\", \"nproc=4096:4096\"]\n\
         env = [{}]\n\
         [engine]\n\
         runtime = \"runc\"\n\
         cgroup_manager = \"cgroupfs\"\n\
         events_logger = \"file\"\n\
         events_logfile_path = {}\n\
         tmp_dir = {}\n\
         volume_path = {}\n\
         [network]\n\
         network_config_dir = {}\n",
        env.join(", "),
        path("events.log"),
        path("tmp"),
        path("volumes"),
        path("networks"),
    )
}

/// `storage.conf` for the engine in `dir`: images and containers under it.
fn storage_conf(dir: &Path) -> String {
    let path = |name: &str| toml_string(&dir.join(name).to_string_lossy());
    format!(
        "[storage]\ndriver = \"overlay\"\ngraphroot = {}\nrunroot = {}\n",
        path("storage"),
        path("run")
    )
}

/// `text` as a TOML basic string.
fn toml_string(text: &str) -> String {
    Value::String(text.to_owned()).to_string()
}

/// The files `binaries` load (`ldd`), each binary checked to exist first.
fn libraries<'a>(binaries: impl Iterator<Item = &'a PathBuf>) -> Result<BTreeSet<PathBuf>, String> {
    let mut files = BTreeSet::new();
    for binary in binaries {
        tools::require(binary, "the sam build output")?;
        let output = Command::new("ldd")
            .arg(binary)
            .output()
            .map_err(|e| format!("ldd: {e}"))?;
        files.extend(ldd_paths(&String::from_utf8_lossy(&output.stdout)));
    }
    Ok(files)
}

/// What the base image holds: each of `files` with its size, then each of
/// `programs` at its place in `/bin`.
fn manifest(files: &BTreeSet<PathBuf>, programs: &[PathBuf]) -> Result<String, String> {
    let mut manifest = String::new();
    for file in files {
        let size = std::fs::metadata(file).map_err(|e| format!("{}: {e}", file.display()))?;
        manifest.push_str(&format!("{} {}\n", file.display(), size.len()));
    }
    for program in programs {
        manifest.push_str(&format!("/bin/{}\n", file_name(program)));
    }
    Ok(manifest)
}

/// The files `ldd` names: libraries (`name => /path (0x…)`) and the loader
/// (`/path (0x…)`); not the vDSO.
fn ldd_paths(ldd_output: &str) -> Vec<PathBuf> {
    ldd_output
        .lines()
        .filter_map(|line| {
            let target = line.split_once("=>").map_or(line, |(_, target)| target);
            target.split_whitespace().next()
        })
        .filter(|path| path.starts_with('/'))
        .map(PathBuf::from)
        .collect()
}

/// `program` on `PATH`.
fn which(program: &str) -> Result<PathBuf, String> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
        .ok_or_else(|| format!("{program} is not on PATH"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ldd_output_names_the_libraries_and_the_loader() {
        let output = "\tlinux-vdso.so.1 (0x00007ffd)\n\
                      \tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f10)\n\
                      \t/lib64/ld-linux-x86-64.so.2 (0x00007f20)\n\
                      \tlibmissing.so => not found\n";
        assert_eq!(
            ldd_paths(output),
            [
                PathBuf::from("/lib/x86_64-linux-gnu/libc.so.6"),
                PathBuf::from("/lib64/ld-linux-x86-64.so.2")
            ]
        );
        assert!(ldd_paths("\tstatically linked\n").is_empty());
    }

    #[test]
    fn the_engine_configuration_keeps_to_its_folder_and_quotes_values() {
        let dir = Path::new("/w/.tools/podman");
        let conf = containers_conf(dir, &[("AWS_ENDPOINT_URL_SQS", "http://10.88.0.1:9\"x")]);
        for line in [
            "runtime = \"runc\"",
            "cgroup_manager = \"cgroupfs\"",
            "tmp_dir = \"/w/.tools/podman/tmp\"",
            "network_config_dir = \"/w/.tools/podman/networks\"",
            "env = [\"PATH=/usr/local/bin:/usr/bin:/bin\", \"AWS_ENDPOINT_URL_SQS=http://10.88.0.1:9\\\"x\"]",
        ] {
            assert!(conf.lines().any(|l| l == line), "{line} in:\n{conf}");
        }
        let storage = storage_conf(dir);
        assert!(storage.contains("graphroot = \"/w/.tools/podman/storage\""));
        assert!(storage.contains("runroot = \"/w/.tools/podman/run\""));
    }
}

//! `sam local invoke`, as users run it, on podman instead of a Docker engine:
//! every sample event of `events/` through its function's `sam build` output
//! (the template SAM wrote there), each answer checked.
//!
//! The engine is podman with runc from Debian's packages
//! ([`tools::PODMAN_PACKAGES`]), serving the Docker API on a socket under
//! `.tools/podman/` with a configuration and an image store of its own there:
//! the machine's container configuration is neither read nor changed. It uses
//! runc and cgroupfs (crun refuses hybrid cgroup hierarchies) and keeps
//! container ulimits within the host's.
//!
//! Network: SAM puts each function's container on the engine's default bridge
//! (podman 4.3's Docker API ignores a configured default network mode), from
//! which 127.0.0.1 cannot be reached. DynamoDB Local and ElasticMQ stay on
//! loopback; a [`Relay`] on the bridge's gateway address forwards to each.
//! Neither the bridge nor its gateway is a loopback address, so the whole run
//! (servers, engine, bridge, containers, SAM) happens in a network namespace
//! of its own, made with `unshare --net` and gone when the run ends
//! ([`in_own_network_namespace`]): no packet of it reaches an interface of the
//! machine.
//!
//! No registry is reached: the Lambda base image SAM builds its emulation image
//! from is made here (`podman import` of the loader and libraries the
//! bootstraps link, and the `sh`, `mv` and `chmod` that SAM's image build runs)
//! under the name SAM looks for, and SAM runs with `--skip-pull-image`.
//!
//! Endpoints: `--env-vars` overrides only variables the template declares, so
//! it gives those their local values (queue URLs); the `AWS_ENDPOINT_URL_*`
//! variables, which the template does not declare, reach every container
//! through the engine's configuration (`env`), written for each run.

mod checks;
mod engine;
mod relay;

pub use checks::{check, check_in, check_sample, no_password_in};
pub use relay::Relay;

use engine::Engine;

use crate::dynamodb_local::{self, DynamoDbLocal};
use crate::elasticmq::{self, ElasticMq};
use crate::events::{self, Sample};
use crate::jvm::Compiler;
use crate::local_aws::{self, function_env};
use crate::process::Guard;
use crate::stored::{self, Table};
use crate::template::{Function, Template};
use crate::{sam, tools, workspace_root};
use serde_json::Value;
use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The engine's default network, the one SAM's containers join.
const NETWORK: &str = "podman";
/// The Lambda base image of `provided.al2023`, as SAM names it.
const BASE_IMAGE: &str = "public.ecr.aws/lambda/provided:al2023";
/// The emulation images SAM builds from the base image (`…:al2023-rapid-x86_64`).
const EMULATION_IMAGES: &str = "public.ecr.aws/lambda/provided:al2023-rapid-*";
/// What SAM's build of its emulation image runs in the base image, besides
/// the libraries the bootstraps link.
const BASE_PROGRAMS: [&str; 3] = ["sh", "mv", "chmod"];
/// Time for one `sam local invoke` beyond the function's timeout (the first
/// one also builds SAM's emulation image).
const INVOKE_MARGIN: Duration = Duration::from_secs(120);

/// Set for the command re-run inside its own network namespace.
const ISOLATED: &str = "LOCAL_STACK_OWN_NETWORK_NAMESPACE";

/// Whether this process runs inside the run's own network namespace (made
/// by [`in_own_network_namespace`]).
pub fn in_own_network_namespace_now() -> bool {
    std::env::var_os(ISOLATED).is_some()
}

/// How [`in_own_network_namespace`] ended, when it did not fail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Namespace {
    /// The program ran there and succeeded.
    Ran,
    /// No namespace can be made here; why.
    Impossible(String),
}

/// Run this program with `args` in a new network namespace (loopback up,
/// nothing else) and wait for it. Install everything the run needs before:
/// nothing outside the machine can be reached from inside.
pub fn in_own_network_namespace(args: &[&str]) -> Result<Namespace, String> {
    let in_namespace = |program: &[&str]| {
        let mut command = Command::new("unshare");
        command
            .args(["--net", "--fork", "--kill-child", "--", "sh", "-c"])
            .arg("ip link set lo up && exec \"$0\" \"$@\"")
            .args(program);
        command
    };
    let possible = in_namespace(&["true"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    if !matches!(possible, Ok(status) if status.success()) {
        return Ok(Namespace::Impossible(
            "no network namespace of its own can be made here (unshare --net and ip need root)"
                .to_owned(),
        ));
    }
    let exe = std::env::current_exe().map_err(|e| format!("this program's path: {e}"))?;
    let exe = exe.to_string_lossy();
    let program: Vec<&str> = std::iter::once(exe.as_ref())
        .chain(args.iter().copied())
        .collect();
    match in_namespace(&program).env(ISOLATED, "1").status() {
        Ok(status) if status.success() => Ok(Namespace::Ran),
        Ok(status) => Err(format!(
            "sam local invoke (own network namespace): {status}"
        )),
        Err(e) => Err(format!("unshare: {e}")),
    }
}

/// What a run did: the invocations made, and the sample events not answered
/// as expected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub invocations: usize,
    pub failures: Vec<String>,
}

/// Run `sam local invoke` for every function of the template and each of its
/// sample events (the first one only with `quick`), against the build in
/// `build_dir` (`sam build --build-dir`), logs in `logs`.
///
/// Runs inside the run's own network namespace: the tools and podman are
/// installed before ([`engine_available`], `tools::install`).
pub fn run(build_dir: &Path, logs: &Path, quick: bool) -> Result<Outcome, String> {
    crate::process::stop_all_on_interrupt()?;
    std::fs::create_dir_all(logs).map_err(|e| format!("{}: {e}", logs.display()))?;
    let built_template = build_dir.join("template.yaml");
    tools::require(&built_template, "the sam build output")?;
    let template = Template::load(&workspace_root().join("template.yaml"))?;
    let functions = in_sample_order(&template, events::dir)?;

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let dynamodb = DynamoDbLocal::start(&logs.join("dynamodb-local.log"), Compiler::Quick)?;
    let elasticmq = ElasticMq::start(&logs.join("elasticmq.log"), Compiler::Quick)?;
    runtime.block_on(dynamodb_local::create_tables(&template, &dynamodb.client()))?;
    let queues = runtime.block_on(elasticmq::create_queues(
        &template,
        &elasticmq.client(),
        None,
    ))?;
    let specs: Vec<_> = queues.iter().map(|q| q.spec.clone()).collect();

    let engine = Engine::new()?;
    let bootstraps: Vec<PathBuf> = functions
        .iter()
        .map(|(f, _)| build_dir.join(&f.logical_id).join("bootstrap"))
        .collect();
    engine.configure(&[])?;
    engine.remove_containers()?;
    engine.ensure_base_image(&bootstraps)?;
    let gateway = engine.gateway()?;
    let dynamodb_relay = Relay::start(gateway, dynamodb.port())?;
    let sqs_relay = Relay::start(gateway, port_of(&elasticmq.endpoint())?)?;
    let (dynamodb_url, sqs_url) = (dynamodb_relay.url(), sqs_relay.url());
    let env_vars = logs.join("env-vars.json");
    let only_functions: Vec<Function> = functions.iter().map(|(f, _)| f.clone()).collect();
    write(
        &env_vars,
        &env_vars_json(&only_functions, &specs, &sqs_url).to_string(),
    )?;
    // Read by the service when it starts: the endpoints of this run.
    engine.configure(&function_env(&[
        ("AWS_ENDPOINT_URL_DYNAMODB", &dynamodb_url),
        ("AWS_ENDPOINT_URL_SQS", &sqs_url),
    ]))?;
    let _service = engine.serve(&logs.join("podman-service.log"))?;

    let run = Run {
        engine: &engine,
        template: &built_template,
        env_vars: &env_vars,
        logs,
    };
    let mut outcome = Outcome {
        invocations: 0,
        failures: Vec::new(),
    };
    let mut stored_orders = 0;
    for (function, samples) in &functions {
        run.samples(function, samples, quick, stored_orders, &mut outcome)?;
        if samples.iter().any(|s| s.expect.invalid_records.is_some()) {
            // Its SQS batches of orders: the orders they leave stored.
            let tables = tables_named_by(&template, function)?;
            let ids = runtime.block_on(stored_keys(&dynamodb.client(), &tables))?;
            stored_orders = ids.len();
            // sam local reaches the dead-letter queue: invalid orders go there.
            let expected = events::stored_orders(&function.binary, true)?;
            if !quick && ids != expected {
                let names: Vec<&str> = tables.iter().map(|t| t.name.as_str()).collect();
                outcome.failures.push(format!(
                    "after the samples of {}, {names:?} hold {ids:?}, expected {expected:?}",
                    function.logical_id
                ));
            }
        }
    }
    engine.remove_containers()?;
    Ok(outcome)
}

/// Every function of `template` with its sample events (those in
/// `events_of(binary)`), the functions whose samples report on stored orders
/// (a `report` expectation) last: they read what the others stored.
fn in_sample_order(
    template: &Template,
    events_of: impl Fn(&str) -> PathBuf,
) -> Result<Vec<(Function, Vec<Sample>)>, String> {
    let mut functions = template
        .functions()?
        .into_iter()
        .map(|function| {
            let samples = events::samples_in(&events_of(&function.binary))?;
            Ok((function, samples))
        })
        .collect::<Result<Vec<_>, String>>()?;
    functions.sort_by_key(|(_, samples)| samples.iter().any(|s| s.expect.report.is_some()));
    Ok(functions)
}

/// The template's tables `function`'s environment names (locally a table's
/// name is its logical id, what `!Ref` of it gives).
fn tables_named_by(template: &Template, function: &Function) -> Result<Vec<Table>, String> {
    let mut tables = stored::tables(template)?;
    tables.retain(|table| function.env.iter().any(|(_, value)| *value == table.name));
    Ok(tables)
}

/// What every `sam local invoke` of a run shares.
struct Run<'a> {
    engine: &'a Engine,
    /// The template `sam build` wrote.
    template: &'a Path,
    /// SAM's `--env-vars` file.
    env_vars: &'a Path,
    logs: &'a Path,
}

impl Run<'_> {
    /// Invoke `function` with each of its sample events (the first only with
    /// `quick`) and check each answer against its expectation; count the
    /// invocations and note what failed in `outcome`. A sample that is a
    /// state machine's input (`state_machine` in its expectation) is no
    /// event of the function's: skipped, with a line.
    fn samples(
        &self,
        function: &Function,
        samples: &[Sample],
        quick: bool,
        stored_orders: usize,
        outcome: &mut Outcome,
    ) -> Result<(), String> {
        let mut samples: Vec<&Sample> = samples
            .iter()
            .filter(|sample| match sample.state_machine() {
                Some(machine) => {
                    println!(
                        "  skip  {} {}: the input of state machine {machine}, not an event of the function",
                        function.logical_id,
                        sample.file_name()
                    );
                    false
                }
                None => true,
            })
            .collect();
        if quick {
            samples.truncate(1);
        }
        for sample in samples {
            let name = sample
                .path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            let label = format!("{} {name}", function.logical_id);
            let started = Instant::now();
            let log = self.logs.join(format!("{}-{name}.log", function.binary));
            let answered = invoke(
                self.engine,
                self.template,
                function,
                &sample.path,
                self.env_vars,
                &log,
            )
            .and_then(|(answer, output)| check_sample(sample, &answer, &output, stored_orders));
            outcome.invocations += 1;
            match answered {
                Ok(()) => println!("  ok    {label} ({:.1} s)", started.elapsed().as_secs_f64()),
                Err(e) => {
                    println!("  FAIL  {label}: {e} (log: {})", log.display());
                    outcome.failures.push(format!("{label}: {e}"));
                }
            }
        }
        Ok(())
    }
}

/// Install podman (the pinned packages) unless it is there; `Err(why)` where
/// it cannot be had: another architecture, no cgroup filesystem, or the
/// packages missing and not installable. Call it outside the run's network
/// namespace (installing needs the package mirror).
pub fn engine_available() -> Result<(), String> {
    if !matches!(std::env::consts::ARCH, "x86_64" | "aarch64") {
        return Err(format!(
            "no Lambda base image for {}",
            std::env::consts::ARCH
        ));
    }
    if !Path::new("/sys/fs/cgroup").is_dir() {
        return Err("no cgroup filesystem at /sys/fs/cgroup".to_owned());
    }
    tools::install_podman()
}

/// The port of `endpoint` (`http://127.0.0.1:PORT`).
fn port_of(endpoint: &str) -> Result<u16, String> {
    endpoint
        .rsplit_once(':')
        .and_then(|(_, port)| port.parse().ok())
        .ok_or_else(|| format!("no port in {endpoint}"))
}

/// SAM's `--env-vars` file: for each function (by logical id), the variables
/// of the template with their local values: a queue reference is the queue's
/// URL on the ElasticMQ at `sqs_url`.
fn env_vars_json(
    functions: &[Function],
    queues: &[crate::template::Queue],
    sqs_url: &str,
) -> Value {
    let by_function = functions.iter().map(|function| {
        let vars = elasticmq::with_queue_urls(&function.env, queues, sqs_url)
            .into_iter()
            .map(|(key, value)| (key, Value::String(value)))
            .collect();
        (function.logical_id.clone(), Value::Object(vars))
    });
    Value::Object(by_function.collect())
}

/// Invoke `function` with the event in `event` through `sam local invoke`;
/// its answer, and everything SAM and the function printed. Output goes to
/// `log` (the answer to `log` with the extension `answer`).
fn invoke(
    engine: &Engine,
    template: &Path,
    function: &Function,
    event: &Path,
    env_vars: &Path,
    log: &Path,
) -> Result<(Value, String), String> {
    let answer_file = log.with_extension("answer");
    let open =
        |path: &Path| std::fs::File::create(path).map_err(|e| format!("{}: {e}", path.display()));
    let (template, event, env_vars) = (
        template.to_string_lossy(),
        event.to_string_lossy(),
        env_vars.to_string_lossy(),
    );
    let mut command = sam::command(&[
        "local",
        "invoke",
        &function.logical_id,
        "--template",
        &template,
        "--event",
        &event,
        "--env-vars",
        &env_vars,
        "--skip-pull-image",
    ]);
    command
        .env("DOCKER_HOST", engine.docker_host())
        .env("AWS_ACCESS_KEY_ID", local_aws::ACCESS_KEY)
        .env("AWS_SECRET_ACCESS_KEY", local_aws::ACCESS_KEY)
        .env_remove("AWS_SESSION_TOKEN")
        .env_remove("AWS_PROFILE")
        .stdin(Stdio::null())
        .stdout(open(&answer_file)?)
        .stderr(open(log)?);
    let mut sam = Guard::spawn(
        format!("sam local invoke {}", function.logical_id),
        &mut command,
    )?;
    let limit = Duration::from_secs(u64::from(function.timeout_s)) + INVOKE_MARGIN;
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = sam.exited() {
            break status;
        }
        if Instant::now() >= deadline {
            sam.stop(Duration::from_secs(5));
            return Err(format!("no answer within {limit:?}"));
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let read = |path: &Path| std::fs::read_to_string(path).unwrap_or_default();
    let (stdout, stderr) = (read(&answer_file), read(log));
    if !status.success() {
        return Err(format!("sam local invoke failed: {status}"));
    }
    let answer = stdout
        .lines()
        .rev()
        .find(|line| !line.trim().is_empty())
        .ok_or("no answer on sam's standard output")?;
    let answer = serde_json::from_str(answer).map_err(|e| format!("answer is not JSON: {e}"))?;
    Ok((answer, stdout + &stderr))
}

/// The partition keys of the items of the local `tables` (the ids the
/// samples' SQS records carry, when those are what is stored), sorted, each
/// once.
async fn stored_keys(
    client: &aws_sdk_dynamodb::Client,
    tables: &[Table],
) -> Result<Vec<String>, String> {
    let mut ids = BTreeSet::new();
    for table in tables {
        ids.extend(stored::partition_keys(client, table).await?);
    }
    Ok(ids.into_iter().collect())
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn write(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_vars_give_queue_references_their_urls_per_function() {
        let template = crate::fixtures::template();
        let functions = template.functions().expect("functions");
        let queues = template.queues().expect("queues");
        let json = env_vars_json(&functions, &queues, "http://10.88.0.1:1");
        let function = &json["FixtureFunction"];
        assert_eq!(function["TABLE_NAME"], "FixtureTable");
        assert!(
            function["DEAD_LETTER_QUEUE_URL"]
                .as_str()
                .is_some_and(|url| url.starts_with("http://10.88.0.1:1/")),
            "{json}"
        );
        assert_eq!(json["FixtureReporter"]["BUCKET"], "FixtureBucket", "{json}");
    }

    #[test]
    fn functions_whose_samples_report_run_after_those_that_store() {
        let template = crate::fixtures::template();
        let declared: Vec<String> = template
            .functions()
            .expect("functions")
            .into_iter()
            .map(|f| f.logical_id)
            .collect();
        assert_eq!(declared, ["FixtureReporter", "FixtureFunction"]);
        let ordered = in_sample_order(&template, crate::fixtures::events).expect("samples");
        let ids: Vec<&str> = ordered.iter().map(|(f, _)| f.logical_id.as_str()).collect();
        assert_eq!(ids, ["FixtureFunction", "FixtureReporter"]);
        let samples: Vec<usize> = ordered.iter().map(|(_, s)| s.len()).collect();
        assert_eq!(samples, [5, 1]);
    }

    #[test]
    fn the_tables_a_function_names_are_read_from_its_environment() {
        let template = crate::fixtures::template();
        for binary in ["fixture-function", "fixture-reporter"] {
            let function = template.function(binary).expect("function");
            let names: Vec<String> = tables_named_by(&template, &function)
                .expect("tables")
                .into_iter()
                .map(|t| t.name)
                .collect();
            assert_eq!(names, ["FixtureTable"]);
        }
        let mut none = template.function("fixture-function").expect("function");
        none.env.retain(|(key, _)| key != "TABLE_NAME");
        assert!(
            tables_named_by(&template, &none)
                .expect("tables")
                .is_empty()
        );
    }
}

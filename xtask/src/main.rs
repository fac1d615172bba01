//! `cargo xtask <command>`: the project's developer commands.
//!
//! - `tools`  install the pinned tools into `.tools/` (also done by the others)
//! - `test`   the whole suite: fmt, clippy, every test, each allocator, SAM lint and build
//! - `run`    build with `sam build` and invoke each function with its sample events
//!   under the Lambda runtime interface emulator; `--keep` leaves them running
//! - `build-arm64`  cross-build the three functions for Graviton (zig)

use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};
use xtask::dynamodb_local::{self, DynamoDbLocal};
use xtask::emulator::Emulator;
use xtask::template::Template;
use xtask::{process, tools, workspace_root};

const USAGE: &str = "usage: cargo xtask <tools | test | run [--keep] | build-arm64>";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let result = match args.as_slice() {
        ["tools"] => tools::install(),
        ["test"] => test(),
        ["run"] => run(false),
        ["run", "--keep"] => run(true),
        ["build-arm64"] => tools::install().and_then(|()| {
            sam(&[
                "build",
                "--build-dir",
                ".aws-sam/build-arm64",
                "--parameter-overrides",
                "Architecture=arm64",
            ])
        }),
        _ => Err(USAGE.to_owned()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `cargo`, the one running this command if any.
fn cargo() -> Command {
    let mut command = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    command.current_dir(workspace_root());
    command
}

/// Run `sam` from the venv, offline-friendly: no telemetry, a default region.
fn sam(args: &[&str]) -> Result<(), String> {
    sam_with(args, &[])
}

/// [`sam`] with extra environment variables.
fn sam_with(args: &[&str], env: &[(&str, &str)]) -> Result<(), String> {
    tools::run(
        Command::new(tools::venv_bin().join("sam"))
            .current_dir(workspace_root())
            .args(args)
            .env("PATH", tools::path_with_venv())
            .env("SAM_CLI_TELEMETRY", "0")
            .env("AWS_DEFAULT_REGION", "us-east-1")
            .envs(env.iter().copied()),
    )
}

/// Run `command` and require that it fails with `message` in its output.
fn expect_failure(command: &mut Command, message: &str) -> Result<(), String> {
    let output = command
        .output()
        .map_err(|e| format!("{}: {e}", tools::describe(command)))?;
    let text = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() && text.contains(message) {
        Ok(())
    } else {
        Err(format!(
            "{} should fail with {message:?}, but: {}\n{text}",
            tools::describe(command),
            output.status
        ))
    }
}

/// The whole suite, step by step; stops at the first failure.
fn test() -> Result<(), String> {
    type Step = (&'static str, Box<dyn Fn() -> Result<(), String>>);
    let mut steps: Vec<Step> = vec![
        ("install pinned tools", Box::new(tools::install)),
        (
            "cargo fmt --check",
            Box::new(|| tools::run(cargo().args(["fmt", "--all", "--check"]))),
        ),
        (
            "cargo clippy -D warnings",
            Box::new(|| {
                tools::run(cargo().args([
                    "clippy",
                    "--workspace",
                    "--all-targets",
                    "--",
                    "-D",
                    "warnings",
                ]))
            }),
        ),
        (
            "cargo test (unit, integration, end-to-end)",
            Box::new(|| tools::run(cargo().args(["test", "--workspace"]))),
        ),
    ];
    for feature in ["jemalloc", "snmalloc", "system"] {
        steps.push((
            match feature {
                "jemalloc" => "shared crate with jemalloc",
                "snmalloc" => "shared crate with snmalloc",
                _ => "shared crate with the system allocator",
            },
            Box::new(move || {
                tools::run(cargo().args([
                    "test",
                    "--package",
                    "shared",
                    "--no-default-features",
                    "--features",
                    feature,
                ]))
            }),
        ));
    }
    steps.push((
        "two allocators or none: compile errors",
        Box::new(|| {
            expect_failure(
                cargo().args(["check", "--package", "shared", "--features", "system"]),
                "more than one allocator selected",
            )?;
            expect_failure(
                cargo().args(["check", "--package", "shared", "--no-default-features"]),
                "no allocator selected",
            )
        }),
    ));
    steps.push((
        "sam validate --lint",
        Box::new(|| sam(&["validate", "--lint"])),
    ));
    steps.push((
        "sam build (x86_64, quick profile)",
        Box::new(|| {
            // Proves the SAM + cargo-lambda wiring and the Lambda link; the
            // fat-LTO release build is for `sam build` / `cargo xtask run`.
            sam_with(
                &["build", "--build-dir", "target/sam-build-check"],
                &[
                    ("CARGO_PROFILE_RELEASE_LTO", "false"),
                    ("CARGO_PROFILE_RELEASE_CODEGEN_UNITS", "16"),
                    ("CARGO_PROFILE_RELEASE_OPT_LEVEL", "0"),
                ],
            )
        }),
    ));

    let started = Instant::now();
    let mut report = Vec::new();
    let mut failed = None;
    for (name, step) in &steps {
        eprintln!("\n==> {name}");
        let t = Instant::now();
        let outcome = step();
        report.push((*name, t.elapsed(), outcome.is_ok()));
        if let Err(e) = outcome {
            failed = Some(format!("{name}: {e}"));
            break;
        }
    }
    eprintln!("\nsuite steps ({:.0?} in all):", started.elapsed());
    for (name, elapsed, ok) in &report {
        eprintln!(
            "  {:<4} {:>7.1}s  {name}",
            if *ok { "ok" } else { "FAIL" },
            elapsed.as_secs_f64()
        );
    }
    let passed = report.iter().filter(|(_, _, ok)| *ok).count();
    println!("suite: {passed} passed, {} failed", report.len() - passed);
    failed.map_or(Ok(()), Err)
}

/// Build with `sam build`, start DynamoDB Local with the template's tables, then
/// invoke every function with its sample events under the runtime interface
/// emulator, as `sam local invoke -e` would.
fn run(keep: bool) -> Result<(), String> {
    process::stop_all_on_interrupt()?;
    tools::install()?;
    sam(&["build"])?;
    let root = workspace_root();
    let template = Template::load(&root.join("template.yaml"))?;
    let rie = tools::emulator()?;
    let logs = root.join("target").join("local-logs");
    std::fs::create_dir_all(&logs).map_err(|e| format!("{}: {e}", logs.display()))?;

    let dynamodb = DynamoDbLocal::start(&logs.join("dynamodb-local.log"))?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let tables = runtime.block_on(dynamodb_local::create_tables(&template, &dynamodb.client()))?;
    println!(
        "DynamoDB Local: {} (tables: {})",
        dynamodb.endpoint(),
        tables.join(", ")
    );
    let endpoint = dynamodb.endpoint();
    let local_aws = [
        ("AWS_ENDPOINT_URL_DYNAMODB", endpoint.as_str()),
        ("AWS_ACCESS_KEY_ID", dynamodb_local::ACCESS_KEY),
        ("AWS_SECRET_ACCESS_KEY", dynamodb_local::ACCESS_KEY),
    ];

    let mut running = Vec::new();
    for function in template.functions()? {
        let bootstrap = root
            .join(".aws-sam/build")
            .join(&function.logical_id)
            .join("bootstrap");
        let log = logs.join(format!("{}.log", function.binary));
        let emulator = Emulator::start(&rie, &bootstrap, &function, &local_aws, &log)?;
        println!(
            "\n{} ({} MB, {} s timeout): {}",
            function.logical_id,
            function.memory_mb,
            function.timeout_s,
            emulator.url()
        );
        let events = root.join("events").join(&function.binary);
        let mut files: Vec<_> = std::fs::read_dir(&events)
            .map_err(|e| format!("{}: {e}", events.display()))?
            .filter_map(Result::ok)
            .map(|entry| entry.path())
            .collect();
        files.sort();
        for file in files {
            let payload =
                std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
            let t = Instant::now();
            let answer = emulator.invoke(&payload)?;
            let body: String = answer.body.chars().take(300).collect();
            println!(
                "  {} -> HTTP {} in {:.0?}: {body}",
                file.strip_prefix(&root).unwrap_or(&file).display(),
                answer.status,
                t.elapsed()
            );
        }
        println!(
            "  logs: {}",
            log.strip_prefix(&root).unwrap_or(&log).display()
        );
        running.push(emulator);
    }
    if keep {
        println!("\nThe functions keep running; invoke them with, for example:");
        if let Some(first) = running.first() {
            println!(
                "  curl -s -d @events/order-processor/sqs-orders.json {}",
                first.url()
            );
        }
        println!("Press Ctrl-C to stop everything.");
        loop {
            std::thread::sleep(Duration::from_secs(3600));
        }
    }
    let stored = runtime.block_on(count_items(&dynamodb.client(), "OrdersTable"))?;
    println!("\nOrdersTable now holds {stored} order(s).");
    // Dropping `running` and `dynamodb` stops every process started here.
    Ok(())
}

/// Items in a local table.
async fn count_items(client: &aws_sdk_dynamodb::Client, table: &str) -> Result<i32, String> {
    client
        .scan()
        .table_name(table)
        .select(aws_sdk_dynamodb::types::Select::Count)
        .send()
        .await
        .map(|r| r.count())
        .map_err(|e| {
            format!(
                "scan {table}: {}",
                aws_sdk_dynamodb::error::DisplayErrorContext(e)
            )
        })
}

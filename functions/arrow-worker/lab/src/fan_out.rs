//! The fan-out against one function, as the orders table grows: this
//! function's release bootstrap (`sam build`) under the emulator with its
//! template limits, DynamoDB Local holding the orders (written as
//! [`crate::orders`] says, five per customer), and the template's state machine on
//! the local Step Functions engine with S3 (moto). For each table size: one
//! function aggregating by customer, then the state machine over 16 and over
//! 64 segments: wall time from request to answer (cold starts included, as a
//! user meets them), the highest peak memory of an execution environment
//! (arena pre-warm off, so the peak is the work's), the bytes each segment
//! stored in S3, and the size of the answer.
//!
//! Then the daily report, which one function reads from the day index: the
//! orders of one day (written the same way), read and added up page by page:
//! its wall time and the function's own CPU time per row, which bound the
//! day one invocation reads within its timeout.

use crate::orders;
use local_stack::dynamodb_local::{self, DynamoDbLocal};
use local_stack::elasticmq;
use local_stack::jvm::Compiler;
use local_stack::lambda_api::{LambdaApi, Served};
use local_stack::local_aws;
use local_stack::moto::{self, Moto};
use local_stack::pool::{Overflow, Pool, Size};
use local_stack::step_functions::{self, Client};
use local_stack::template::{Function, Template};
use local_stack::{cgroup, process, tools, workspace_root};
use serde_json::{Value, json};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use orders::ORDERS_PER_CUSTOMER;
/// This function's binary.
const BINARY: &str = "arrow-worker";
/// Table sizes measured, in orders.
pub const ROWS: [u64; 4] = [25_000, 50_000, 100_000, 200_000];
/// Fan-out widths measured.
pub const SEGMENTS: [u32; 2] = [16, 64];
/// Execution environments of the worker (the local stack's default).
const ENVIRONMENTS: usize = 2;
/// Orders of the one day the daily report reads, measured in turn.
pub const DAY_ORDERS: [u64; 2] = [25_000, 100_000];
/// That day: 2027-01-15, after every other sample order's day.
const DAY: &str = "2027-01-15";
const DAY_START_S: i64 = 1_799_971_200;
/// The first order number of that day's orders (after the table's).
const DAY_FIRST_ORDER: u64 = 10_000_000;

/// Everything this section measures.
#[derive(Debug, Clone)]
pub struct Measured {
    /// The fan-out against one function, per table size.
    pub rows: Vec<Row>,
    /// The daily report, per day size.
    pub days: Vec<DayReport>,
    /// The function's memory size in the template.
    pub memory_mb: u32,
}

/// One daily report of a day of `orders` orders.
#[derive(Debug, Clone)]
pub struct DayReport {
    /// Orders of the day (all read).
    pub orders: u64,
    /// Pages read (the day's shards together).
    pub pages: u64,
    /// The invocation's duration, as the function measured it, seconds.
    pub seconds: f64,
    /// The function's CPU time in it (every thread), seconds.
    pub cpu_seconds: f64,
}

/// How one way of answering went.
#[derive(Debug, Clone)]
pub struct Measure {
    /// `None` for one function, else the segments.
    pub segments: Option<u32>,
    /// Request to answer, seconds.
    pub seconds: f64,
    /// Highest peak of an environment's cgroup (emulator and function), MiB.
    pub peak_mib: Option<f64>,
    /// Mean bytes one segment stored in S3 (fan-out only).
    pub bytes_per_segment: Option<f64>,
    /// The answer's size (stored in S3 past 6 MB).
    pub answer_bytes: u64,
    /// The one function ran out of time (`DeadlineTooShort`): no answer.
    pub out_of_time: bool,
}

/// One table size.
#[derive(Debug, Clone)]
pub struct Row {
    pub orders: u64,
    pub customers: u64,
    pub measures: Vec<Measure>,
}

/// This function as the template declares it, a queue it names a URL on a
/// closed local port (nothing here sends there).
fn this_function(template: &Template) -> Result<Function, String> {
    elasticmq::functions_without_queues(template)?
        .into_iter()
        .find(|f| f.binary == BINARY)
        .ok_or_else(|| format!("no {BINARY} in the template"))
}

/// DynamoDB Local with the template's tables, and a client of it.
struct Tables {
    dynamodb: DynamoDbLocal,
    runtime: tokio::runtime::Runtime,
    client: aws_sdk_dynamodb::Client,
}

impl Tables {
    fn start(template: &Template, log: &Path) -> Result<Self, String> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        let dynamodb = DynamoDbLocal::start(log, Compiler::Peak)?;
        let client = dynamodb.client();
        runtime.block_on(dynamodb_local::create_tables(template, &client))?;
        Ok(Self {
            dynamodb,
            runtime,
            client,
        })
    }

    /// Write orders `range` into `spec`'s table (on the day starting at `day`, if given).
    fn write(&self, spec: &Function, range: (u64, u64), day: Option<i64>) -> Result<(), String> {
        let table = spec
            .env
            .iter()
            .find(|(name, _)| name == "TABLE_NAME")
            .map(|(_, value)| value.clone())
            .ok_or("no TABLE_NAME in the function's settings")?;
        self.runtime
            .block_on(orders::write(&self.client, &table, range, day))
    }
}

/// Measure every table size, then every day size. Needs the x86_64 release
/// bootstrap of the function (`sam build`).
pub fn measure(tick: &dyn Fn(&str)) -> Result<Measured, String> {
    let template = Template::load(&workspace_root().join("template.yaml"))?;
    let spec = this_function(&template)?;
    let binary = workspace_root()
        .join(local_stack::sam::X86_64_BUILD_DIR)
        .join(&spec.logical_id)
        .join("bootstrap");
    if !binary.is_file() {
        return Err(format!("no {} (run `sam build`)", binary.display()));
    }
    let rie = tools::emulator()?;
    let logs = workspace_root().join("target").join("lab-logs");
    std::fs::create_dir_all(&logs).map_err(|e| format!("{}: {e}", logs.display()))?;
    let tables = Tables::start(&template, &logs.join("fan-out-dynamodb.log"))?;
    let ddb_endpoint = tables.dynamodb.endpoint();
    let mut rows = Vec::new();
    let mut written = 0;
    for orders in ROWS {
        tick(&format!("fan-out: writing orders up to {orders}"));
        tables.write(&spec, (written, orders), None)?;
        written = orders;
        let mut measures = Vec::new();
        for segments in std::iter::once(None).chain(SEGMENTS.map(Some)) {
            tick(&format!(
                "fan-out: {orders} orders, {}",
                segments.map_or("one function".to_owned(), |s| format!("{s} segments"))
            ));
            let run = Run::start(&rie, &binary, &template, &spec, &ddb_endpoint, &logs)?;
            measures.push(run.measure(segments, orders)?);
        }
        rows.push(Row {
            orders,
            customers: orders / ORDERS_PER_CUSTOMER,
            measures,
        });
    }
    let mut days = Vec::new();
    let mut written = 0;
    for orders in DAY_ORDERS {
        tick(&format!("daily report: writing {orders} orders of {DAY}"));
        let first = DAY_FIRST_ORDER;
        tables.write(&spec, (first + written, first + orders), Some(DAY_START_S))?;
        written = orders;
        tick(&format!("daily report: a day of {orders} orders"));
        let run = Run::start(&rie, &binary, &template, &spec, &ddb_endpoint, &logs)?;
        days.push(run.daily_report(orders)?);
    }
    drop(tables);
    Ok(Measured {
        rows,
        days,
        memory_mb: spec.memory_mb,
    })
}

/// Fresh environments of the worker behind a Lambda Invoke API, and the
/// Step Functions engine with its bucket calling it.
struct Run {
    pool: Arc<Pool>,
    _api: LambdaApi,
    moto: Moto,
    client: Client,
    state_machine: String,
    bucket: String,
}

impl Run {
    fn start(
        rie: &Path,
        binary: &Path,
        template: &Template,
        spec: &Function,
        ddb_endpoint: &str,
        logs: &Path,
    ) -> Result<Self, String> {
        let moto_port = process::free_port().map_err(|e| e.to_string())?;
        let s3_endpoint = format!("http://127.0.0.1:{moto_port}");
        // No arena pre-warm: its pages would be the peak whatever the work.
        let env = local_aws::function_env(&[
            ("AWS_ENDPOINT_URL_DYNAMODB", ddb_endpoint),
            ("AWS_ENDPOINT_URL_S3", &s3_endpoint),
            ("ARENA_MIB", "0"),
            // One invocation reads each day (its time is what is measured).
            ("REPORT_STATE_MACHINE_ARN", ""),
        ]);
        let size = Size {
            environments: ENVIRONMENTS,
            overflow: Overflow::Wait,
        };
        let limits = cgroup::Limits::from_env()?;
        let pool = Arc::new(Pool::of_emulators(
            rie,
            binary,
            spec,
            &env,
            &logs.join(format!("fan-out-{}.log", spec.binary)),
            size,
            limits,
        ));
        let api = LambdaApi::start(vec![Served {
            names: vec![spec.logical_id.clone(), spec.binary.clone()],
            pool: Arc::clone(&pool),
        }])?;
        let moto = Moto::start_on(moto_port, &api.endpoint(), &logs.join("fan-out-moto.log"))?;
        let bucket = moto::create_buckets(template, &moto.endpoint())?
            .into_iter()
            .next()
            .ok_or("the template has no bucket")?;
        let client = Client::new(&moto.endpoint());
        let state_machine = step_functions::create_state_machines(template, &client)?
            .into_iter()
            .next()
            .ok_or("the template has no state machine")?
            .arn;
        Ok(Self {
            pool,
            _api: api,
            moto,
            client,
            state_machine,
            bucket,
        })
    }

    /// Answer the customer aggregation of `orders` orders with one function
    /// (`segments` `None`) or the state machine.
    fn measure(&self, segments: Option<u32>, orders: u64) -> Result<Measure, String> {
        let query = json!({"group_by": "customer", "limit": 20_000});
        let started = Instant::now();
        let (answer, bytes_per_segment) = match segments {
            None => {
                let answer = self
                    .pool
                    .invoke(json!({"operation": "aggregate", "query": query}).to_string())?;
                if answer.status != 200 {
                    return Err(format!("one function: {}", answer.body));
                }
                (answer.json()?, None)
            }
            Some(total) => {
                let run = format!("lab-{orders}-{total}");
                let input = json!({"query": query, "total_segments": total});
                let arn = self
                    .client
                    .start_execution(&self.state_machine, &input, Some(&run))?;
                let execution = self.client.wait(&arn, Duration::from_secs(1_800))?;
                if !execution.succeeded() {
                    return Err(format!("{total} segments: {execution:?}"));
                }
                let sizes = self.object_sizes(&format!("partials/{run}/"))?;
                if sizes.len() != total as usize {
                    return Err(format!(
                        "{} partials stored for {total} segments",
                        sizes.len()
                    ));
                }
                let mean = sizes.iter().sum::<u64>() as f64 / f64::from(total);
                (execution.output.unwrap_or(Value::Null), Some(mean))
            }
        };
        let seconds = started.elapsed().as_secs_f64();
        let peak_mib = self
            .pool
            .peak_memory_bytes()
            .map(|b| b as f64 / f64::from(1 << 20));
        // One function past its timeout is a result of its own: what the
        // fan-out is for.
        if segments.is_none() && answer["errorType"] == "DeadlineTooShort" {
            return Ok(Measure {
                segments,
                seconds,
                peak_mib,
                bytes_per_segment,
                answer_bytes: 0,
                out_of_time: true,
            });
        }
        let matched = answer["rows"]["matched"].as_u64();
        if matched != Some(orders) {
            return Err(format!("{orders} orders, {matched:?} matched: {answer}"));
        }
        let answer_bytes = answer["answer_bytes"]
            .as_u64()
            .unwrap_or(answer.to_string().len() as u64);
        Ok(Measure {
            segments,
            seconds,
            peak_mib,
            bytes_per_segment,
            answer_bytes,
            out_of_time: false,
        })
    }

    /// The daily report of [`DAY`] (`orders` orders), after one report of an
    /// empty day so that the measured one is not the first invocation.
    fn daily_report(&self, orders: u64) -> Result<DayReport, String> {
        let report = |day: &str| -> Result<Value, String> {
            let payload = json!({"operation": "daily_report", "day": day});
            let answer = self.pool.invoke(payload.to_string())?.json()?;
            match answer.get("errorType") {
                Some(_) => Err(format!("the daily report of {day}: {answer}")),
                None => Ok(answer),
            }
        };
        report("2027-01-14")?;
        let answer = report(DAY)?;
        let scanned = answer["rows"]["scanned"].as_u64();
        if scanned != Some(orders) {
            return Err(format!(
                "{orders} orders of {DAY}, {scanned:?} read: {answer}"
            ));
        }
        let figure = |name: &str| {
            answer["run"][name]
                .as_f64()
                .ok_or_else(|| format!("no run.{name}: {answer}"))
        };
        Ok(DayReport {
            orders,
            pages: answer["run"]["pages"].as_u64().unwrap_or(0),
            seconds: figure("duration_ms")? / 1e3,
            cpu_seconds: figure("cpu_ms")? / 1e3,
        })
    }

    /// The sizes of the objects under `prefix` in the bucket (ListObjectsV2).
    fn object_sizes(&self, prefix: &str) -> Result<Vec<u64>, String> {
        let url = format!(
            "{}/{}?list-type=2&prefix={}",
            self.moto.endpoint(),
            self.bucket,
            prefix.replace('/', "%2F")
        );
        let body = ureq::get(&url)
            .header("authorization", moto::authorization("s3"))
            .call()
            .map_err(|e| format!("listing {prefix}: {e}"))?
            .into_body()
            .read_to_string()
            .map_err(|e| format!("listing {prefix}: {e}"))?;
        Ok(body
            .split("<Size>")
            .skip(1)
            .filter_map(|rest| rest.split('<').next()?.trim().parse().ok())
            .collect())
    }
}

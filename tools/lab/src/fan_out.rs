//! The fan-out against one function, as the orders table grows: the Arrow
//! worker's release bootstrap (`sam build`) under the emulator with its
//! template limits, DynamoDB Local holding the orders (written by the order
//! processor's store, five per customer), and the template's state machine on
//! the local Step Functions engine with S3 (moto). For each table size: one
//! function aggregating by customer, then the state machine over 16 and over
//! 64 segments: wall time from request to answer (cold starts included, as a
//! user meets them), the highest peak memory of an execution environment
//! (arena pre-warm off, so the peak is the work's), the bytes each segment
//! stored in S3, and the size of the answer.

use super::cold_start::{BUILD_DIRS, bootstrap};
use super::stack::{ORDERS_PER_CUSTOMER, Tables, logs_dir};
use local_stack::lambda_api::{LambdaApi, Served};
use local_stack::moto::{self, Moto};
use local_stack::pool::{Overflow, Pool, Size};
use local_stack::step_functions::{self, Client};
use local_stack::template::Template;
use local_stack::{cgroup, local_aws, process, tools, workspace_root};
use serde_json::{Value, json};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Table sizes measured, in orders.
pub const ROWS: [u64; 4] = [25_000, 50_000, 100_000, 200_000];
/// Fan-out widths measured.
pub const SEGMENTS: [u32; 2] = [16, 64];
/// Execution environments of the worker (the local stack's default).
const ENVIRONMENTS: usize = 2;

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
}

/// One table size.
#[derive(Debug, Clone)]
pub struct Row {
    pub orders: u64,
    pub customers: u64,
    pub measures: Vec<Measure>,
}

/// Measure every table size. Needs the x86_64 release bootstrap of the worker.
pub fn measure(tick: &dyn Fn(&str)) -> Result<Vec<Row>, String> {
    let template = Template::load(&workspace_root().join("template.yaml"))?;
    let spec = template.function("arrow-worker")?;
    let binary = bootstrap(BUILD_DIRS[0].1, &spec.logical_id);
    if !binary.is_file() {
        return Err(format!("no {} (run `sam build`)", binary.display()));
    }
    let rie = tools::emulator()?;
    let logs = logs_dir()?;
    let tables = Tables::start(&template, &logs.join("fan-out-dynamodb.log"))?;
    let ddb_endpoint = tables.endpoint();
    let mut rows = Vec::new();
    let mut written = 0;
    for orders in ROWS {
        tick(&format!("fan-out: writing orders up to {orders}"));
        tables.write_orders(written..orders)?;
        written = orders;
        let mut measures = Vec::new();
        for segments in std::iter::once(None).chain(SEGMENTS.map(Some)) {
            tick(&format!(
                "fan-out: {orders} orders, {}",
                segments.map_or("one function".to_owned(), |s| format!("{s} segments"))
            ));
            let run = Run::start(&rie, &binary, &template, &ddb_endpoint, &logs)?;
            measures.push(run.measure(segments, orders)?);
        }
        rows.push(Row {
            orders,
            customers: orders / ORDERS_PER_CUSTOMER,
            measures,
        });
    }
    drop(tables);
    Ok(rows)
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
        ddb_endpoint: &str,
        logs: &Path,
    ) -> Result<Self, String> {
        let spec = template.function("arrow-worker")?;
        let moto_port = process::free_port().map_err(|e| e.to_string())?;
        let s3_endpoint = format!("http://127.0.0.1:{moto_port}");
        // No arena pre-warm: its pages would be the peak whatever the work.
        let env = local_aws::function_env(&[
            ("AWS_ENDPOINT_URL_DYNAMODB", ddb_endpoint),
            ("AWS_ENDPOINT_URL_S3", &s3_endpoint),
            ("ARENA_MIB", "0"),
        ]);
        let size = Size {
            environments: ENVIRONMENTS,
            overflow: Overflow::Wait,
        };
        let limits = cgroup::Limits::from_env()?;
        let pool = Arc::new(Pool::of_emulators(
            rie,
            binary,
            &spec,
            &env,
            &logs.join("fan-out-arrow-worker.log"),
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
            peak_mib: self
                .pool
                .peak_memory_bytes()
                .map(|b| b as f64 / f64::from(1 << 20)),
            bytes_per_segment,
            answer_bytes,
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

//! What the lab's measurements of the functions' bootstraps run against: the
//! log folder, DynamoDB Local with the template's tables (orders written
//! through the order processor's own store), and cold starts under the
//! emulator.

use futures::future::join_all;
use local_stack::dynamodb_local::{self, DynamoDbLocal};
use local_stack::emulator::Emulator;
use local_stack::jvm::Compiler;
use local_stack::template::{Function, Template};
use local_stack::workspace_root;
use order_processor::dynamodb::DynamoStore;
use order_processor::order::validate;
use order_processor::store::{OrderStore as _, PutOutcome};
use std::path::{Path, PathBuf};

/// Orders per customer in the tables the lab writes.
pub const ORDERS_PER_CUSTOMER: u64 = 5;

/// `target/lab-logs`, where every server and emulator of the lab logs.
pub fn logs_dir() -> Result<PathBuf, String> {
    let logs = workspace_root().join("target").join("lab-logs");
    std::fs::create_dir_all(&logs).map_err(|e| format!("{}: {e}", logs.display()))?;
    Ok(logs)
}

/// DynamoDB Local holding the template's tables, and a runtime to call it.
/// Dropping it stops the server.
pub struct Tables {
    dynamodb: DynamoDbLocal,
    runtime: tokio::runtime::Runtime,
}

impl Tables {
    /// Start DynamoDB Local (logging to `log`) and create `template`'s tables.
    pub fn start(template: &Template, log: &Path) -> Result<Self, String> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        let dynamodb = DynamoDbLocal::start(log, Compiler::Peak)?;
        runtime.block_on(dynamodb_local::create_tables(template, &dynamodb.client()))?;
        Ok(Self { dynamodb, runtime })
    }

    /// The plain HTTP endpoint.
    pub fn endpoint(&self) -> String {
        self.dynamodb.endpoint()
    }

    /// Its port on 127.0.0.1 (for a TLS front).
    pub fn port(&self) -> u16 {
        self.dynamodb.port()
    }

    /// Write orders `range` (sample orders, [`ORDERS_PER_CUSTOMER`] per
    /// customer) through the order processor's store.
    pub fn write_orders(&self, range: std::ops::Range<u64>) -> Result<(), String> {
        self.write(range, |_| None)
    }

    /// Write orders `range` as [`Tables::write_orders`] does, every one
    /// created on the UTC day starting `day_start_s` (seconds since the
    /// epoch), spread over its seconds.
    pub fn write_orders_of_day(
        &self,
        range: std::ops::Range<u64>,
        day_start_s: i64,
    ) -> Result<(), String> {
        self.write(range, |n| {
            let second = i64::try_from(n.wrapping_mul(7_919) % 86_400).unwrap_or(0);
            let at = time::OffsetDateTime::from_unix_timestamp(day_start_s + second).ok()?;
            at.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
    }

    /// Write orders `range`, order `n` created at `created_at(n)` if given.
    fn write(
        &self,
        range: std::ops::Range<u64>,
        created_at: impl Fn(u64) -> Option<String>,
    ) -> Result<(), String> {
        let store = DynamoStore::new(self.dynamodb.client(), "OrdersTable");
        let orders = range
            .map(|n| {
                let mut order = order_processor_testkit::orders::order(n);
                order.customer_id = format!("cust-{:07}", n / ORDERS_PER_CUSTOMER);
                if let Some(at) = created_at(n) {
                    order.created_at = at;
                }
                validate(order).map_err(|e| format!("sample order {n}: {e}"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        self.runtime.block_on(async {
            for chunk in orders.chunks(200) {
                for outcome in join_all(chunk.iter().map(|o| store.put_order(o))).await {
                    match outcome {
                        Ok(PutOutcome::Written) => {}
                        other => return Err(format!("writing the orders: {other:?}")),
                    }
                }
            }
            Ok(())
        })
    }
}

/// The init durations (ms) of `starts` cold starts of `binary` as `spec`
/// with `env`, each invoked once with `{}` (any answer will do, an error too:
/// init has happened by then); start `n` logs to `log(n)`.
pub fn init_durations_ms(
    rie: &Path,
    binary: &Path,
    spec: &Function,
    env: &[(&str, &str)],
    log: impl Fn(usize) -> PathBuf,
    starts: usize,
) -> Result<Vec<f64>, String> {
    (0..starts)
        .map(|n| {
            let log = log(n);
            let emulator = Emulator::start(rie, binary, spec, env, &log)?;
            emulator.invoke("{}")?;
            let init = emulator.init_duration_ms();
            emulator.stop();
            init.ok_or_else(|| format!("{}: no init duration in {}", spec.binary, log.display()))
        })
        .collect()
}

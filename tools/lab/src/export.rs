//! What exporting an invocation's spans costs it, per way out of a Lambda
//! function: the `lab_export` probe as a function under the emulator at the
//! memory size of the template's smallest function (its CPU share), one environment, the three
//! paths interleaved round by round: datagrams to the X-Ray daemon (what
//! ships; the daemon here is this process's receiver, outside the
//! environment as Lambda's is), OTLP/HTTP to a collector in the environment
//! (as a collector extension runs), and a JSON line per span in the log.
//! Every path must deliver every span: the receiver counts the datagrams,
//! the collector the spans it acknowledged, the probe the lines it wrote.

use super::stack::logs_dir;
use lab_probes::stats::median;
use local_stack::emulator::Emulator;
use local_stack::template::Template;
use local_stack::{local_aws, tools, workspace_root};
use serde_json::Value;
use std::net::UdpSocket;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

/// The export paths, in the probe's words and the report's.
pub const PATHS: [(&str, &str); 3] = [
    ("udp", "OTLP in UDP datagrams to the X-Ray daemon (shipped)"),
    ("http", "OTLP/HTTP POST to a collector on loopback"),
    ("log", "a JSON line per span in the log"),
];

/// One path's measured rounds.
#[derive(Debug, Clone)]
pub struct Row {
    pub description: &'static str,
    /// Per round: the time to hand one invocation's spans off, µs.
    pub us: Vec<f64>,
}

impl Row {
    /// The median round, µs.
    pub fn median_us(&self) -> f64 {
        median(self.us.clone())
    }

    /// The 90th percentile round, µs.
    pub fn p90_us(&self) -> f64 {
        let mut us = self.us.clone();
        us.sort_by(f64::total_cmp);
        us.get(us.len() * 9 / 10).copied().unwrap_or(0.0)
    }
}

/// Everything measured.
#[derive(Debug, Clone)]
pub struct Export {
    pub memory_mb: u32,
    pub spans: u64,
    pub rounds: usize,
    pub rows: Vec<Row>,
}

/// `rounds` rounds of every path in the `probe` function, each path's
/// delivery checked.
/// Measure `rounds` rounds, or nothing if the template has no function.
pub fn measure(probe: &Path, rounds: usize, tick: &dyn Fn(&str)) -> Result<Option<Export>, String> {
    tick("export paths: the lab_export probe");
    let template = Template::load(&workspace_root().join("template.yaml"))?;
    let Some(mut spec) = super::plan::smallest(&template, |_| true)? else {
        return Ok(None);
    };
    spec.env.clear();
    let daemon = Receiver::start()?;
    let address = daemon.address.clone();
    let mut env = local_aws::function_env(&[]);
    env.push(("LAB_DAEMON", address.as_str()));
    let log = logs_dir()?.join("export.log");
    let emulator = Emulator::start(&tools::emulator()?, probe, &spec, &env, &log)?;
    let answer = emulator
        .invoke(format!("{{\"rounds\":{rounds}}}"))?
        .json()?;
    emulator.stop();
    let field = |name: &str| {
        answer[name]
            .as_u64()
            .ok_or_else(|| format!("lab_export answered {answer} (see {})", log.display()))
    };
    let spans = field("spans")?;
    let sent = field("udp_datagrams")?;
    let received = daemon.received(sent);
    let all = spans * (rounds as u64 + field("warm_up_rounds")?);
    for (what, count, expected) in [
        ("datagrams the daemon received", received, sent),
        (
            "spans the collector acknowledged",
            field("http_spans_acknowledged")?,
            all,
        ),
        ("log lines written", field("log_lines")?, all),
    ] {
        if count != expected {
            return Err(format!(
                "export paths: {count} {what}, {expected} expected (see {})",
                log.display()
            ));
        }
    }
    let rows = PATHS
        .iter()
        .map(|&(path, description)| {
            let us: Option<Vec<f64>> = answer[format!("{path}_us")]
                .as_array()
                .map(|all| all.iter().filter_map(Value::as_f64).collect());
            match us {
                Some(us) if us.len() == rounds => Ok(Row { description, us }),
                _ => Err(format!("lab_export answered no {path}_us: {answer}")),
            }
        })
        .collect::<Result<_, String>>()?;
    Ok(Some(Export {
        memory_mb: spec.memory_mb,
        spans,
        rounds,
        rows,
    }))
}

/// The X-Ray daemon's stand-in: a loopback UDP socket counting datagrams,
/// stopped on drop.
struct Receiver {
    address: String,
    count: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
}

impl Receiver {
    fn start() -> Result<Self, String> {
        let socket = UdpSocket::bind("127.0.0.1:0").map_err(|e| format!("daemon: {e}"))?;
        let address = socket.local_addr().map_err(|e| e.to_string())?.to_string();
        socket
            .set_read_timeout(Some(Duration::from_millis(50)))
            .map_err(|e| e.to_string())?;
        let (count, stop) = (
            Arc::new(AtomicUsize::new(0)),
            Arc::new(AtomicBool::new(false)),
        );
        let (counted, stopped) = (Arc::clone(&count), Arc::clone(&stop));
        std::thread::spawn(move || {
            let mut buffer = vec![0; 65_536];
            while !stopped.load(Ordering::Relaxed) {
                if socket.recv(&mut buffer).is_ok() {
                    counted.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
        Ok(Self {
            address,
            count,
            stop,
        })
    }

    /// The datagrams received, once `expected` are or a second has passed.
    fn received(&self, expected: u64) -> u64 {
        for _ in 0..20 {
            if self.count.load(Ordering::Relaxed) as u64 >= expected {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        self.count.load(Ordering::Relaxed) as u64
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

//! The first invocation against the steady state, on the functions' own
//! bootstraps (release builds from `sam build`; the suite's debug builds in
//! quick mode) under the runtime interface emulator, each in a cgroup with its
//! template's CPU share and memory limit, DynamoDB Local and S3 (moto) behind a
//! TLS front with a certificate authority made for the run, as on AWS.
//!
//! For each function the requests of its plan (`lab_probes::plan`: the
//! function's `plan` probe, else its sample events); for each, the function
//! as shipped and without each measure its plan names (connections opened
//! during init, arena pre-warm by initialisation type). Every variant runs in fresh
//! environments, the variants of a request interleaved, so that the machine's
//! noise falls on all of them alike. A hello-world function (the `lab_hello`
//! probe) at each memory size gives the init floor.
//!
//! Durations are the emulator's: `INIT REPORT` for init, `INVOKE RTDONE` for
//! each invocation (without init, unlike its first `REPORT` line). "Cold"
//! is the caller's wait for an on-demand cold start: init and first
//! invocation, from the request to the answer.

use super::cold_start::{BUILD_DIRS, bootstrap};
use super::plan;
use super::probes::{self, Probes};
use super::scale::Scale;
use super::stack::{Tables, init_durations_ms, logs_dir};
use super::tuning::failure;
use lab_probes::plan::{CONNECTIONS, PREWARM, Request};
use lab_probes::stats::median;
use local_stack::emulator::{Emulator, Invocation};
use local_stack::moto::{self, Moto};
use local_stack::pool::Options;
use local_stack::template::{Function, Template};
use local_stack::tls_front::{Authority, CA_FILE_VARIABLE, TlsFront};
use local_stack::xray_daemon::Daemon;
use local_stack::{local_aws, tools, workspace_root};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Invocations after the first, per environment; their median is "steady".
pub const STEADY: usize = 4;

/// What the template aims at for every request size of every function as
/// shipped: the first invocation at most this many times a steady one.
pub const FIRST_OVER_STEADY_GOAL: f64 = 1.2;

/// Fresh environments per variant and request. Nine in the full run: a small
/// request's few milliseconds vary by a quarter from one environment to the
/// next (DynamoDB Local's and the CPU share's timing), and the median of five
/// moved a small request's first / steady between 0.8 and 1.4 from one run
/// to the next with the same code.
pub fn starts(scale: Scale) -> usize {
    match scale {
        Scale::Full => 9,
        Scale::Quick => 2,
    }
}

/// A variant: what it turns off or on, as settings beside the template's.
#[derive(Debug, Clone, Copy)]
pub struct Variant {
    pub name: &'static str,
    pub env: &'static [(&'static str, &'static str)],
    /// The trace header each invocation is given (`None`: none, so each
    /// starts a sampled trace of its own).
    pub trace_header: Option<&'static str>,
}

/// The function as the template ships it.
pub const SHIPPED: Variant = Variant {
    name: "as shipped",
    env: &[],
    trace_header: None,
};
/// Connections opened at the first request, not during init.
pub const NO_CONNECTIONS: Variant = Variant {
    name: "no connections opened at init",
    env: &[("OPEN_CONNECTIONS_AT_INIT", "false")],
    trace_header: None,
};
/// Lambda initialising ahead of traffic: the arena is pre-faulted during init.
pub const PROVISIONED: Variant = Variant {
    name: "provisioned concurrency (pre-warm at init)",
    env: &[("AWS_LAMBDA_INITIALIZATION_TYPE", "provisioned-concurrency")],
    trace_header: None,
};
/// No pre-warm whatever the initialisation type.
pub const NO_PREWARM: Variant = Variant {
    name: "PREWARM=off",
    env: &[("PREWARM", "off")],
    trace_header: None,
};
const PREWARM_INIT: Variant = Variant {
    name: "PREWARM=init (on-demand)",
    env: &[("PREWARM", "init")],
    trace_header: None,
};
const PREWARM_BACKGROUND: Variant = Variant {
    name: "PREWARM=background (on-demand)",
    env: &[("PREWARM", "background")],
    trace_header: None,
};

/// No tracer (`TRACING=off`, as with `Tracing: PassThrough`): against
/// [`SHIPPED`], whose every invocation is sampled and its spans sent to the
/// X-Ray daemon, the cost of tracing.
pub const TRACING_OFF: Variant = Variant {
    name: "TRACING=off",
    env: &[("TRACING", "off")],
    trace_header: None,
};
/// Tracing on, the invocation not sampled by Lambda (`Sampled=0`): spans
/// made, none sent.
pub const NOT_SAMPLED: Variant = Variant {
    name: "tracing on, not sampled",
    env: &[],
    trace_header: Some(
        "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=0",
    ),
};

/// What one fresh environment measured.
#[derive(Debug, Clone, Copy)]
pub struct Start {
    pub init_ms: f64,
    pub first_ms: f64,
    pub steady_ms: f64,
    /// Request to answer of the first invocation, init included.
    pub cold_ms: f64,
    /// TLS handshakes during the invocations (after those of init).
    pub request_handshakes: usize,
    /// Connections init set out to open but did not within its bound
    /// (`shared::connections::WITHIN`): a slow start, such as a debug build
    /// under a small CPU share, leaves them to the first request.
    pub unopened_at_init: usize,
    /// Minor page faults of the first invocation (where the function's
    /// answer reports them, `run.minor_faults`).
    pub first_faults: Option<u64>,
    /// CPU time of the first invocation and the median of the steady ones,
    /// ms (where the answer reports `run.cpu_ms`): the work, without the
    /// waits of the CPU share.
    pub cpu_ms: Option<(f64, f64)>,
}

/// One function, request and variant, over its fresh environments.
#[derive(Debug, Clone)]
pub struct Row {
    pub function: String,
    pub memory_mb: u32,
    pub size: String,
    pub request: String,
    pub variant: Variant,
    pub starts: Vec<Start>,
}

impl Row {
    /// The median of `field` over the starts.
    pub fn median(&self, field: impl Fn(&Start) -> f64) -> f64 {
        median(self.starts.iter().map(field).collect())
    }

    /// Median first over median steady.
    pub fn ratio(&self) -> f64 {
        self.median(|s| s.first_ms) / self.median(|s| s.steady_ms).max(1e-3)
    }
}

/// The row of the functions as shipped whose first / steady is the largest.
pub fn worst_shipped(measured: &FirstInvocation) -> Option<&Row> {
    measured
        .rows
        .iter()
        .filter(|row| row.variant.name == SHIPPED.name)
        .max_by(|a, b| a.ratio().total_cmp(&b.ratio()))
}

/// The init floor: a hello-world function at a memory size.
#[derive(Debug, Clone)]
pub struct Floor {
    /// The function whose memory size it ran at.
    pub function: String,
    pub memory_mb: u32,
    pub init_ms: f64,
}

/// Everything measured.
#[derive(Debug, Clone)]
pub struct FirstInvocation {
    pub rows: Vec<Row>,
    pub floors: Vec<Floor>,
    pub starts: usize,
    /// Which builds: release or debug.
    pub builds: &'static str,
    /// The TLS client's cold cost per crypto provider and roots.
    pub tls: Vec<super::tls::Row>,
    /// What exporting an invocation's spans costs it, per export path.
    pub export: Option<super::export::Export>,
}

/// Where the bootstraps are: `sam build`'s release builds, or the suite's
/// debug builds (those of the `sam build` folder in [`probes::BOOTSTRAPS`], if set).
fn binary(scale: Scale, spec: &Function) -> PathBuf {
    match (scale, std::env::var_os(probes::BOOTSTRAPS)) {
        (Scale::Full, _) => bootstrap(BUILD_DIRS[0].1, &spec.logical_id),
        (Scale::Quick, Some(built)) => PathBuf::from(built)
            .join(&spec.logical_id)
            .join("bootstrap"),
        (Scale::Quick, None) => probes::target_dir().join("debug").join(&spec.binary),
    }
}

/// Measure every function, request and variant, then the TLS client's cold
/// cost; `probes` has the hello-world probe (the init floor) and `lab_tls`.
pub fn measure(
    scale: Scale,
    probes: &Probes,
    tick: &dyn Fn(&str),
) -> Result<FirstInvocation, String> {
    let hello = &probes.path("mimalloc", "lab_hello")?;
    let template = Template::load(&workspace_root().join("template.yaml"))?;
    let rie = tools::emulator()?;
    let logs = logs_dir()?;
    tick("first invocation: DynamoDB Local, S3 and their TLS fronts");
    let stack = Stack::start(&template, &logs)?;
    let starts = starts(scale);
    let mut rows = Vec::new();
    let mut floors = Vec::new();
    for spec in plan::functions(&template)? {
        let (requests, mut variants) = function_plan(probes, &spec, scale)?;
        if scale == Scale::Full {
            // What tracing costs (not in the quick run: the suite's time).
            variants.extend([TRACING_OFF, NOT_SAMPLED]);
        }
        let binary = &spec.binary;
        let bootstrap = self::binary(scale, &spec);
        if !bootstrap.is_file() {
            return Err(format!("no {} (run `sam build`)", bootstrap.display()));
        }
        let floor = hello_floor(&rie, hello, &spec, starts, &logs)?;
        floors.push(floor);
        let at = Site {
            stack: &stack,
            rie: &rie,
            bootstrap: &bootstrap,
            spec: &spec,
            logs: &logs,
        };
        for request in requests {
            if let Some(args) = &request.prepare {
                tick(&format!(
                    "first invocation: {binary}, preparing {}",
                    args.join(" ")
                ));
                plan::prepare(probes, &spec, args, &stack.tables.endpoint())?;
            }
            let by_variant = request_starts(&at, &request, &variants, starts, tick)?;
            rows.extend(rows_of(&spec, &request, &variants, by_variant));
        }
    }
    let tls = tls_cold_cost(scale, probes, &stack, tick)?;
    let export_rounds = match scale {
        Scale::Full => 300,
        Scale::Quick => 20,
    };
    let export =
        super::export::measure(&probes.path("mimalloc", "lab_export")?, export_rounds, tick)?;
    Ok(FirstInvocation {
        rows,
        floors,
        starts,
        tls,
        export,
        builds: match scale {
            Scale::Full => "release (`sam build`)",
            Scale::Quick => "debug (the suite's)",
        },
    })
}

/// Where a function's environments run.
struct Site<'a> {
    stack: &'a Stack,
    rie: &'a Path,
    bootstrap: &'a Path,
    spec: &'a Function,
    logs: &'a Path,
}

/// `request` in `starts` fresh environments per variant, the variants
/// interleaved: each variant's starts.
fn request_starts(
    at: &Site,
    request: &Request,
    variants: &[Variant],
    starts: usize,
    tick: &dyn Fn(&str),
) -> Result<Vec<Vec<Start>>, String> {
    let binary = &at.spec.binary;
    let mut by_variant: Vec<Vec<Start>> = vec![Vec::new(); variants.len()];
    let mut invocations = 0;
    for round in 0..starts {
        for (variant, measured) in variants.iter().zip(&mut by_variant) {
            tick(&format!(
                "first invocation: {binary}, {} request, {}, #{}",
                request.size,
                variant.name,
                round + 1
            ));
            let log = at.logs.join(format!("first-{binary}-{}.log", request.size));
            let env = at.stack.env(variant);
            measured.push(environment(
                at,
                &env,
                &log,
                request,
                (variant.trace_header, &mut invocations),
            )?);
        }
    }
    Ok(by_variant)
}

/// One row per variant of `request`, from its fresh environments.
fn rows_of(
    spec: &Function,
    request: &Request,
    variants: &[Variant],
    by_variant: Vec<Vec<Start>>,
) -> Vec<Row> {
    variants
        .iter()
        .zip(by_variant)
        .map(|(variant, measured)| Row {
            function: spec.logical_id.clone(),
            memory_mb: spec.memory_mb,
            size: request.size.clone(),
            request: request.description.clone(),
            variant: *variant,
            starts: measured,
        })
        .collect()
}

/// The TLS client's cold cost (the `lab_tls` probe) against the DynamoDB front.
fn tls_cold_cost(
    scale: Scale,
    probes: &Probes,
    stack: &Stack,
    tick: &dyn Fn(&str),
) -> Result<Vec<super::tls::Row>, String> {
    let tls_starts = match scale {
        Scale::Full => 9,
        Scale::Quick => 1,
    };
    super::tls::measure(
        &probes.path("mimalloc", "lab_tls")?,
        &stack.fronts[0].endpoint(),
        &stack.ca_file,
        tls_starts,
        tick,
    )
}

/// The variants of the measures a plan names, each the function without it.
const WITHOUT: [(&str, &[Variant]); 2] = [
    (CONNECTIONS, &[NO_CONNECTIONS]),
    (
        PREWARM,
        &[NO_PREWARM, PREWARM_INIT, PREWARM_BACKGROUND, PROVISIONED],
    ),
];

/// `spec`'s requests, and the variants each runs in: as shipped, then
/// without each measure its plan names.
fn function_plan(
    probes: &Probes,
    spec: &Function,
    scale: Scale,
) -> Result<(Vec<Request>, Vec<Variant>), String> {
    // Every variant's environments, each a first and the steady invocations.
    let most_variants = 1 + WITHOUT.iter().map(|(_, v)| v.len()).sum::<usize>() + 2;
    let count = starts(scale) * most_variants * (1 + STEADY);
    let plan = plan::of(probes, spec, scale, count)?;
    let mut variants = vec![SHIPPED];
    for measure in &plan.first_invocation.measures {
        let (_, without) = WITHOUT
            .iter()
            .find(|(name, _)| name == measure)
            .ok_or_else(|| format!("{}'s plan: no measure {measure:?}", spec.binary))?;
        variants.extend_from_slice(without);
    }
    Ok((plan.first_invocation.requests, variants))
}

/// DynamoDB Local and moto's S3, each behind a TLS front of one authority.
struct Stack {
    tables: Tables,
    _moto: Moto,
    /// Where the functions send their spans (as Lambda's X-Ray daemon).
    daemon: Daemon,
    fronts: [TlsFront; 2],
    ca_file: PathBuf,
}

impl Stack {
    fn start(template: &Template, logs: &Path) -> Result<Self, String> {
        let tables = Tables::start(template, &logs.join("first-dynamodb.log"))?;
        let moto = Moto::start(local_aws::NO_SERVER, &logs.join("first-moto.log"))?;
        moto::create_buckets(template, &moto.endpoint())?;
        let ca_file = logs.join("first-certificate-authority.pem");
        let authority = Authority::new(&ca_file)?;
        let fronts = [
            TlsFront::start(&authority, tables.port())?,
            TlsFront::start(&authority, moto.port())?,
        ];
        Ok(Self {
            tables,
            _moto: moto,
            daemon: Daemon::start(None)?,
            fronts,
            ca_file,
        })
    }

    /// The functions' settings for `variant`.
    fn env(&self, variant: &Variant) -> Vec<(String, String)> {
        let endpoints = [
            ("AWS_XRAY_DAEMON_ADDRESS", self.daemon.address().to_string()),
            ("AWS_ENDPOINT_URL_DYNAMODB", self.fronts[0].endpoint()),
            ("AWS_ENDPOINT_URL_S3", self.fronts[1].endpoint()),
            (
                CA_FILE_VARIABLE,
                self.ca_file.to_string_lossy().into_owned(),
            ),
        ];
        let borrowed: Vec<(&str, &str)> = endpoints.iter().map(|(k, v)| (*k, v.as_str())).collect();
        local_aws::function_env(&borrowed)
            .into_iter()
            .chain(variant.env.iter().copied())
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect()
    }

    fn handshakes(&self) -> usize {
        self.fronts.iter().map(TlsFront::handshakes).sum()
    }
}

/// One fresh environment at `at`: the first invocation, then [`STEADY`] more.
fn environment(
    at: &Site,
    env: &[(String, String)],
    log: &Path,
    request: &Request,
    (trace_header, invocations): (Option<&str>, &mut u64),
) -> Result<Start, String> {
    let Site {
        stack,
        rie,
        bootstrap,
        spec,
        ..
    } = *at;
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let before = stack.handshakes();
    let emulator = Emulator::start(rie, bootstrap, spec, &env, log)?;
    let options = Options {
        trace_header: trace_header.map(str::to_owned),
        ..Options::default()
    };
    let mut invoke = || -> Result<Invocation, String> {
        let payload = request
            .event(*invocations)
            .ok_or_else(|| format!("{}: a request without events", spec.binary))?
            .to_string();
        let answer = emulator
            .invoke_with(payload.as_bytes(), &options)?
            .invocation;
        *invocations += 1;
        match failure(&answer) {
            Some(why) => Err(format!("{}: {why}; see {}", spec.binary, log.display())),
            None => Ok(answer),
        }
    };
    let started = Instant::now();
    let first = invoke()?;
    let cold_ms = started.elapsed().as_secs_f64() * 1e3;
    let run = |answer: &Invocation, field: &str| answer.json().ok()?["run"][field].as_f64();
    let mut steady_cpu_ms = Vec::new();
    for _ in 0..STEADY {
        steady_cpu_ms.extend(run(&invoke()?, "cpu_ms"));
    }
    let logs = emulator.logs_when(|l| invoke_durations_ms(l).len() > STEADY);
    emulator.stop();
    let durations = invoke_durations_ms(&logs);
    let (Some(&first_ms), Some(init_ms)) = (
        durations.first(),
        local_stack::emulator::init_duration_ms(&logs),
    ) else {
        return Err(format!("{}: no init or invoke durations", log.display()));
    };
    // Init's connections: opened (answered) and given up on (failed).
    let (opened_at_init, unopened_at_init) = json_lines(&logs)
        .filter(|l| {
            l["message"]
                .as_str()
                .is_some_and(|m| m.ends_with("connections opened"))
        })
        .fold((0, 0), |(answered, failed), l| {
            let count = |field: &str| usize::try_from(l[field].as_u64().unwrap_or(0)).unwrap_or(0);
            (answered + count("answered"), failed + count("failed"))
        });
    Ok(Start {
        init_ms,
        first_ms,
        steady_ms: median(durations[1..].to_vec()),
        cold_ms,
        request_handshakes: (stack.handshakes() - before).saturating_sub(opened_at_init),
        unopened_at_init,
        first_faults: run(&first, "minor_faults").map(|f| f as u64),
        cpu_ms: run(&first, "cpu_ms")
            .filter(|_| steady_cpu_ms.len() == STEADY)
            .map(|first| (first, median(steady_cpu_ms))),
    })
}

/// The hello-world probe's init at `spec`'s memory size (its CPU share): the
/// median of `starts` cold starts.
fn hello_floor(
    rie: &Path,
    hello: &Path,
    spec: &Function,
    starts: usize,
    logs: &Path,
) -> Result<Floor, String> {
    let mut hello_spec = spec.clone();
    hello_spec.env.clear();
    let log = |_| logs.join(format!("first-hello-{}.log", spec.memory_mb));
    let all = init_durations_ms(rie, hello, &hello_spec, &[], log, starts.max(3))?;
    Ok(Floor {
        function: spec.logical_id.clone(),
        memory_mb: spec.memory_mb,
        init_ms: median(all),
    })
}

/// The JSON lines of `logs`.
fn json_lines(logs: &str) -> impl Iterator<Item = Value> + '_ {
    logs.lines()
        .filter(|line| line.starts_with('{'))
        .filter_map(|line| serde_json::from_str(line).ok())
}

/// The duration of every invocation the emulator ran, in order, ms: its
/// `INVOKE RTDONE(... duration: X ms)` lines (the first `REPORT` line's
/// `Duration` includes init).
pub fn invoke_durations_ms(logs: &str) -> Vec<f64> {
    logs.lines()
        .filter(|line| line.contains("INVOKE RTDONE("))
        .filter_map(|line| {
            let rest = line.split("duration: ").nth(1)?;
            rest.split("ms").next()?.trim().parse().ok()
        })
        .collect()
}

/// The properties that hold on any machine: no request of a function as
/// shipped opens a connection (init opened them), and the arena pre-warm as
/// shipped never makes a function's first invocation slower than none
/// beyond noise (side by side, over every request size: at most 1.5x and
/// 20 ms), on-demand (init and first invocation, wall time) and with
/// provisioned concurrency (the first invocation's CPU time: its wall time
/// is mostly DynamoDB Local's scan, whose noise alone gave 158.6 against
/// 88.9 ms in a fresh-clone suite run, where the CPU times were 20.9 and
/// 21.0 ms for the typical request).
pub fn check(measured: &FirstInvocation) -> Result<(), String> {
    for row in &measured.rows {
        let handshakes: usize = row.starts.iter().map(|s| s.request_handshakes).sum();
        // A connection init could not open in time is the first request's.
        let unopened: usize = row.starts.iter().map(|s| s.unopened_at_init).sum();
        if row.variant.name == SHIPPED.name && handshakes > unopened {
            return Err(format!(
                "{} {} request: {handshakes} TLS handshake(s) in requests, \
                 {unopened} expected (connections init did not open in time)",
                row.function, row.size
            ));
        }
    }
    // The functions measured without their pre-warm.
    let mut prewarmed: Vec<&str> = measured
        .rows
        .iter()
        .filter(|r| r.variant.name == NO_PREWARM.name)
        .map(|r| r.function.as_str())
        .collect();
    prewarmed.dedup();
    for function in prewarmed {
        let of = |variant: &Variant, field: fn(&Start) -> Option<f64>| {
            median(
                measured
                    .rows
                    .iter()
                    .filter(|r| r.function == function && r.variant.name == variant.name)
                    .flat_map(|r| r.starts.iter().filter_map(field))
                    .collect(),
            )
        };
        let cold: fn(&Start) -> Option<f64> = |s| Some(s.cold_ms);
        let first_cpu: fn(&Start) -> Option<f64> = |s| s.cpu_ms.map(|(first, _)| first);
        for (variant, field, what) in [
            (SHIPPED, cold, "init and first invocation, on-demand"),
            (PROVISIONED, first_cpu, "first invocation's CPU time"),
        ] {
            let (with_ms, none_ms) = (of(&variant, field), of(&NO_PREWARM, field));
            if with_ms > none_ms * 1.5 + 20.0 {
                return Err(format!(
                    "{function}, {what}: {with_ms:.1} ms {}, {none_ms:.1} ms without pre-warm (medians)",
                    variant.name
                ));
            }
        }
    }
    Ok(())
}

/// Made-up measurements for the tests of this module and of the report.
#[cfg(test)]
pub mod fixtures {
    use super::*;

    /// One environment with these timings (cold: init and first), no
    /// handshakes, no faults or CPU counted.
    pub fn start(init_ms: f64, first_ms: f64, steady_ms: f64) -> Start {
        Start {
            init_ms,
            first_ms,
            steady_ms,
            cold_ms: init_ms + first_ms,
            request_handshakes: 0,
            unopened_at_init: 0,
            first_faults: None,
            cpu_ms: None,
        }
    }

    /// `function` at 256 MB, its `size` request ("a batch") in `variant`,
    /// measured in one environment.
    pub fn row(function: &str, size: &str, variant: Variant, start: Start) -> Row {
        Row {
            function: function.into(),
            memory_mb: 256,
            size: size.into(),
            request: "a batch".into(),
            variant,
            starts: vec![start],
        }
    }

    /// Everything measured: `rows` alone.
    pub fn measured(rows: Vec<Row>) -> FirstInvocation {
        FirstInvocation {
            rows,
            floors: Vec::new(),
            starts: 1,
            builds: "debug",
            tls: Vec::new(),
            export: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invoke_durations_come_from_rtdone_lines() {
        let logs = "24 Nov 2026 04:13:56,103 [INFO] (rapid) INIT REPORT(durationMs: 47.652000)\n\
            24 Nov 2026 04:13:56,106 [INFO] (rapid) INVOKE RTDONE(status: success, produced bytes: 0, duration: 2.304000ms)\n\
            REPORT RequestId: 3\tInit Duration: 0.02 ms\tDuration: 50.20 ms\tBilled Duration: 51 ms\n\
            24 Nov 2026 04:13:56,116 [INFO] (rapid) INVOKE RTDONE(status: success, produced bytes: 0, duration: 1.333000ms)\n";
        assert_eq!(invoke_durations_ms(logs), vec![2.304, 1.333]);
        assert!(invoke_durations_ms("").is_empty());
    }

    #[test]
    fn the_worst_ratio_is_the_shipped_functions_only() {
        let row = |size, variant, first_ms| {
            fixtures::row("F", size, variant, fixtures::start(50.0, first_ms, 10.0))
        };
        let measured = fixtures::measured(vec![
            row("small", SHIPPED, 11.0),
            row("small", NO_CONNECTIONS, 50.0),
            row("typical", SHIPPED, 13.0),
            row("large", SHIPPED, 9.0),
        ]);
        let worst = worst_shipped(&measured).expect("rows as shipped");
        assert_eq!(
            (worst.size.as_str(), worst.variant.name),
            ("typical", SHIPPED.name)
        );
        assert!((worst.ratio() - 1.3).abs() < 1e-9);
    }

    #[test]
    fn provisioned_pre_warm_is_judged_by_the_first_invocations_cpu_time() {
        let measured = |cpu_ms| {
            let environment = |variant, first_ms, cpu_ms| {
                let start = Start {
                    cpu_ms: Some((cpu_ms, 20.0)),
                    ..fixtures::start(50.0, first_ms, 90.0)
                };
                fixtures::row("ArrowWorkerFunction", "typical", variant, start)
            };
            fixtures::measured(vec![
                environment(PROVISIONED, 158.6, cpu_ms),
                environment(NO_PREWARM, 88.9, 21.0),
                environment(SHIPPED, 88.9, 21.0),
            ])
        };
        assert_eq!(check(&measured(20.9)), Ok(()), "wall time is not judged");
        let err = check(&measured(60.0)).unwrap_err();
        assert!(
            err.contains("first invocation's CPU time: 60.0 ms provisioned"),
            "{err}"
        );
    }

    #[test]
    fn a_request_may_open_only_the_connections_init_could_not() {
        let measured = |request_handshakes, unopened_at_init| {
            let start = Start {
                request_handshakes,
                unopened_at_init,
                ..fixtures::start(500.0, 300.0, 290.0)
            };
            fixtures::measured(vec![fixtures::row(
                "OrderProcessorFunction",
                "typical",
                SHIPPED,
                start,
            )])
        };
        assert_eq!(check(&measured(0, 0)), Ok(()));
        assert_eq!(check(&measured(1, 1)), Ok(()), "init ran out of time");
        let err = check(&measured(1, 0)).unwrap_err();
        assert!(
            err.contains("1 TLS handshake(s) in requests, 0 expected"),
            "{err}"
        );
    }
}

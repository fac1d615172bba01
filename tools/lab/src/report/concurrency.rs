//! Section 6 of `BENCHMARKS.md`: many requests in one environment (Lambda
//! Managed Instances). Between markers, so `cargo xtask lab concurrency` can
//! replace it in an existing report.

use crate::concurrency::{
    Concurrency, GROWTH_BOUND_MIB, GROWTH_BOUND_SHARE, Level, Measured, Run, SHIPPED, STORE_MS,
};
use crate::machine::Machine;
use crate::power;
use crate::splice::{self, Markers};
use lab_probes::plot::{self, Chart, Kind, Series};
use std::fmt::Write as _;
use std::path::Path;

/// Markers around the section.
pub const SECTION: Markers = ("<!-- concurrency -->", "<!-- /concurrency -->");

/// What was measured, or why nothing was.
pub type Measurement = Result<Concurrency, String>;

/// The section, between its markers; its plots under `dir`.
pub fn section(dir: &Path, measured: &Measurement, machine: &Machine) -> Result<String, String> {
    let mut md = String::new();
    let _ = writeln!(md, "{}", SECTION.0);
    let _ = writeln!(
        md,
        "## 6. Many requests in one environment (Lambda Managed Instances)\n"
    );
    let measured = match measured {
        Err(why) => {
            let _ = writeln!(md, "Not measured: {why}.\n\n{}", SECTION.1);
            return Ok(md);
        }
        Ok(measured) if measured.functions.is_empty() => {
            let _ = writeln!(
                md,
                "{}\n\n{}",
                super::no_probe(
                    "function of the template that Managed Instances can run \
                     (`PerExecutionEnvironmentMaxConcurrency`)",
                    "concurrency"
                ),
                SECTION.1
            );
            return Ok(md);
        }
        Ok(measured) => measured,
    };
    intro(&mut md, measured, machine);
    advice(&mut md, measured);
    for function in &measured.functions {
        function_part(&mut md, dir, function)?;
    }
    cost(&mut md, measured);
    let _ = writeln!(md, "{}", SECTION.1);
    Ok(md)
}

fn intro(md: &mut String, measured: &Concurrency, machine: &Machine) {
    let limits = match &measured.limits {
        Ok(()) => "in a cgroup of its Managed Instances memory size and vCPUs (its memory over \
                   `ExecutionEnvironmentMemoryGiBPerVCpu`, from `template.yaml` with the Managed \
                   Instances parameters set)"
            .to_owned(),
        Err(why) => format!("without CPU and memory limits ({why})"),
    };
    let _ = writeln!(
        md,
        "Measured on {} (`cargo xtask lab concurrency` measures this section again on its own). \
         On Lambda Managed Instances one environment serves up to `PerExecutionEnvironmentMaxConcurrency` \
         invocations at once; `shared::run` spawns each on the tokio runtime. Each function's \
         `concurrency` probe (`functions/<name>/lab/`) cold-starts its real handler as its \
         `main` does, with the template's settings, {limits}, once per allocator. N clients each send \
         their next request when their last is answered; each level runs twice (warm-up, then measured). \
         The stores are in memory and answer after {STORE_MS} ms a call (a DynamoDB write, a page of a \
         scan), so waiting is part of a request as on AWS. Levels above the template's \
         `PerExecutionEnvironmentMaxConcurrency` never reach one environment on Lambda (it routes them \
         to another): they show what that setting guards against, and the growth check leaves them out. \
         \"RSS per extra request\" is the peak RSS at the template's maximum concurrency over that at one, \
         per extra request in flight; \"growth\" is what a level gained over its own warm-up (bound: {GROWTH_BOUND_MIB} MiB or \
         {:.0}% of its RSS, whichever is more).\n",
        machine.line(),
        GROWTH_BOUND_SHARE * 100.0
    );
}

/// The run of `allocator` in `function`.
fn run<'a>(function: &'a Measured, allocator: &str) -> Option<&'a Run> {
    function.runs.iter().find(|r| r.allocator == allocator)
}

/// The level with `clients` in `run`.
fn level(run: &Run, clients: usize) -> Option<&Level> {
    run.levels.iter().find(|l| l.clients == clients)
}

/// The most measured level at or below the template's maximum concurrency.
fn at_most<'a>(run: &'a Run, function: &Measured) -> Option<&'a Level> {
    function.reachable(run).last()
}

/// RSS per extra request in flight, from one at a time to the template's maximum.
fn rss_per_request(run: &Run, function: &Measured) -> Option<f64> {
    let (one, top) = (level(run, 1)?, at_most(run, function)?);
    (top.clients > 1).then(|| (top.rss_max_mib - one.rss_max_mib) / (top.clients - 1) as f64)
}

/// Throughput at `clients` over `clients` times the throughput of one.
fn efficiency(run: &Run, clients: usize) -> Option<f64> {
    let (one, at) = (level(run, 1)?, level(run, clients)?);
    Some(at.throughput() / one.throughput().max(f64::EPSILON) / clients as f64)
}

/// Which allocator to pick on Managed Instances, from these numbers:
/// throughput at each function's maximum concurrency relative to the best,
/// and RSS per extra request.
fn advice(md: &mut String, measured: &Concurrency) {
    let allocators: Vec<&str> = measured
        .functions
        .first()
        .map(|f| f.runs.iter().map(|r| r.allocator).collect())
        .unwrap_or_default();
    let mut scores = Vec::new();
    for allocator in &allocators {
        let mut relative = Vec::new();
        let mut rss = 0.0;
        for function in &measured.functions {
            let best = function
                .runs
                .iter()
                .filter_map(|r| at_most(r, function).map(Level::throughput))
                .fold(0.0, f64::max);
            let Some(ours) = run(function, allocator) else {
                continue;
            };
            let throughput = at_most(ours, function).map_or(0.0, Level::throughput);
            relative.push(throughput / best.max(f64::EPSILON));
            rss += rss_per_request(ours, function).unwrap_or(0.0);
        }
        let mean = relative.iter().sum::<f64>() / relative.len().max(1) as f64;
        scores.push((*allocator, mean, rss));
    }
    scores.sort_by(|a, b| b.1.total_cmp(&a.1));
    let _ = writeln!(
        md,
        "**Which allocator on Managed Instances.** Throughput at each function's maximum concurrency, \
         as a share of the best allocator's, averaged over the {} functions, and the RSS they \
         add per extra request in flight (summed):\n",
        measured.functions.len()
    );
    let _ = writeln!(
        md,
        "| allocator | throughput vs best | RSS per extra request, MiB (sum) |\n|---|---:|---:|"
    );
    for (allocator, mean, rss) in &scores {
        let _ = writeln!(md, "| {allocator} | {:.0}% | {rss:.2} |", mean * 100.0);
    }
    if let Some((best, mean, _)) = scores.first() {
        let shipped = scores.iter().find(|s| s.0 == SHIPPED);
        if let Some(((leanest, _, lean), (_, _, ours))) = scores
            .iter()
            .min_by(|a, b| a.2.total_cmp(&b.2))
            .zip(shipped)
        {
            let _ = writeln!(
                md,
                "\n{leanest} adds the least memory per extra request in flight ({lean:.2} MiB over the \
                 {} functions, {SHIPPED} {ours:.2} MiB): the pick where memory, not CPU, bounds an \
                 environment (a lower memory per vCPU, or far more requests at once than here).",
                measured.functions.len()
            );
        }
        let verdict = match shipped {
            Some((_, ours, _)) if best == &SHIPPED || ours / mean >= 0.95 => format!(
                "{SHIPPED} (shipped) is within 5% of the best here: keep it on Managed Instances."
            ),
            Some((_, ours, _)) => format!(
                "{best} is {:.0}% ahead of {SHIPPED} here: worth trying on Managed Instances \
                 (`shared::global_allocator!` in the function's `main.rs`).",
                (mean / ours - 1.0) * 100.0
            ),
            None => format!("{best} leads here."),
        };
        let _ = writeln!(md, "\n{verdict}\n");
    }
}

/// One function's table, scaling lines and plot.
fn function_part(md: &mut String, dir: &Path, function: &Measured) -> Result<(), String> {
    let vcpus = function.runs.first().map_or(0.0, |r| r.vcpus);
    let _ = writeln!(
        md,
        "### {} ({} MB, {} GiB per vCPU: {vcpus:.2} vCPUs detected; up to {} at once)\n\n\
         Each request: {}. Cells: requests per second, p50 / p99 ms, peak RSS MiB.\n",
        function.workload.binary,
        function.memory_mb,
        function.managed.memory_gib_per_vcpu,
        function.managed.max_concurrency,
        function.workload.request
    );
    table(md, function);
    for r in &function.runs {
        scaling(md, function, r);
    }
    let file = plot(dir, function)?;
    let _ = writeln!(
        md,
        "\n![{}: throughput against concurrency]({}/{file})\n",
        function.workload.binary,
        super::PLOTS
    );
    Ok(())
}

/// Levels down, allocators across.
fn table(md: &mut String, function: &Measured) {
    let _ = write!(md, "| at once |");
    for r in &function.runs {
        let _ = write!(md, " {} |", r.allocator);
    }
    let _ = writeln!(md, "\n|---:|{}", "---|".repeat(function.runs.len()));
    let clients: Vec<usize> = function
        .runs
        .first()
        .map(|r| r.levels.iter().map(|l| l.clients).collect())
        .unwrap_or_default();
    for c in clients {
        let _ = write!(md, "| {c} |");
        for r in &function.runs {
            let cell = level(r, c).map_or_else(String::new, |l| {
                let busy = match l.busy {
                    0 => String::new(),
                    n => format!(", {n} Busy"),
                };
                format!(
                    "{:.0}/s, {:.1} / {:.1} ms, {:.0} MiB{busy}",
                    l.throughput(),
                    l.p50_ms,
                    l.p99_ms,
                    l.rss_max_mib
                )
            });
            let _ = write!(md, " {cell} |");
        }
        let _ = writeln!(md);
    }
    let _ = writeln!(md);
}

/// How `run` scaled: at its vCPUs against linear (where it has more than
/// one), at the template's maximum against one; RSS per extra request and
/// the most growth once warm.
fn scaling(md: &mut String, function: &Measured, run: &Run) {
    let whole = run.vcpus.round().max(1.0) as usize;
    let per_vcpu = match efficiency(run, whole) {
        Some(e) if whole > 1 => format!(
            "at {whole} at once (its vCPUs) {:.0}% of linear; ",
            e * 100.0
        ),
        _ => String::new(),
    };
    let top = at_most(run, function).map_or(1, |l| l.clients);
    let speed_up = level(run, 1).zip(level(run, top)).map_or(0.0, |(one, at)| {
        at.throughput() / one.throughput().max(f64::EPSILON)
    });
    let growth = function
        .reachable(run)
        .map(|l| l.rss_end_mib - l.rss_warm_mib)
        .fold(0.0, f64::max);
    let _ = writeln!(
        md,
        "- {}: {per_vcpu}at {top} at once {speed_up:.2}x the throughput of one; RSS per extra request {:.2} MiB; most growth once warm up to {top} at once {growth:.2} MiB.",
        run.allocator,
        rss_per_request(run, function).unwrap_or(0.0),
    );
}

/// Throughput against concurrency, one line per allocator; the file name.
fn plot(dir: &Path, function: &Measured) -> Result<String, String> {
    let file = format!("concurrency-{}.svg", function.workload.binary);
    let series: Vec<Series> = function
        .runs
        .iter()
        .map(|r| Series {
            name: r.allocator.to_owned(),
            points: r
                .levels
                .iter()
                .map(|l| (l.clients as f64, l.throughput()))
                .collect(),
            labels: Vec::new(),
        })
        .collect();
    let title = format!(
        "{}: throughput against requests at once",
        function.workload.binary
    );
    plot::write_svg(
        &dir.join(super::PLOTS).join(&file),
        &Chart {
            title: &title,
            x_label: "requests at once (one environment)",
            y_label: "requests per second",
            kind: Kind::Lines,
            log_x: true,
            series: &series,
        },
    )?;
    Ok(file)
}

/// On demand against Managed Instances, per million requests.
fn cost(md: &mut String, measured: &Concurrency) {
    let _ = writeln!(
        md,
        "### Cost per million requests: on demand against Managed Instances\n\n\
         On demand: the template's memory size, one request at a time under its CPU share (mean time, \
         billed per ms at ${}/GB-s x86_64, plus ${:.2} per million requests). Managed Instances: the \
         environment's share of an x86_64 instance of its memory per vCPU (EC2 on-demand, us-east-1) plus \
         the {:.0}% management fee and the same request charge (Lambda prices read {}), serving the \
         throughput measured above at its maximum concurrency ({SHIPPED}) without a pause. Lambda keeps \
         at least three instances running, so below that traffic Managed Instances cost more than this.\n",
        power::X86_64_GB_SECOND,
        power::PER_MILLION_REQUESTS,
        power::MANAGED_FEE * 100.0,
        power::MANAGED_PRICES_READ
    );
    let _ = writeln!(
        md,
        "| function | on demand | $ per 1M | Managed Instances | $ per 1M |\n|---|---|---:|---|---:|"
    );
    for function in &measured.functions {
        let on_demand = match &function.on_demand {
            Ok((mb, ms)) => (
                format!("{mb} MB, {ms:.1} ms"),
                format!(
                    "{:.2}",
                    power::cost_per_million(*ms, u64::from(*mb), power::X86_64_GB_SECOND)
                ),
            ),
            Err(why) => (format!("not measured: {why}"), String::new()),
        };
        let instance = power::INSTANCES
            .iter()
            .find(|i| i.memory_gib_per_vcpu == function.managed.memory_gib_per_vcpu);
        let managed = run(function, SHIPPED)
            .zip(instance)
            .and_then(|(r, instance)| {
                let top = at_most(r, function)?;
                let vcpus = function.managed.vcpus(function.memory_mb);
                Some((
                    format!(
                        "{} MB on {}, {:.0}/s at {} at once",
                        function.memory_mb,
                        instance.name,
                        top.throughput(),
                        top.clients
                    ),
                    format!(
                        "{:.2}",
                        power::managed_cost_per_million(instance, vcpus, top.throughput())
                    ),
                ))
            });
        let (managed, managed_cost) = managed.unwrap_or_default();
        let _ = writeln!(
            md,
            "| {} | {} | {} | {managed} | {managed_cost} |",
            function.workload.binary, on_demand.0, on_demand.1
        );
    }
    let _ = writeln!(md);
}

/// The report in `dir`, if it has the section to replace.
pub fn rewritable(dir: &Path) -> Result<String, String> {
    splice::rewritable(dir, &[SECTION])
}

/// Replace the section of the report in `dir`.
pub fn rewrite(dir: &Path, measured: &Measurement, machine: &Machine) -> Result<(), String> {
    splice::rewrite(dir, &[(SECTION, section(dir, measured, machine)?)])
}

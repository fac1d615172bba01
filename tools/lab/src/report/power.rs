//! Section 4 of `BENCHMARKS.md` (measured power tuning) and its line in the
//! summary. Both sit between markers, so `cargo xtask lab power` can replace
//! them in an existing report without running the rest of the lab.

use super::PLOTS;
use crate::machine::Machine;
use crate::power::{self, Outcome, Row, Source};
use crate::splice::{self, Markers};
use crate::tuning::Curve;
use lab_probes::plot::{self, Chart, Kind, Series};
use std::fmt::Write as _;
use std::path::Path;

/// Markers around the summary line and the section.
pub const SUMMARY: Markers = ("<!-- power-summary -->", "<!-- /power-summary -->");
pub const SECTION: Markers = ("<!-- power-tuning -->", "<!-- /power-tuning -->");

/// What was measured: the curves, or why not.
pub type Tuning = Result<Vec<Curve>, String>;

/// The summary line, between its markers.
pub fn summary(tuning: &Tuning) -> String {
    let mut md = String::new();
    let _ = writeln!(md, "{}", SUMMARY.0);
    if let Ok(curves) = tuning {
        let _ = writeln!(
            md,
            "- **Memory size** (section 4, measured under each size's CPU share; ms per invocation, $ per million on x86_64):"
        );
        for curve in curves {
            let (rows, _) = power::rows(&curve.points);
            let _ = writeln!(
                md,
                "  - {}: {}",
                curve.binary,
                picks(&rows, curve.template_mb)
            );
        }
    }
    let _ = writeln!(md, "{}", SUMMARY.1);
    md
}

/// The cheapest and the fastest size of a curve, and the template's.
fn picks(rows: &[Row], template_mb: u64) -> String {
    let priced: Vec<(&Row, f64, Source, f64)> = rows
        .iter()
        .filter_map(|r| {
            let (ms, source) = r.lambda_ms?;
            Some((r, ms, source, r.cost?.0))
        })
        .collect();
    let describe = |(row, ms, source, cost): &(&Row, f64, Source, f64)| {
        let modelled = if *source == Source::Modelled {
            ", modelled"
        } else {
            ""
        };
        format!("{} MB ({ms:.0} ms, ${cost:.2}{modelled})", row.point.mb)
    };
    let cheapest = priced.iter().min_by(|a, b| a.3.total_cmp(&b.3));
    let fastest = priced.iter().min_by(|a, b| a.1.total_cmp(&b.1));
    let template = priced.iter().find(|p| p.0.point.mb == template_mb);
    match (cheapest, fastest) {
        (Some(cheapest), Some(fastest)) => format!(
            "cheapest {}, fastest {}; the template's {}",
            describe(cheapest),
            describe(fastest),
            template.map_or(format!("{template_mb} MB was not measured"), describe)
        ),
        _ => "no size answered".to_owned(),
    }
}

/// The section, between its markers, with one plot per function in `dir`.
pub fn section(dir: &Path, tuning: &Tuning, machine: &Machine) -> Result<String, String> {
    let mut md = String::new();
    let _ = writeln!(md, "{}", SECTION.0);
    let _ = writeln!(md, "## 4. Power tuning, measured\n");
    match tuning {
        Err(why) => {
            let _ = writeln!(md, "Not measured: {why}.\n");
        }
        Ok(curves) => {
            intro(&mut md, curves, machine);
            for curve in curves {
                function(&mut md, dir, curve)?;
            }
        }
    }
    let _ = writeln!(md, "{}", SECTION.1);
    Ok(md)
}

fn intro(md: &mut String, curves: &[Curve], machine: &Machine) {
    let cores = machine.cores;
    let _ = writeln!(
        md,
        "Measured by `cargo xtask lab power` (also part of `cargo xtask lab`) on {}. Each function's release \
         bootstrap (`sam build`) runs under the runtime interface emulator at every memory size, in a cgroup \
         with that size's memory limit and Lambda's CPU share (one vCPU per {} MB) as a CPU quota, capped at \
         this machine's {cores} core(s). After one warm-up invocation, {} steady invocations each; \"measured \
         ms\" is the median of the `Duration` the emulator reports (what Lambda bills). \"Detected\" is the CPU \
         share and worker count the function read at its cold start (its `shared init done` line).\n",
        machine.line(),
        shared::vcpus::MB_PER_VCPU,
        curves
            .iter()
            .map(|c| format!("{} for the {}", c.steady, c.binary))
            .collect::<Vec<_>>()
            .join(", "),
    );
    let _ = writeln!(
        md,
        "Sizes whose share exceeds {cores} core(s) are measured at the cap (marked \"capped\"): there, and only \
         there, the \"Lambda ms\" column is modelled, `fixed + cpu / vCPUs` fitted by least squares to the \
         sizes of 1 to {cores} whole vCPUs (the part more CPU speeds up and the part it does not, such as \
         waiting for DynamoDB). Cost per million invocations: Lambda ms rounded up to whole ms x GB x \
         the price (x86_64 ${} and arm64 ${} per GB-second) + ${:.2} for the requests; the arm64 column prices \
         the same duration (Graviton is not measured here). DynamoDB Local runs on the same machine, outside \
         the quota. On a busy machine the figures are noisy; the shape of each curve is what to read. On \
         Lambda Managed Instances a function is billed per instance, not per millisecond: section 6 gives \
         each function's cost per million requests there beside its on-demand cost.\n",
        power::X86_64_GB_SECOND,
        power::ARM64_GB_SECOND,
        power::PER_MILLION_REQUESTS
    );
}

fn function(md: &mut String, dir: &Path, curve: &Curve) -> Result<(), String> {
    let (rows, model) = power::rows(&curve.points);
    let _ = writeln!(
        md,
        "### {} ({} MB in the template)\n\nEach invocation: {}.\n",
        curve.binary, curve.template_mb, curve.description
    );
    let _ = writeln!(
        md,
        "| memory MB | Lambda vCPUs | detected vCPUs (workers) | measured ms | Lambda ms | from | $ per 1M x86_64 | $ per 1M arm64 |\n\
         |---:|---:|---:|---:|---:|---|---:|---:|"
    );
    for row in &rows {
        let mb = if row.point.mb == curve.template_mb {
            format!("**{}**", row.point.mb)
        } else {
            row.point.mb.to_string()
        };
        let detected = match &row.point.outcome {
            Outcome::Measured(m) => format!(
                "{:.2} ({}){}",
                m.detected_vcpus,
                m.workers,
                if row.point.capped { " capped" } else { "" }
            ),
            Outcome::Failed(why) => format!("failed: {why}"),
        };
        let (lambda_ms, from) = match row.lambda_ms {
            Some((ms, Source::Measured)) => (format!("{ms:.1}"), "measured"),
            Some((ms, Source::Modelled)) => (format!("{ms:.1}"), "model"),
            None => (String::new(), ""),
        };
        let (x86, arm) = row.cost.map_or((String::new(), String::new()), |(x, a)| {
            (format!("{x:.2}"), format!("{a:.2}"))
        });
        let _ = writeln!(
            md,
            "| {mb} | {:.2} | {detected} | {} | {lambda_ms} | {from} | {x86} | {arm} |",
            row.lambda_vcpus,
            row.measured_ms
                .map_or(String::new(), |ms| format!("{ms:.1}")),
        );
    }
    if let Some(model) = model {
        let _ = writeln!(
            md,
            "\nModel for the capped sizes: {:.1} ms + {:.1} ms / vCPUs.",
            model.fixed_ms, model.cpu_ms
        );
    }
    let _ = writeln!(md, "\n{}\n", picks(&rows, curve.template_mb));
    if let Some(file) = plot(dir, curve, &rows)? {
        let _ = writeln!(md, "![{}: cost against duration]({file})\n", curve.binary);
    }
    Ok(())
}

/// Cost against duration (log axis), measured and modelled points apart,
/// x86_64 labelled with the memory size. `None` if no size answered.
fn plot(dir: &Path, curve: &Curve, rows: &[Row]) -> Result<Option<String>, String> {
    let mut series = Vec::new();
    for (arch, labelled) in [("x86_64", true), ("arm64", false)] {
        for (source, name) in [
            (Source::Measured, "measured"),
            (Source::Modelled, "modelled"),
        ] {
            let picked: Vec<(&Row, f64, (f64, f64))> = rows
                .iter()
                .filter_map(|r| match (r.lambda_ms, r.cost) {
                    (Some((ms, s)), Some(cost)) if s == source => Some((r, ms, cost)),
                    _ => None,
                })
                .collect();
            if picked.is_empty() {
                continue;
            }
            series.push(Series {
                name: format!("{arch} {name}"),
                points: picked
                    .iter()
                    .map(|(_, ms, (x86, arm))| (*ms, if labelled { *x86 } else { *arm }))
                    .collect(),
                labels: picked
                    .iter()
                    .map(|(r, ..)| {
                        if labelled {
                            format!("{} MB", r.point.mb)
                        } else {
                            String::new()
                        }
                    })
                    .collect(),
            });
        }
    }
    if series.is_empty() {
        return Ok(None);
    }
    let file = format!("{PLOTS}/power-{}.svg", curve.binary);
    plot::write_svg(
        &dir.join(&file),
        &Chart {
            title: &format!(
                "{}: cost per million invocations against duration",
                curve.binary
            ),
            x_label: "duration on Lambda (ms, log scale)",
            y_label: "$ per million invocations",
            kind: Kind::Points,
            log_x: true,
            series: &series,
        },
    )?;
    Ok(Some(file))
}

/// The report in `dir`, if [`rewrite`] can replace its power tuning.
pub fn rewritable(dir: &Path) -> Result<String, String> {
    splice::rewritable(dir, &[SUMMARY, SECTION])
}

/// Replace the summary line and the section of the report in `dir` with
/// `tuning`'s.
pub fn rewrite(dir: &Path, tuning: &Tuning, machine: &Machine) -> Result<(), String> {
    splice::rewrite(
        dir,
        &[
            (SUMMARY, summary(tuning)),
            (SECTION, section(dir, tuning, machine)?),
        ],
    )
}

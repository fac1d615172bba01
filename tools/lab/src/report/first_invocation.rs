//! Section 5 of `BENCHMARKS.md`: the first invocation against the steady
//! state, on the functions' own bootstraps under their CPU shares, over TLS.
//! It sits between markers, so `cargo xtask lab first-invocation` can replace
//! it in an existing report without running the rest of the lab.

use crate::export::Export;
use crate::first_invocation::{
    FIRST_OVER_STEADY_GOAL, FirstInvocation, NO_CONNECTIONS, NOT_SAMPLED, SHIPPED, STEADY,
    TRACING_OFF, Variant, worst_shipped,
};
use crate::machine::Machine;
use crate::splice::{self, Markers};
use crate::tls;
use lab_probes::stats::median;
use std::fmt::Write as _;
use std::path::Path;

/// Markers around the section.
pub const SECTION: Markers = ("<!-- first-invocation -->", "<!-- /first-invocation -->");

/// The measurements, or why there are none.
pub type Measured = Result<FirstInvocation, String>;

/// The section, between its markers.
pub fn section(measured: &Measured, machine: &Machine) -> String {
    let mut md = String::new();
    let _ = writeln!(md, "{}", SECTION.0);
    let _ = writeln!(
        md,
        "## 5. The first invocation against the steady state, as users meet it\n"
    );
    let measured = match measured {
        Err(why) => {
            let _ = writeln!(md, "Not measured: {why}.\n\n{}", SECTION.1);
            return md;
        }
        Ok(measured) => measured,
    };
    intro(&mut md, measured, machine);
    rows_table(&mut md, measured);
    goal_line(&mut md, measured);
    floors_table(&mut md, measured);
    tracing_table(&mut md, measured);
    if let Some(export) = &measured.export {
        export_table(&mut md, export);
    }
    tls_table(&mut md, &measured.tls);
    let _ = writeln!(md, "\n{}", SECTION.1);
    md
}

/// What was measured, how, and what each column means.
fn intro(md: &mut String, measured: &FirstInvocation, machine: &Machine) {
    let _ = writeln!(
        md,
        "Measured on {} (`cargo xtask lab first-invocation` measures this section again on its own). \
         Each function's {} bootstrap under the runtime interface emulator, in a cgroup with its \
         template's CPU share and memory limit (memory / 1,769 MB of one core; an on-demand init at \
         least one whole core: as on Lambda), DynamoDB \
         Local and S3 (moto) behind a TLS front with a certificate authority made for the run (given \
         in `SSL_CERT_FILE`), as on AWS. Each row: {} fresh environments, the variants of a request \
         interleaved; medians. \"Init\" is the emulator's `INIT REPORT`; \"first\" and \"steady\" are \
         invocations without init (`INVOKE RTDONE`; steady: the median of the {STEADY} after the first); \
         \"cold\" is what a caller waits for at an on-demand cold start, init and first invocation, \
         request to answer. With provisioned concurrency init happens ahead of traffic: \"first\" is \
         then what the caller waits for. \"Faults\" are the first invocation's minor page faults, where the \
         function reports them (`run.minor_faults` in its answer; the process's, so with \
         `PREWARM=background` they include the pre-warm thread's), and \"CPU\" the CPU time of the \
         first and of a steady invocation (its `run.cpu_ms`, all threads; under a CPU share a wall time also depends on \
         where the work falls in the quota's 100 ms period, the CPU time does not). \"Handshakes\" count TLS handshakes during the invocations, beyond \
         the connections opened at init.\n",
        machine.line(),
        measured.builds,
        measured.starts
    );
}

/// One row per function, request and variant: the timings' medians.
fn rows_table(md: &mut String, measured: &FirstInvocation) {
    let _ = writeln!(
        md,
        "| function | request | variant | init ms | first ms | steady ms | first / steady | cold ms | faults | CPU ms first / steady | handshakes |"
    );
    let _ = writeln!(md, "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for row in &measured.rows {
        let faults = row
            .starts
            .iter()
            .filter_map(|s| s.first_faults)
            .map(|f| f as f64)
            .collect::<Vec<_>>();
        let handshakes: usize = row.starts.iter().map(|s| s.request_handshakes).sum();
        let cpu: Vec<(f64, f64)> = row.starts.iter().filter_map(|s| s.cpu_ms).collect();
        let cpu = if cpu.len() == row.starts.len() && !cpu.is_empty() {
            let of = |pick: fn(&(f64, f64)) -> f64| median(cpu.iter().map(pick).collect());
            format!("{:.1} / {:.1}", of(|c| c.0), of(|c| c.1))
        } else {
            "-".to_owned()
        };
        let _ = writeln!(
            md,
            "| {} ({} MB) | {}: {} | {} | {:.1} | {:.1} | {:.1} | {:.2} | {:.1} | {} | {cpu} | {handshakes} |",
            row.function,
            row.memory_mb,
            row.size,
            row.request,
            row.variant.name,
            row.median(|s| s.init_ms),
            row.median(|s| s.first_ms),
            row.median(|s| s.steady_ms),
            row.ratio(),
            row.median(|s| s.cold_ms),
            if faults.is_empty() {
                "-".to_owned()
            } else {
                format!("{:.0}", median(faults))
            },
        );
    }
}

/// The largest first / steady of the functions as shipped, against the goal.
fn goal_line(md: &mut String, measured: &FirstInvocation) {
    let Some(worst) = worst_shipped(measured) else {
        return;
    };
    let ratio = worst.ratio();
    let verdict = if ratio <= FIRST_OVER_STEADY_GOAL {
        "within"
    } else {
        "above"
    };
    let _ = writeln!(
        md,
        "\nAs shipped, first / steady is at most {ratio:.2} ({}, {} request): {verdict} the \
         template's goal of {FIRST_OVER_STEADY_GOAL} for every request size of every function.",
        worst.function, worst.size
    );
}

/// Each function's init against a hello-world function's at its memory size.
fn floors_table(md: &mut String, measured: &FirstInvocation) {
    let _ = writeln!(
        md,
        "\nInit against the floor: a hello-world function (`tools/lab/probes/examples/lab_hello.rs`: the \
         runtime, tokio and the allocator) at the same memory size, same emulator and cgroup. A \
         function's own init work is its init without the connections it opens ahead of the first \
         request (that part is moved out of the first invocation, not added); medians over its rows.\n"
    );
    let _ = writeln!(
        md,
        "| function | memory MB | hello-world init ms | init as shipped ms | init without connections ms | own work above floor ms |"
    );
    let _ = writeln!(md, "|---|---:|---:|---:|---:|---:|");
    for floor in &measured.floors {
        let init = |variant: &str| {
            let all: Vec<f64> = measured
                .rows
                .iter()
                .filter(|r| r.function == floor.function && r.variant.name == variant)
                .flat_map(|r| r.starts.iter().map(|s| s.init_ms))
                .collect();
            (!all.is_empty()).then(|| median(all))
        };
        let shipped = init(SHIPPED.name);
        let own = init(NO_CONNECTIONS.name).or(shipped);
        let cell = |v: Option<f64>| v.map_or_else(|| "-".to_owned(), |v| format!("{v:.1}"));
        let _ = writeln!(
            md,
            "| {} | {} | {:.1} | {} | {} | {} |",
            floor.function,
            floor.memory_mb,
            floor.init_ms,
            cell(shipped),
            cell(init(NO_CONNECTIONS.name)),
            cell(own.map(|v| v - floor.init_ms)),
        );
    }
}

/// What tracing costs each function: as shipped (every invocation sampled,
/// its spans sent to the X-Ray daemon) and on but not sampled, against
/// `TRACING=off`; medians over the function's requests. Absent when the
/// tracing variants were not measured (the quick run).
fn tracing_table(md: &mut String, measured: &FirstInvocation) {
    let of =
        |function: &str, variant: &Variant, field: fn(&crate::first_invocation::Start) -> f64| {
            let all: Vec<f64> = measured
                .rows
                .iter()
                .filter(|r| r.function == function && r.variant.name == variant.name)
                .flat_map(|r| r.starts.iter().map(field))
                .collect();
            (!all.is_empty()).then(|| median(all))
        };
    let mut functions: Vec<&str> = measured.rows.iter().map(|r| r.function.as_str()).collect();
    functions.dedup();
    if functions
        .iter()
        .all(|f| of(f, &TRACING_OFF, |s| s.init_ms).is_none())
    {
        return;
    }
    let _ = writeln!(
        md,
        "\nThe cost of tracing (`shared/src/traces/`): each function as shipped, every invocation \
         sampled and its spans sent as OTLP over UDP to a daemon when it ends; with tracing on but the \
         invocation not sampled (`Sampled=0`: spans made, none sent); and with `TRACING=off` (no tracer). \
         Medians over the function's requests and fresh environments of the rows above; the differences \
         are against `TRACING=off`.\n"
    );
    let _ = writeln!(
        md,
        "| function | variant | init ms | first ms | steady ms | first / steady | init + ms | steady + ms |"
    );
    let _ = writeln!(md, "|---|---|---:|---:|---:|---:|---:|---:|");
    for function in functions {
        let (Some(off_init), Some(off_steady)) = (
            of(function, &TRACING_OFF, |s| s.init_ms),
            of(function, &TRACING_OFF, |s| s.steady_ms),
        ) else {
            continue;
        };
        for variant in [SHIPPED, NOT_SAMPLED, TRACING_OFF] {
            let (Some(init), Some(first), Some(steady)) = (
                of(function, &variant, |s| s.init_ms),
                of(function, &variant, |s| s.first_ms),
                of(function, &variant, |s| s.steady_ms),
            ) else {
                continue;
            };
            let _ = writeln!(
                md,
                "| {function} | {} | {init:.1} | {first:.1} | {steady:.1} | {:.2} | {:+.1} | {:+.2} |",
                variant.name,
                first / steady.max(1e-3),
                init - off_init,
                steady - off_steady,
            );
        }
    }
}

/// What handing an invocation's spans off costs it, per way out of the
/// function, against the shipped one.
fn export_table(md: &mut String, export: &Export) {
    let Some(shipped) = export.rows.first() else {
        return;
    };
    let _ = writeln!(
        md,
        "\nWhy spans go to the X-Ray daemon (`tools/lab/src/export.rs`, probe \
         `tools/lab/probes/examples/lab_export.rs`): the time an invocation spends handing off its \
         spans (an SQS batch of ten records: {} spans), per way out of a Lambda function, as a \
         function at {} MB (its CPU share), one environment, {} rounds with the three paths \
         interleaved. The daemon is outside the environment, as Lambda's is; the OTLP collector runs \
         inside it, as a collector extension does, and its answer is awaited (what an exporter \
         flushing at the end of an invocation waits for); log lines go to the function's stdout, \
         captured as Lambda captures it. Every path delivered every span (checked).\n",
        export.spans, export.memory_mb, export.rounds
    );
    let _ = writeln!(
        md,
        "| export path | median µs | p90 µs | median / shipped |"
    );
    let _ = writeln!(md, "|---|---:|---:|---:|");
    for row in &export.rows {
        let _ = writeln!(
            md,
            "| {} | {:.0} | {:.0} | {:.2} |",
            row.description,
            row.median_us(),
            row.p90_us(),
            row.median_us() / shipped.median_us().max(1e-3)
        );
    }
}

/// The TLS client's cold cost, per crypto provider and roots.
fn tls_table(md: &mut String, rows: &[tls::Row]) {
    let Some(first) = rows.first() else { return };
    let _ = writeln!(
        md,
        "\nThe TLS client's cold cost, which chose the functions' crypto provider: the \
         `tools/lab/probes/examples/lab_tls.rs` probe as a function at {} MB (its CPU share), in a fresh \
         environment each time ({} per variant, interleaved; medians): the SDK's configuration and a \
         DynamoDB client on rustls with the provider, then two `DescribeTable` calls to DynamoDB \
         Local behind the TLS front: the first opens the connection (TCP and the TLS handshake, the \
         certificate checked against the roots loaded), the second reuses it. Under a CPU share a \
         call's wall time also depends on where it falls in the quota's 100 ms period (a call that \
         outruns the share waits for the next one), so the first call's CPU time (all threads) is \
         given too: what it costs at any share. System roots: the machine's bundle \
         (`/etc/ssl/certs`, as a function loads its system's) plus the run's authority.\n",
        first.memory_mb,
        first.client_ms.len()
    );
    let _ = writeln!(
        md,
        "| crypto provider | roots | SDK config and client ms | first call ms | first call CPU ms | second call ms |"
    );
    let _ = writeln!(md, "|---|---|---:|---:|---:|---:|");
    for row in rows {
        let provider = match row.variant.provider {
            "ring" => "ring (shipped)",
            _ => "aws-lc (the SDK's default)",
        };
        let roots = if row.variant.system_roots {
            "system and the run's authority"
        } else {
            "the run's authority only"
        };
        let _ = writeln!(
            md,
            "| {provider} | {roots} | {:.1} | {:.1} | {:.1} | {:.1} |",
            median(row.client_ms.clone()),
            median(row.first_call_ms.clone()),
            median(row.first_call_cpu_ms.clone()),
            median(row.second_call_ms.clone()),
        );
    }
}

/// The report in `dir`, if [`rewrite`] can replace this section.
pub fn rewritable(dir: &Path) -> Result<String, String> {
    splice::rewritable(dir, &[SECTION])
}

/// Replace this section of the report in `dir`.
pub fn rewrite(dir: &Path, measured: &Measured, machine: &Machine) -> Result<(), String> {
    splice::rewrite(dir, &[(SECTION, section(measured, machine))])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::first_invocation::{Floor, Row, Start, fixtures};

    #[test]
    fn rows_floors_and_missing_figures() {
        let start = |first_ms| Start {
            cold_ms: 20.0,
            ..fixtures::start(10.0, first_ms, 5.0)
        };
        let measured = FirstInvocation {
            rows: vec![Row {
                function: "F".into(),
                memory_mb: 256,
                size: "typical".into(),
                request: "a batch".into(),
                variant: SHIPPED,
                starts: vec![start(6.0), start(7.0), start(8.0)],
            }],
            floors: vec![Floor {
                function: "F".into(),
                memory_mb: 256,
                init_ms: 8.0,
            }],
            starts: 3,
            builds: "release",
            tls: vec![tls::Row {
                variant: tls::VARIANTS[1],
                memory_mb: 256,
                client_ms: vec![1.0, 2.0, 30.0],
                first_call_ms: vec![170.0, 180.0, 160.0],
                first_call_cpu_ms: vec![20.0],
                second_call_ms: vec![1.5],
            }],
            export: Some(Export {
                memory_mb: 256,
                spans: 21,
                rounds: 3,
                rows: vec![
                    crate::export::Row {
                        description: "datagrams",
                        us: vec![20.0, 10.0, 30.0],
                    },
                    crate::export::Row {
                        description: "a POST",
                        us: vec![50.0, 40.0, 60.0],
                    },
                ],
            }),
        };
        let md = section(&Ok(measured), &Machine::here());
        assert!(
            md.contains(
                "| F (256 MB) | typical: a batch | as shipped | 10.0 | 7.0 | 5.0 | 1.40 | 20.0 | - | - | 0 |"
            ),
            "{md}"
        );
        assert!(md.contains("| F | 256 | 8.0 | 10.0 | - | 2.0 |"), "{md}");
        assert!(md.contains("| datagrams | 20 | 30 | 1.00 |"), "{md}");
        assert!(md.contains("| a POST | 50 | 60 | 2.50 |"), "{md}");
        assert!(
            md.contains(
                "| aws-lc (the SDK's default) | system and the run's authority | 2.0 | 170.0 | 20.0 | 1.5 |"
            ),
            "{md}"
        );
        assert!(md.starts_with(SECTION.0) && md.trim_end().ends_with(SECTION.1));
        assert!(
            !md.contains("The cost of tracing"),
            "measured only in the full run"
        );
        let skipped = section(&Err("no limits".into()), &Machine::here());
        assert!(skipped.contains("Not measured: no limits."), "{skipped}");
    }

    #[test]
    fn the_goal_line_names_the_largest_ratio_as_shipped() {
        let row = |size, first_ms| {
            fixtures::row("F", size, SHIPPED, fixtures::start(10.0, first_ms, 5.0))
        };
        let line = |rows| {
            let mut md = String::new();
            goal_line(&mut md, &fixtures::measured(rows));
            md
        };
        let above = line(vec![row("small", 5.5), row("large", 6.5)]);
        assert!(
            above.contains("at most 1.30 (F, large request): above the template's goal of 1.2"),
            "{above}"
        );
        let within = line(vec![row("small", 5.5)]);
        assert!(
            within.contains("at most 1.10 (F, small request): within"),
            "{within}"
        );
        assert_eq!(line(Vec::new()), "", "nothing measured as shipped");
    }

    #[test]
    fn tracing_costs_are_against_tracing_off() {
        let row = |variant, init_ms, steady_ms| {
            fixtures::row(
                "F",
                "typical",
                variant,
                fixtures::start(init_ms, 6.0, steady_ms),
            )
        };
        let measured = fixtures::measured(vec![
            row(SHIPPED, 12.0, 5.5),
            row(NOT_SAMPLED, 11.0, 5.25),
            row(TRACING_OFF, 10.0, 5.0),
        ]);
        let mut md = String::new();
        tracing_table(&mut md, &measured);
        for line in [
            "| F | as shipped | 12.0 | 6.0 | 5.5 | 1.09 | +2.0 | +0.50 |",
            "| F | tracing on, not sampled | 11.0 | 6.0 | 5.2 | 1.14 | +1.0 | +0.25 |",
            "| F | TRACING=off | 10.0 | 6.0 | 5.0 | 1.20 | +0.0 | +0.00 |",
        ] {
            assert!(md.contains(line), "{line} in\n{md}");
        }
    }
}

//! The Arrow worker's section of `BENCHMARKS.md` (`lab_probes::section`):
//! the fan-out against one function as the orders table grows, and the daily
//! report's rate. It needs the release bootstrap, so `--quick` says so.

use crate::fan_out::{self, DayReport, Measured, ORDERS_PER_CUSTOMER};
use lab_probes::section::{Context, Section};
use std::fmt::Write as _;

/// The vCPUs Lambda gives `memory_mb` on demand.
fn vcpus(memory_mb: u32) -> f64 {
    local_stack::cgroup::Share::of(u64::from(memory_mb), None).vcpus()
}

/// The section's heading.
const TITLE: &str = "Past one function: the Step Functions fan-out against one function";

/// Seconds of the function's CPU a daily report may use at the template's
/// 120 s timeout, leaving the deadline's margin and the report's write.
const REPORT_CPU_SECONDS: f64 = 110.0;

fn cell(value: Option<f64>, decimals: usize) -> String {
    value.map_or_else(|| "-".to_owned(), |v| format!("{v:.decimals$}"))
}

/// Measure (at full scale only), then write the section.
pub fn measure(context: &Context) -> Result<Section, String> {
    let body = if context.full {
        let tick = |step: &str| eprintln!("lab: {step}");
        text(&fan_out::measure(&tick)?, &context.machine)
    } else {
        "Not measured: not in quick mode (it needs the release builds).\n".to_owned()
    };
    Ok(Section {
        title: TITLE.to_owned(),
        body,
        held: Vec::new(),
        broke: Vec::new(),
    })
}

/// The text under the heading.
fn text(measured: &Measured, machine: &str) -> String {
    let mut md = String::new();
    let Measured {
        rows,
        days,
        memory_mb,
    } = measured;
    let _ = writeln!(
        md,
        "Measured on {} (`cargo xtask lab section arrow-worker` measures this section again on its own). The Arrow \
         worker's release bootstrap under the runtime interface emulator with its template limits \
         ({} MB: {:.2} vCPU of time, as on Lambda) and the arena pre-warm off (`ARENA_MIB=0`: its pages \
         would be the peak whatever the work), two execution environments, DynamoDB Local holding \
         the orders ({ORDERS_PER_CUSTOMER} per customer, in four currencies, in the order processor's schema, written by this \
         function's lab crate), the template's state machine on the local Step Functions engine with S3 \
         (moto), all on loopback without TLS. The query aggregates by customer (`limit` 20,000). \
         \"Seconds\" run from the request to the answer, cold starts included; \"peak\" is the highest \
         memory peak of an environment's cgroup (emulator and function; the merge runs in one of them); \
         \"per segment\" is what one segment stored in S3 (its partial, Arrow IPC) and the merge read \
         back; answers over 6 MB were stored in S3 and answered by their key (at most 20,000 customers \
         are answered, so the answer stops growing at 100,000 orders). One function reads the whole \
         table as one sequence of pages; here its time grows faster than the table, which we have not \
         traced further (DynamoDB Local's paging is the first suspect): the segments read short \
         sequences side by side. The local engine and DynamoDB Local share this machine's \
         two cores with the functions, so the fan-out's width buys less here than on AWS, where each \
         segment has its own vCPU and DynamoDB scales its partitions. \"Out of time\": the one \
         function reached its deadline (`DeadlineTooShort`, the template's 120 s) before its last page.\n",
        machine,
        memory_mb,
        vcpus(*memory_mb),
    );
    let _ = writeln!(
        md,
        "| orders | customers | how | seconds | peak MiB | per segment KiB | answer MB |"
    );
    let _ = writeln!(md, "|---:|---:|---|---:|---:|---:|---:|");
    for row in rows {
        for m in &row.measures {
            let how = m
                .segments
                .map_or_else(|| "one function".to_owned(), |s| format!("{s} segments"));
            let (seconds, answer) = if m.out_of_time {
                (format!("{:.1}, out of time", m.seconds), "-".to_owned())
            } else {
                let mb = m.answer_bytes as f64 / 1e6;
                (format!("{:.1}", m.seconds), format!("{mb:.1}"))
            };
            let _ = writeln!(
                md,
                "| {} | {} | {how} | {seconds} | {} | {} | {answer} |",
                row.orders,
                row.customers,
                cell(m.peak_mib, 0),
                cell(m.bytes_per_segment.map(|b| b / 1024.0), 0),
            );
        }
    }
    let _ = writeln!(md);
    daily_report(&mut md, days, *memory_mb);
    md
}

/// The daily report's table: one function reading one day.
fn daily_report(md: &mut String, days: &[DayReport], memory_mb: u32) {
    let _ = writeln!(
        md,
        "### The daily report: how large a day one invocation reads
"
    );
    let _ = writeln!(
        md,
        "The same worker and DynamoDB Local, the orders of one day written the same way, then the \
         daily report of that day (after one report of an empty day, so the measured one is not the \
         first invocation): every page of the day's {shards} shards of the `by-day` index, read side \
         by side and added up as it arrives. \"Seconds\" is the invocation's duration and \"CPU\" the \
         function's CPU time in it (every thread), both as the worker measured them (`run`). Here \
         DynamoDB Local, on the same two cores, sets the pace; the function's CPU per order (SDK \
         parsing, Arrow batches, adding up) is its own ceiling: at the template's {memory_mb} MB it has \
         {vcpus:.2} vCPU, so \"a day in {REPORT_CPU_SECONDS:.0} s of CPU\" is the most orders one invocation can \
         add up within the template's 120 s timeout however fast DynamoDB answers. The day index takes \
         about 1,000 writes a second per shard, so a day can hold up to about {ceiling} million orders. \
         A day that one invocation does not read within its share of the time goes to the report \
         state machine, a slice of time of one shard per segment (functions/arrow-worker/README.md).\n",
        vcpus = vcpus(memory_mb),
        shards = shared::orders::DAY_SHARDS,
        ceiling = u64::from(shared::orders::DAY_SHARDS) * 86_400 / 1_000,
    );
    let _ = writeln!(
        md,
        "| orders of the day | pages | seconds | CPU s | orders per CPU second | a day in {REPORT_CPU_SECONDS:.0} s of CPU |"
    );
    let _ = writeln!(md, "|---:|---:|---:|---:|---:|---:|");
    for day in days {
        let per_cpu_second = day.orders as f64 / day.cpu_seconds.max(1e-9);
        let _ = writeln!(
            md,
            "| {} | {} | {:.1} | {:.2} | {:.0} | {:.1} million |",
            day.orders,
            day.pages,
            day.seconds,
            day.cpu_seconds,
            per_cpu_second,
            per_cpu_second * REPORT_CPU_SECONDS / 1e6
        );
    }
    let _ = writeln!(md);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fan_out::{Measure, Row};

    #[test]
    fn every_measure_is_a_row_and_missing_figures_are_dashes() {
        let measure = |segments, peak| Measure {
            segments,
            seconds: 2.5,
            peak_mib: peak,
            bytes_per_segment: segments.map(|_| 2048.0),
            answer_bytes: 7_000_000,
            out_of_time: false,
        };
        let rows = vec![Row {
            orders: 1_000,
            customers: 200,
            measures: vec![measure(None, Some(100.0)), measure(Some(16), None)],
        }];
        let mut late = measure(None, None);
        late.out_of_time = true;
        let rows = [
            rows,
            vec![Row {
                orders: 9_000,
                customers: 1_800,
                measures: vec![late],
            }],
        ]
        .concat();
        let days = vec![DayReport {
            orders: 50_000,
            pages: 40,
            seconds: 12.5,
            cpu_seconds: 0.5,
        }];
        let md = text(
            &Measured {
                rows,
                days,
                memory_mb: 1769,
            },
            "2 core(s)",
        );
        assert!(
            md.contains("| 1000 | 200 | one function | 2.5 | 100 | - | 7.0 |"),
            "{md}"
        );
        assert!(
            md.contains("| 1000 | 200 | 16 segments | 2.5 | - | 2 | 7.0 |"),
            "{md}"
        );
        assert!(
            md.contains("| 9000 | 1800 | one function | 2.5, out of time | - | - | - |"),
            "{md}"
        );
        assert!(
            md.contains("| 50000 | 40 | 12.5 | 0.50 | 100000 | 11.0 million |"),
            "{md}"
        );
    }
}

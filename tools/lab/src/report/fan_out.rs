//! Section 6 of `BENCHMARKS.md`: the fan-out against one function as the
//! orders table grows. It sits between markers, so `cargo xtask lab fan-out`
//! can replace it in an existing report without running the rest of the lab.

use super::splice::{self, Markers};
use crate::fan_out::Row;
use crate::machine::Machine;
use crate::stack::ORDERS_PER_CUSTOMER;
use std::fmt::Write as _;
use std::path::Path;

/// Markers around the section.
pub const SECTION: Markers = ("<!-- fan-out -->", "<!-- /fan-out -->");

/// The measured rows, or why there are none.
pub type FanOut = Result<Vec<Row>, String>;

fn cell(value: Option<f64>, decimals: usize) -> String {
    value.map_or_else(|| "-".to_owned(), |v| format!("{v:.decimals$}"))
}

/// The section, between its markers.
pub fn section(fan_out: &FanOut, machine: &Machine) -> String {
    let mut md = String::new();
    let _ = writeln!(md, "{}", SECTION.0);
    let _ = writeln!(
        md,
        "## 6. Past one function: the Step Functions fan-out against one function\n"
    );
    let rows = match fan_out {
        Err(why) => {
            let _ = writeln!(md, "Not measured: {why}.\n");
            let _ = writeln!(md, "{}", SECTION.1);
            return md;
        }
        Ok(rows) => rows,
    };
    let _ = writeln!(
        md,
        "Measured on {} (`cargo xtask lab fan-out` measures this section again on its own). The Arrow \
         worker's release bootstrap under the runtime interface emulator with its template limits \
         (1,769 MB: one vCPU of time, as on Lambda) and the arena pre-warm off (`ARENA_MIB=0`: its pages \
         would be the peak whatever the work), two execution environments, DynamoDB Local holding \
         the orders ({ORDERS_PER_CUSTOMER} per customer, in four currencies, written by the order \
         processor's store), the template's state machine on the local Step Functions engine with S3 \
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
         segment has its own vCPU and DynamoDB scales its partitions.\n",
        machine.line()
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
            let _ = writeln!(
                md,
                "| {} | {} | {how} | {:.1} | {} | {} | {:.1} |",
                row.orders,
                row.customers,
                m.seconds,
                cell(m.peak_mib, 0),
                cell(m.bytes_per_segment.map(|b| b / 1024.0), 0),
                m.answer_bytes as f64 / 1e6
            );
        }
    }
    let _ = writeln!(md);
    let _ = writeln!(md, "{}", SECTION.1);
    md
}

/// The report in `dir`, if [`rewrite`] can replace its fan-out section.
pub fn rewritable(dir: &Path) -> Result<String, String> {
    splice::rewritable(dir, &[SECTION])
}

/// Replace the fan-out section of the report in `dir`.
pub fn rewrite(dir: &Path, fan_out: &FanOut, machine: &Machine) -> Result<(), String> {
    splice::rewrite(dir, &[(SECTION, section(fan_out, machine))])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fan_out::Measure;

    #[test]
    fn every_measure_is_a_row_and_missing_figures_are_dashes() {
        let measure = |segments, peak| Measure {
            segments,
            seconds: 2.5,
            peak_mib: peak,
            bytes_per_segment: segments.map(|_| 2048.0),
            answer_bytes: 7_000_000,
        };
        let rows = vec![Row {
            orders: 1_000,
            customers: 200,
            measures: vec![measure(None, Some(100.0)), measure(Some(16), None)],
        }];
        let md = section(&Ok(rows), &Machine::here());
        assert!(
            md.contains("| 1000 | 200 | one function | 2.5 | 100 | - | 7.0 |"),
            "{md}"
        );
        assert!(
            md.contains("| 1000 | 200 | 16 segments | 2.5 | - | 2 | 7.0 |"),
            "{md}"
        );
        assert!(md.starts_with(SECTION.0) && md.trim_end().ends_with(SECTION.1));
        let skipped = section(&Err("no limits".into()), &Machine::here());
        assert!(skipped.contains("Not measured: no limits."), "{skipped}");
    }
}

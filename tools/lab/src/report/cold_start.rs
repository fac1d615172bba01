//! Section 3 of `BENCHMARKS.md`: each function's init duration and the size
//! of its bootstrap, with and without its tracing exporter. It sits between
//! markers, so `cargo xtask lab cold-start` can replace it in an existing
//! report without running the rest of the lab.

use crate::cold_start::{BUILD_DIRS, Row};
use crate::splice::{self, Markers};
use std::fmt::Write as _;
use std::path::Path;

/// Markers around the section.
pub const SECTION: Markers = ("<!-- cold-start -->", "<!-- /cold-start -->");

fn mib(value: Option<f64>) -> String {
    value.map_or_else(|| "not built".to_owned(), |v| format!("{v:.2}"))
}

/// The section, between its markers; `None`: not measured (quick mode).
pub fn section(rows: &Option<Vec<Row>>) -> String {
    let mut md = String::new();
    let _ = writeln!(md, "{}", SECTION.0);
    let _ = writeln!(md, "## 3. Cold start and binary size\n");
    let Some(rows) = rows else {
        let _ = writeln!(
            md,
            "Not measured in quick mode (it needs the release builds).\n"
        );
        let _ = writeln!(md, "{}", SECTION.1);
        return md;
    };
    let _ = writeln!(
        md,
        "Init duration reported by the Lambda runtime interface emulator for the `sam build` release binary \
         (fat LTO), median of {} cold starts each, with the template's memory size and settings (no AWS \
         endpoint is reached during init; `cargo xtask lab cold-start` measures this section again on its \
         own). Sizes of the bootstraps in {}. \"Without traces\": the same function built as `sam build` \
         builds it (`cargo lambda build --release`) without its default feature `traces`, so without the \
         OpenTelemetry exporter (see `shared/README.md`, Traces); \"traces add\" is the difference, x86_64.\n",
        rows.first().map_or(0, |r| r.all_ms.len()),
        BUILD_DIRS
            .iter()
            .map(|(arch, dir)| format!("`{dir}` ({arch})"))
            .collect::<Vec<_>>()
            .join(" and ")
    );
    let _ = writeln!(
        md,
        "| function | memory MB | init ms (median) | every start ms | x86_64 MiB | arm64 MiB | x86_64 MiB without traces | traces add |\n\
         |---|---:|---:|---|---:|---:|---:|---:|"
    );
    for row in rows {
        let size = |i: usize| mib(row.sizes_mib.get(i).copied().flatten());
        let added = match (
            row.sizes_mib.first().copied().flatten(),
            row.without_traces_mib,
        ) {
            (Some(with), Some(without)) if without > 0.0 => format!(
                "{:.2} MiB ({:+.0}%)",
                with - without,
                (with / without - 1.0) * 100.0
            ),
            _ => "-".to_owned(),
        };
        let every: Vec<String> = row.all_ms.iter().map(|ms| format!("{ms:.1}")).collect();
        let _ = writeln!(
            md,
            "| {} | {} | {:.1} | {} | {} | {} | {} | {added} |",
            row.function,
            row.memory_mb,
            row.init_ms,
            every.join(", "),
            size(0),
            size(1),
            mib(row.without_traces_mib),
        );
    }
    let _ = writeln!(
        md,
        "\nThe arm64 bootstraps come from `cargo xtask build-arm64`; {}.\n",
        if rows
            .iter()
            .any(|r| r.sizes_mib.get(1).copied().flatten().is_none())
        {
            "run it to fill the column"
        } else {
            "their cold start is not measured here (no arm64 host)"
        }
    );
    let _ = writeln!(md, "{}", SECTION.1);
    md
}

/// The report in `dir`, if [`rewrite`] can replace its cold-start section.
pub fn rewritable(dir: &Path) -> Result<String, String> {
    splice::rewritable(dir, &[SECTION])
}

/// Replace the cold-start section of the report in `dir`.
pub fn rewrite(dir: &Path, rows: &[Row]) -> Result<(), String> {
    splice::rewrite(dir, &[(SECTION, section(&Some(rows.to_vec())))])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_size_tracing_adds_is_the_difference_and_missing_builds_say_so() {
        let row = Row {
            function: "OrderProcessorFunction".to_owned(),
            memory_mb: 256,
            init_ms: 2.0,
            all_ms: vec![2.0],
            sizes_mib: vec![Some(6.5), None],
            without_traces_mib: Some(5.0),
        };
        let md = section(&Some(vec![row]));
        assert!(md.starts_with(SECTION.0) && md.trim_end().ends_with(SECTION.1));
        assert!(
            md.contains("| 6.50 | not built | 5.00 | 1.50 MiB (+30%) |"),
            "{md}"
        );
        assert!(section(&None).contains("Not measured in quick mode"));
    }
}

//! The password hasher's section of `BENCHMARKS.md` (`lab_probes::section`):
//! every bcrypt candidate side by side, the lane-count curve of this
//! function's EksBlowfish, and the scaling over threads; and the property the
//! lab checks, every candidate computing the `bcrypt` crate's hashes.

use crate::figures::{self, Bcrypt, Figure};
use lab_probes::plot::{self, Chart, Kind, Series};
use lab_probes::section::{Context, Section};
use std::fmt::Write as _;

/// The section's heading.
const TITLE: &str = "bcrypt: every candidate side by side, and scaling";

/// Measure, then write the section and its charts.
pub fn measure(context: &Context) -> Result<Section, String> {
    let b = figures::measure(context.full, context.cores)?;
    let (held, broke) = match figures::check_agreement(&b) {
        Ok(()) => (
            vec!["bcrypt: every candidate's hashes equal the bcrypt crate's".to_owned()],
            Vec::new(),
        ),
        Err(why) => (Vec::new(), vec![why]),
    };
    Ok(Section {
        title: TITLE.to_owned(),
        body: body(context, &b)?,
        held,
        broke,
    })
}

/// The text under the heading, with its charts written.
fn body(context: &Context, b: &Bcrypt) -> Result<String, String> {
    let mut md = String::new();
    let _ = writeln!(
        md,
        "Measured on {} (`cargo xtask lab section password-hasher` measures this section again on its own). Cost {}, {} \
         rounds on one thread; each round times every candidate once, in an order that rotates from round to round, \
         so drift on a shared machine hits all alike. Figures are medians over the rounds, ratios the \
         medians of the per-round ratios. Times are the thread's CPU time, so time spent waiting for a busy \
         core is not counted. \"Single\" is one hash at a time (a one-password request), \"batch\" {} hashes \
         at once on one thread; \"lanes\" are the hashes a candidate runs in lockstep on one core. \
         `crypt(3)` is libxcrypt's, called from Python's `crypt` module with the timer inside that process; \
         the `bcrypt` crate is what the function computes with its `bcrypt-crate` feature.\n",
        context.machine, b.cost, b.rounds, b.batch
    );
    let agreement = if b.differing.is_empty() {
        "Before timing, every candidate hashed the batch's passwords at cost 4: all equal the `bcrypt` \
         crate's hashes."
            .to_owned()
    } else {
        format!(
            "Before timing, every candidate hashed the batch's passwords at cost 4: **{} differ from the \
             `bcrypt` crate's hashes**; their times mean nothing.",
            b.differing.join(", ")
        )
    };
    let _ = writeln!(md, "{agreement}\n");
    let _ = writeln!(
        md,
        "| candidate | lanes | single ms/hash | single vs libxcrypt | batch ms/hash | batch speedup vs `bcrypt` crate |\n\
         |---|---:|---:|---:|---:|---:|"
    );
    for c in &b.candidates {
        let (single_ms, single_ratio) = cells(c.single, 3);
        let (batch_ms, batch_ratio) = cells(c.batch, 2);
        let _ = writeln!(
            md,
            "| {} | {} | {single_ms} | {single_ratio} | {batch_ms} | {batch_ratio} |",
            c.name, c.lanes
        );
    }
    lane_curve(&mut md, context, b)?;
    scaling(&mut md, context, b)?;
    Ok(md)
}

/// A figure's time and ratio as table cells ("-" where not measured).
fn cells(figure: Option<Figure>, ratio_decimals: usize) -> (String, String) {
    figure.map_or(("-".to_owned(), "-".to_owned()), |f| {
        (
            format!("{:.2}", f.ms),
            format!("{:.ratio_decimals$}", f.ratio),
        )
    })
}

fn lane_curve(md: &mut String, context: &Context, b: &Bcrypt) -> Result<(), String> {
    let _ = writeln!(
        md,
        "\nThis function's EksBlowfish on the batch, by the number of hashes in lockstep (it ships **{}**):\n\n\
         | lanes | ms/hash | speedup vs `bcrypt` crate | speedup vs 1 lane |\n|---:|---:|---:|---:|",
        b.shipped_lanes
    );
    // Both speedups from the per-round ratios to the crate.
    let one_lane = b.lane_curve.first().map_or(0.0, |(_, f)| f.ratio);
    for &(lanes, f) in &b.lane_curve {
        let shown = if lanes == b.shipped_lanes {
            format!("**{lanes}**")
        } else {
            lanes.to_string()
        };
        let _ = writeln!(
            md,
            "| {shown} | {:.2} | {:.2} | {:.2} |",
            f.ms,
            f.ratio,
            f.ratio / one_lane.max(f64::MIN_POSITIVE)
        );
    }
    let measured: Vec<(f64, f64)> = b
        .lane_curve
        .iter()
        .map(|&(lanes, f)| (lanes as f64, f.ratio))
        .collect();
    let per_lane = measured.first().map_or(0.0, |p| p.1);
    let ideal = measured.iter().map(|p| (p.0, p.0 * per_lane)).collect();
    let (path, file) = context.chart("bcrypt-lanes.svg")?;
    plot::write_svg(
        &path,
        &Chart {
            title: "bcrypt batch on one thread: speedup over the bcrypt crate by lanes",
            x_label: "hashes in lockstep (lanes)",
            y_label: "speedup over the bcrypt crate",
            kind: Kind::Lines,
            log_x: false,
            series: &[
                Series {
                    name: "measured".into(),
                    points: measured,
                    labels: Vec::new(),
                },
                Series {
                    name: "ideal (lanes x 1 lane)".into(),
                    points: ideal,
                    labels: Vec::new(),
                },
            ],
        },
    )?;
    let _ = writeln!(md, "\n![bcrypt speedup by lanes]({file})\n");
    Ok(())
}

fn scaling(md: &mut String, context: &Context, b: &Bcrypt) -> Result<(), String> {
    let _ = writeln!(
        md,
        "The function's own batch path (`hash_all`: groups of {} lanes as tasks on the Rayon pool), {} hashes \
         on pools of 1 to {} threads (wall clock, best of two each):\n\n\
         | threads | seconds | speedup | efficiency |\n|---:|---:|---:|---:|",
        b.shipped_lanes,
        b.batch,
        b.scaling.len()
    );
    let one = b.scaling.first().map_or(0.0, |s| s.1);
    let mut speedups = Vec::new();
    for &(threads, seconds) in &b.scaling {
        let speedup = one / seconds.max(f64::MIN_POSITIVE);
        speedups.push((threads as f64, speedup));
        let _ = writeln!(
            md,
            "| {threads} | {seconds:.3} | {speedup:.2} | {:.2} |",
            speedup / threads as f64
        );
    }
    let ideal = speedups.iter().map(|p| (p.0, p.0)).collect();
    let (path, file) = context.chart("bcrypt-scaling.svg")?;
    plot::write_svg(
        &path,
        &Chart {
            title: "bcrypt batch speedup over threads",
            x_label: "threads",
            y_label: "speedup",
            kind: Kind::Lines,
            log_x: false,
            series: &[
                Series {
                    name: "measured".into(),
                    points: speedups,
                    labels: Vec::new(),
                },
                Series {
                    name: "ideal".into(),
                    points: ideal,
                    labels: Vec::new(),
                },
            ],
        },
    )?;
    let _ = writeln!(md, "\n![bcrypt scaling]({file})\n");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::figures::Candidate;
    use std::path::PathBuf;

    fn measured() -> Bcrypt {
        let figure = |ms, ratio| Some(Figure { ms, ratio });
        let candidate = |name: &str, lanes, single, batch| Candidate {
            name: name.to_owned(),
            lanes,
            single,
            batch,
        };
        Bcrypt {
            cost: 10,
            batch: 24,
            rounds: 5,
            candidates: vec![
                candidate("libxcrypt `crypt(3)`", 1, figure(42.5, 1.0), None),
                candidate("`bcrypt` crate", 1, figure(49.8, 1.172), figure(49.1, 1.0)),
                candidate("EksBlowfish", 6, figure(43.9, 1.033), figure(10.4, 4.73)),
            ],
            lane_curve: vec![
                (
                    1,
                    Figure {
                        ms: 44.0,
                        ratio: 1.1,
                    },
                ),
                (
                    6,
                    Figure {
                        ms: 10.4,
                        ratio: 4.73,
                    },
                ),
            ],
            shipped_lanes: 6,
            differing: Vec::new(),
            scaling: vec![(1, 0.25), (2, 0.128)],
        }
    }

    /// A context writing into a fresh folder named for `test`.
    fn context(test: &str) -> Context {
        Context {
            full: true,
            cores: 2,
            plots: "plots".into(),
            report_dir: std::env::temp_dir().join(format!("{test}-{}", std::process::id())),
            machine: "2 core(s), a CPU".into(),
        }
    }

    #[test]
    fn the_section_has_every_candidate_the_lane_curve_and_both_plots() {
        let context = context("hasher-bcrypt-report");
        let dir: PathBuf = context.report_dir.clone();
        let md = body(&context, &measured());
        let lanes_plot = dir.join("plots").join("bcrypt-lanes.svg").exists();
        let scaling_plot = dir.join("plots").join("bcrypt-scaling.svg").exists();
        let _ = std::fs::remove_dir_all(&dir);
        let md = md.expect("written");
        assert!(md.contains("](plots/bcrypt-lanes.svg)"), "{md}");
        for row in [
            "| libxcrypt `crypt(3)` | 1 | 42.50 | 1.000 | - | - |",
            "| `bcrypt` crate | 1 | 49.80 | 1.172 | 49.10 | 1.00 |",
            "| EksBlowfish | 6 | 43.90 | 1.033 | 10.40 | 4.73 |",
            "| **6** | 10.40 | 4.73 | 4.30 |",
            "| 2 | 0.128 | 1.95 | 0.98 |",
            "all equal the `bcrypt` crate's hashes",
        ] {
            assert!(md.contains(row), "no {row:?} in\n{md}");
        }
        assert!(lanes_plot && scaling_plot);
    }

    #[test]
    fn differing_candidates_are_named_in_the_section() {
        let context = context("hasher-bcrypt-differ");
        let mut b = measured();
        b.differing = vec!["own-3 lanes".into()];
        let md = body(&context, &b);
        let _ = std::fs::remove_dir_all(&context.report_dir);
        assert!(md.expect("written").contains("**own-3 lanes differ"));
    }
}
